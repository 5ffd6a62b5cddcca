"""What a candidate may read: the one statement of it, for both sides of the wall.

The operating-system sandbox (bwrap.py, the judge's side) binds these read-only into the
candidate's view; the audit-hook guard (candidate/process.py, inside the candidate's process)
allows reads only there and in the candidate's home. Both take the list from here.
"""

from __future__ import annotations

import os
import sys

# This package's directories: the sandbox/ folder (the evaluator's own code, trusted by the
# guard) and the kernelwright package above it (installed editable, it lives outside
# site-packages, so both sides name it).
SANDBOX_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE_DIR = os.path.dirname(SANDBOX_DIR)

# /etc entries the dynamic loader, Python and the C compiler (Triton builds its launcher stubs
# with cc) read; not the rest of /etc (shadow, ssh keys, credentials).
ETC = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
)

# The system's directories (bwrap binds /usr and the /bin, /lib links and a fresh /dev, /proc of
# its own PID namespace, and /sys for the CUDA driver); the guard also allows /opt and the
# NVIDIA persistence daemon's socket directory.
SYSTEM_DIRS = (
    "/usr",
    "/lib",
    "/lib64",
    "/opt",
    "/sys",
    "/dev",
    "/bin",
    "/sbin",
    "/run/nvidia-persistenced",
)


def interpreter_prefixes() -> set[str]:
    """The Python installation's prefixes."""
    return {sys.prefix, sys.base_prefix, sys.exec_prefix}


def import_path() -> set[str]:
    """Every directory on sys.path."""
    return {p for p in sys.path if p and os.path.isdir(p)}
