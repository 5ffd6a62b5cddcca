"""The static checks on a candidate's source, before any of it runs.

check.py is the AST check (with aliases.py; published.py: what it accepts of published Triton
code; messages.py: what each refusal says to write instead), bounded.py runs it in a forked
child under size, time and memory limits; pyparse.py (the one parse lock) and sourcetext.py
(the one reading of a source as UTF-8) are shared with the task loader and the candidate's
process.

May import: the sandbox's shared words (`contract.py`, `rules.py`). Never judge/, candidate/ or
task/.
"""
