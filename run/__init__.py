"""The run lifecycle below the agents: its config, its directory, its records, its owner and
locks, the CPU shrink of a task's sizes.

May import: `knobs.py`, `decisions.py`, `errors.py`, `store.py` (records.py syncs a run into it),
`cluster/` (the executors' names), `sandbox/`. Never `agents/`, `report/`, `graph.py`,
`suites/` or `commands/`.
"""
