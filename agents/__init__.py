"""The graph's nodes: the planner (with the profile node), coder, tester, critic and finalize,
their shared state (state.py), what a node needs at run time (context.py), the prompts' templates
(prompts.py) and the facts of a task the prompts show (taskfacts.py); the LLM client in llm/.

May import: `llm/`, `run/`, `report/` (finalize writes the run's report), `codegen/` (the
offline coder), `cluster/` (the evaluator's interface), `decisions.py`, `store.py`, `sandbox/`.
Never `commands/`, `suites/` or `graph.py`, which stand above.
"""
