"""The commands beside cli.py: what each `kernelwright` subcommand does.

May import: `suites/` (the suite and the night: commands/suite.py and nightly.py print them),
`graph.py`, `agents/`, `run/`, `report/`, `runtime/` (export --guard), `cluster/`, `store.py`,
`kernel_versions.py`, `decisions.py`, `errors.py`, `sandbox/`. Never `cli.py`, above.
"""
