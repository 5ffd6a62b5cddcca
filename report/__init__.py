"""Run, suite and nightly reports: Markdown, JSON, PNG plots (matplotlib's Agg) and static HTML.

Every report is written from data on disk (a run directory, suite rows, nightly history) so it can
be regenerated at any time. The modules: format (numbers, tables, JSON), html (Jinja2 templates,
pygments), plots, run (one run's report), suite, nightly and verdict (the verdict paragraph's
words). What they decide (best, regression, fast_p, what the verdict says won) is decisions.py's.

May import: `decisions.py` (what is best and why), `run/` (the candidate key and a run's
status: rundir.py, owner.py), `store.py` (metrics.py's tables), `sandbox/` (EvalResult). Never
`agents/`, `graph.py`, `suites/` or `commands/`.
"""
