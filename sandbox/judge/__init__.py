"""The judge's side of the wall: the processes that hold the reference, time and decide.

pool.py starts and feeds judge processes (worker.py; what it holds of a task in shape.py, its
machine's environment in machine.py); the judge builds the reference, pristine
inputs and tolerances, times eager, torch.compile and the candidate on its own clock (timed.py,
timing.py), reads the candidate's outputs (reading.py) and the driver's memory account
(nvml.py), sizes the arena and measures the candidate's memory (memory.py), compares
(compare.py; eager's error near the inputs, nearby.py) and gives the verdict (verdict.py,
evaluation.py). It talks to the candidate's process only through remote.py. Never runs
candidate code.

May import: the sandbox's shared words (`config.py`, `results.py`, `contract.py`, `rules.py`,
`errors.py`), `crossing/`, `static/`, `task/`. Never candidate/ (a test,
tests/test_sandbox_layout.py, checks both sides).
"""
