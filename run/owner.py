"""Who runs a run: run.json's owner (host, pid and the pid's start time, read from Linux's
/proc) and a run's true status, "interrupted" when its owner is gone.

A run's status says "running" from the moment it starts until it finishes, waits for a person, or
is interrupted; a process killed with SIGKILL (the OOM killer, `kill -9`, a lost machine) never
gets to write anything else. run.json therefore names its owner (host, pid and the pid's start
time, so that a recycled pid is not mistaken for it), and a reader on the same host that finds the
owner gone reads the run as interrupted, which is what it is: resumable.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

INTERRUPTED = "interrupted"


def _process_start(pid: int) -> str | None:
    """The start time of process `pid` in clock ticks since boot (Linux's /proc), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # after "pid (comm)": field 3 onwards
    return fields[19] if len(fields) > 19 else None  # field 22, starttime


def run_owner() -> dict[str, Any]:
    """run.json's owner: the process running the run now."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "started": _process_start(pid)}


def owner_gone(owner: Any) -> bool:
    """True when `owner` (run_owner() of some process) is known to have exited: it ran on this
    host and its pid is dead or now belongs to a later process. Another host's: not known."""
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return False
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        pass
    started = owner.get("started")
    return started is not None and _process_start(pid) not in (None, started)


def run_status(run: Mapping[str, Any]) -> str:
    """A run's status as it truly is: "interrupted" for a "running" run whose process is gone."""
    status = str(run.get("status") or "?")
    if status == "running" and owner_gone(run.get("owner")):
        return INTERRUPTED
    return status
