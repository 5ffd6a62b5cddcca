"""The wall and what crosses it: used by both the judge and the candidate's process.

The wall: bwrap.py (bubblewrap and the seccomp filter), isolation.py (process limits, the
environment allowlist, prctl), view.py (what a candidate may read: the one home of it).
What crosses, all of it judge-owned memory the candidate maps or bytes on a socket:
transport.py (JSON and memfds), regions.py (input sets, CPU output slots), devmem.py (CUDA
virtual memory shared by descriptor), arena.py with arena.c (the candidate's device
allocator in a region the judge owns), outputs.py (a call's output leaves, both sides walk
them). warmup.py warms Triton in either process.

May import: the sandbox's shared words (`config.py`, `results.py`, `contract.py`, `rules.py`,
`errors.py`). Never judge/ or candidate/.
"""
