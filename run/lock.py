"""One owner at a time for a run directory, a suite's or a night's --out, and a results store.

A lock file (in the directory, or beside the store's file) holds who has it: pid, host and
since when. It is taken with fcntl.flock, so the kernel frees it when its owner exits, a kill -9
too: a lock file left by a dead process is no lock. The file itself stays (it is only a name
to lock); what it says is read only to tell a second invocation who holds it.

Within one process the same path may be taken again (a night's suite inside the night, a
chat's turns): flock would refuse a second open file of the same process, so the holder is
counted instead.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from ..errors import KernelwrightError

LOCK_NAME = ".kernelwright.lock"


class Busy(KernelwrightError):
    """Another process holds the lock; the message says who (pid, host, since)."""

    fault = "configuration"

    def __init__(self, what: str, path: Path, holder: dict[str, Any]) -> None:
        self.path, self.holder = path, holder
        if holder.get("pid"):
            who = (
                f"pid {holder['pid']} on {holder.get('host', '?')} since {holder.get('since', '?')}"
            )
            if holder.get("command"):
                who += f" ({holder['command']})"
        else:
            who = "another process"
        super().__init__(
            f"{what} is in use by {who}; one process at a time (lock {path}). Wait for it to "
            "end, or stop it"
        )


class NotWritable(KernelwrightError):
    """The directory the lock (and whatever the command writes) would go in is not writable."""

    fault = "configuration"


_held: dict[str, tuple[IO[str], int]] = {}
_held_lock = threading.Lock()


def lock_path_for(directory: str | os.PathLike[str]) -> Path:
    return Path(directory) / LOCK_NAME


def store_lock_path(db: str | os.PathLike[str]) -> Path:
    """Beside the store's file: store.db -> store.db.lock."""
    path = Path(db)
    return path.with_name(path.name + ".lock")


def holder_of(path: Path) -> dict[str, Any]:
    """What the lock file says of its holder ({} when it says nothing readable)."""
    try:
        data = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _acquire(path: Path, what: str, command: str) -> None:
    key = str(path.resolve())
    with _held_lock:
        if key in _held:
            handle, count = _held[key]
            _held[key] = (handle, count + 1)
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(path, "a+")  # noqa: SIM115 -- held until released, not a block
        except OSError as err:
            if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            raise NotWritable(f"{path.parent} is not writable: kernelwright writes there") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise Busy(what, path, holder_of(path)) from None
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": command,
        }
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(holder) + "\n")
        handle.flush()
        _held[key] = (handle, 1)


def _release(path: Path) -> None:
    key = str(path.resolve())
    with _held_lock:
        handle, count = _held[key]
        if count > 1:
            _held[key] = (handle, count - 1)
            return
        del _held[key]
        # Unlock explicitly: a process forked meanwhile shares the open file, and would
        # otherwise keep the lock until it exits too.
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        handle.close()


@contextmanager
def held(path: Path, what: str, command: str = "") -> Iterator[None]:
    """Hold the lock at `path` for the block; Busy when another process has it."""
    _acquire(path, what, command)
    try:
        yield
    finally:
        _release(path)
