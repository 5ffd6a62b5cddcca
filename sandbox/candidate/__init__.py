"""The candidate's side of the wall: the only sandbox code that runs beside candidate code.

zygote.py is started under bubblewrap by the judge and forks one process per candidate
(process.py); inside it, the audit-hook guard (guard.py, places.py), the integrity snapshot
(integrity.py), launch counting (launches.py) and the Triton interpreter's fixes
(tritoncompat.py).

May import: the sandbox's shared words (`config.py`, `results.py`, `contract.py`, `rules.py`,
`errors.py`), `crossing/`, `static/`, `task/`. Never judge/: tests/test_sandbox_layout.py
fails on any import of it, direct or through another kernelwright module.
"""
