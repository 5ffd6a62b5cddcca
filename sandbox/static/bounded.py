"""The static checks on a candidate's source with bounded size, time and memory (a forked child).

The AST checks read untrusted text in the evaluator's own process, outside the worker's sandbox
and its limits: before this, a 3 MB source took 16 s and 1.7 GB there. Now a source over
MAX_SOURCE_BYTES is refused before it is parsed, and the checks run in a child forked for the
purpose, under RLIMIT_AS and RLIMIT_CPU and a wall-clock deadline; an overrun is a violation of
its own ("static-check-limit"), a bug of the checker stays an exception.

Why a fork: the child needs nothing but this process's already-imported checker. With torch
imported, a fork answers in 20-45 ms on a loaded 2-core VM (its exit, as long again, is not
waited for); a fresh interpreter importing the checker took 370 ms there. The fork is made with
the parse lock held (pyparse: no other thread can hold it in the child), and the child touches
nothing another thread could have held at that moment: no stdio, no logging, no warnings output,
no torch; it resets the signal handlers and closes every inherited descriptor but its pipe.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import re
import resource
import select
import signal
import threading
import time
import warnings

from ..rules import Violation
from .check import static_check
from .pyparse import serialised

# KernelBench candidates and prompts/examples are 2-6 KB; the fusion codegen's output on level 2
# is at most 16 KB, but a deep network's forward is written out op by op, for train and eval:
# ResNet101 302 KiB, DenseNet121 295 KiB, DenseNet201 537 KiB (checked in 0.5-0.7 s). So 768
# KiB. The costliest text measured at that size (2-core VM, 2026-12-06): 767 KiB of call-heavy
# lines 3.3 s, a list literal 1.0 s and 118 MB (at 256 KiB earlier: 2.7 s and 171 MB for the
# worst; 3 MB took 16 s and 1.7 GB).
MAX_SOURCE_BYTES = 768 * 1024
# 6x the slowest 768 KiB source measured above (7x the slowest at 256 KiB, on a loaded machine).
STATIC_CHECK_TIMEOUT_S = 20.0
# Address space the child may add to what it inherits: 6x the 171 MB measured above.
STATIC_CHECK_MEMORY_BYTES = 1 << 30
# A file can break one rule thousands of times; the coder reads the first ones (the message of a
# result is cut at 4000 characters anyway), so the child sends back at most this many, each of
# at most MAX_VIOLATION_CHARS (a message may quote a name from the source).
MAX_VIOLATIONS = 100
MAX_VIOLATION_CHARS = 500

# Rules of this module (EvalResult.rule of a "rejected" candidate), beside rules.RULES.
LIMIT_RULES: dict[str, str] = {
    "source-size": f"a candidate file larger than {MAX_SOURCE_BYTES // 1024} KiB (UTF-8)",
    "static-check-limit": f"a file the static checks could not read within "
    f"{STATIC_CHECK_TIMEOUT_S:g} s and {STATIC_CHECK_MEMORY_BYTES >> 20} MiB",
}

# What the child writes to its pipe before it exits: the violations as JSON, or one of these.
_MEMORY, _ERROR = b"M", b"E"
# A peak address space within this share of STATIC_CHECK_MEMORY_BYTES of RLIMIT_AS means the
# limit was hit (64 MiB of 1 GiB): the parser turns a failed allocation into the same MemoryError
# as its own nesting limit (`-` * 100000 + `1`, a few MB), which static_check reports as "nested
# too deeply".
_NEAR_LIMIT_SHARE = 1 / 16

# Python 3.12+ warns on every fork of a process with threads (the pool's are such); the child
# here is built not to need any lock another thread may hold (see the module's docstring).
warnings.filterwarnings(
    "ignore",
    message=r".*fork\(\) may lead to deadlocks",
    category=DeprecationWarning,
    module=re.escape(__name__),
)


def bounded_static_check(source: str, filename: str = "candidate.py") -> list[Violation]:
    """`static.static_check(source)` with the source size, time and memory of the check bounded.

    A source over MAX_SOURCE_BYTES gives one "source-size" violation; a check that runs past
    STATIC_CHECK_TIMEOUT_S or STATIC_CHECK_MEMORY_BYTES gives one "static-check-limit"
    violation. Raises RuntimeError when the checker itself fails (a kernelwright bug).
    """
    size = len(source.encode("utf-8", "surrogatepass"))
    if size > MAX_SOURCE_BYTES:
        return [
            Violation(
                "source-size",
                1,
                0,
                f"the file is {size / 1024:.0f} KiB; a candidate may be at most "
                f"{MAX_SOURCE_BYTES // 1024} KiB (UTF-8). Send one module with ModelNew and its "
                "kernels, without generated tables or repeated code",
            )
        ]
    return _forked_check(source, filename)


def _forked_check(source: str, filename: str) -> list[Violation]:
    _reap_finished()
    read_fd, write_fd = os.pipe()
    with serialised():  # held across the fork: no other thread holds the parse lock in the child
        pid = os.fork()
        if pid == 0:  # the child: never returns, never unwinds into the caller's frames
            _child(write_fd, source, filename)
    os.close(write_fd)
    try:
        data, timed_out = _read_until(read_fd, time.monotonic() + STATIC_CHECK_TIMEOUT_S)
    except BaseException:  # Ctrl-C while waiting: the child goes too
        _kill(pid)
        raise
    finally:
        os.close(read_fd)
    if timed_out:
        _kill(pid)
        return [_limit(f"they ran past {STATIC_CHECK_TIMEOUT_S:g} s")]
    if data.startswith(b"["):
        # The answer is complete; waiting for the exit would cost as much again as the fork
        # (the child's copy of a torch process is torn down: 25 ms measured), so it is reaped
        # on a later call.
        _reap_later(pid)
        return [Violation(*v) for v in json.loads(data)]
    if data == _MEMORY:
        _reap_later(pid)
        return [_limit(f"they needed more than {STATIC_CHECK_MEMORY_BYTES >> 20} MiB")]
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code == -signal.SIGXCPU:
        return [_limit(f"they used more than {STATIC_CHECK_TIMEOUT_S:g} s of CPU time")]
    # A bug of ours (the child's exception follows _ERROR), or the child killed from outside.
    raise RuntimeError(
        f"the static checker's child process failed (exit status {code}): "
        + data.removeprefix(_ERROR).decode("utf-8", "replace")[-2000:]
    )


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


_unreaped: list[int] = []
_unreaped_lock = threading.Lock()


def _reap_later(pid: int) -> None:
    with _unreaped_lock:
        _unreaped.append(pid)


def _reap_finished() -> None:
    """Reap the children of earlier calls that have exited since (they leave zombies until)."""
    with _unreaped_lock:
        for pid in list(_unreaped):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else's os.wait()
                done = pid
            if done:
                _unreaped.remove(pid)


def _limit(what: str) -> Violation:
    return Violation(
        "static-check-limit",
        1,
        0,
        f"the static checks could not finish on this file: {what}. Nobody writes a kernel so: "
        "send a plain module (no deeply nested or enormous expressions, no huge literals)",
    )


def _read_until(fd: int, deadline: float) -> tuple[bytes, bool]:
    """Everything the child writes until it closes the pipe, and whether the deadline passed."""
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"".join(chunks), True
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)


def _child(write_fd: int, source: str, filename: str) -> None:
    data = _ERROR
    try:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)  # the parent's handlers (Ctrl-C: cancel pools) off
        os.closerange(3, write_fd)
        os.closerange(write_fd + 1, _max_fd())
        gc.disable()  # the parent's heap stays shared (copy-on-write) and unvisited
        warnings.simplefilter("ignore")  # a SyntaxWarning would write to stderr
        limit = _limit_self()
        found = static_check(source, filename)
        if (
            found
            and found[0].rule == "syntax"
            and _peak_address_space() > limit - _NEAR_LIMIT_SHARE * STATIC_CHECK_MEMORY_BYTES
        ):
            raise MemoryError  # the parse ran out of memory (see _NEAR_LIMIT_SHARE)
        payload = [
            [v.rule, v.line, v.col, v.message[:MAX_VIOLATION_CHARS]] for v in found[:MAX_VIOLATIONS]
        ]
        data = json.dumps(payload).encode()
    except MemoryError:
        data = _MEMORY
    except BaseException as e:  # reported by the parent as the checker's own failure
        data = _ERROR + f"{type(e).__name__}: {e}".encode("utf-8", "replace")[:4000]
    finally:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view) :]
        except BaseException:  # the parent sees a short answer and reads the exit status
            pass
        os._exit(0)


def _limit_self() -> int:
    """RLIMIT_AS at what the child inherited plus STATIC_CHECK_MEMORY_BYTES (returned), RLIMIT_CPU
    at the deadline (a loop in C ends there too), no core file."""
    with open("/proc/self/statm", "rb") as f:
        inherited = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = _lower(resource.RLIMIT_AS, inherited + STATIC_CHECK_MEMORY_BYTES)
    _lower(resource.RLIMIT_CPU, math.ceil(STATIC_CHECK_TIMEOUT_S) + 1)
    _lower(resource.RLIMIT_CORE, 0)
    return limit


def _peak_address_space() -> int:
    with open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmPeak:"):
                return int(line.split()[1]) * 1024
    return 0


def _lower(which: int, value: int) -> int:
    """The soft limit `which` lowered to `value` (never raised); returns the limit in force."""
    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    if soft == resource.RLIM_INFINITY or value < soft:
        resource.setrlimit(which, (value, hard))
        return value
    return soft


def _max_fd() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 16
