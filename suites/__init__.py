"""Suites and nights: many tasks through the optimizer, and the nightly job over them, apart from
the commands that parse their arguments and print them (commands/suite.py, commands/nightly.py).

tasks.py finds the tasks of a suite (files, directories in KernelBench's layout), names them and
gives the optimizer that runs each (graph_optimizer: graph.optimize); suite.py runs them, jobs at
a time, resumable from a state file, and writes the suite's report; nightly.py re-verifies each
task's best kernel, searches again where it is missing or regressed, takes a regressed version
back and writes the night's report. The optimizer and how a run shows its progress are passed
in by the command (tests pass scripted ones).

May import: `graph.py` (graph.optimize runs each task), `cluster/` (the evaluators),
`decisions.py`, `errors.py`, `kernel_versions.py` (a revert), `report/` (the suite's and the
night's reports), `run/` (config, run directories, records), `sandbox/` (tasks, results),
`store.py`. Never `commands/` or `cli.py`, above.
"""
