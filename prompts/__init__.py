"""Data the agents read, not code they run: the Jinja2 templates and, in examples/, the worked
kernels the coder's prompt shows (each a candidate file of its own, importing torch and triton).

May import: nothing.
"""
