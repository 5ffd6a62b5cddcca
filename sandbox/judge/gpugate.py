"""One GPU, several judges: the timed sections one at a time with nothing else on the device.

Judges of one GPU (an EvalPool with more workers than GPUs, suites and nightlies of one machine
side by side) each hold the device's gate while they use it: shared while they start (seconds
of CPU: builds, the zygote's imports) and while they check a candidate (its calls, the
references, the comparisons), exclusive while they time (eager and
torch.compile's rounds, the wall's share, the candidate's rounds, the roofline's ceilings). So
a timed round never runs beside another judge's work or another candidate's checks, and checks
overlap each other freely, which is where the throughput of several judges comes from. A
shared holder does not keep the gate for its whole check: while its candidate compiles and runs
it looks for a judge waiting to time (`waiter`) and lets it in (`yield_turn`), so a timed
section waits for the others' next look (10 ms), not for the end of their checks.

The gate is two flock(2) files keyed by the GPU's UUID under /tmp (every process of the machine
that sees the GPU finds the same one, whatever its CUDA_VISIBLE_DEVICES):

- `main`: shared or exclusive;
- `turn`: taken before `main` by every acquirer and held by a waiting exclusive one, so a judge
  waiting to time is not starved by a stream of checks (writer preference).

A judge's candidate process runs only while its judge holds the gate: the judge stops it
(SIGSTOP, its whole tree) before it lets go and continues it (SIGCONT) once it holds the gate
again, so a candidate's thread cannot launch work while another judge times. What a stopped
candidate had already queued on the device still runs to its end: a judge's exclusive hold
begins only once the device is quiet (worker.py's settle_device), so it has ended before the
first timed round.

flock is released by the kernel when a process dies: a judge killed mid-section frees the gate.
Without CUDA, or where /tmp cannot hold the files, the gate is a no-op.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

GATE_DIR = Path("/tmp")


class GpuGate:
    """Shared/exclusive, writer-preferring, across processes; see the module docstring.

    `hold(mode)` blocks are not nested in one process; a block asking for the mode already held
    runs inside it, and an exclusive block inside a shared one trades the shared hold for the
    exclusive one and takes the shared one back after."""

    def __init__(self, key: str | None, directory: Path = GATE_DIR):
        self.main_fd = self.turn_fd = -1
        self.held: str | None = None
        self.waited_s = 0.0  # seconds spent waiting for the gate, all blocks together
        if not key:
            return
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in key)[:80]
        try:
            self.main_fd = _open_lock(directory / f"kernelwright-gpu-{safe}.lock")
            self.turn_fd = _open_lock(directory / f"kernelwright-gpu-{safe}.turn")
        except OSError:
            self.close()

    @property
    def active(self) -> bool:
        return self.main_fd >= 0

    @contextlib.contextmanager
    def hold(
        self,
        mode: str,
        *,
        on_wait: Callable[[bool], None] | None = None,
        before_release: Callable[[], None] | None = None,
        after_acquire: Callable[[], None] | None = None,
    ) -> Iterator[None]:
        """Hold the gate in `mode` ("shared" or "exclusive") for the block.

        on_wait(True/False): told before and after waiting (the pool's watchdog pauses its
        clock); before_release / after_acquire: the candidate's stop and continue."""
        if mode not in ("shared", "exclusive"):
            raise ValueError(f"unknown gate mode {mode!r}")
        if not self.active or self.held == mode or self.held == "exclusive":
            yield
            return
        outer = self.held
        if outer is not None:  # shared, asked for exclusive: trade it
            self._release(before_release)
        self._acquire(mode, on_wait, after_acquire)
        try:
            yield
        finally:
            self._release(before_release)
            if outer is not None:
                self._acquire(outer, on_wait, after_acquire)

    def waiter(self) -> bool:
        """Held shared, and another judge waits to hold the gate exclusive (it holds the turn,
        or an acquirer is between its two locks this instant, which only costs a spare yield)."""
        if not self.active or self.held != "shared":
            return False
        try:
            fcntl.flock(self.turn_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self.turn_fd, fcntl.LOCK_UN)
        return False

    def yield_turn(
        self,
        *,
        on_wait: Callable[[bool], None] | None = None,
        before_release: Callable[[], None] | None = None,
        after_acquire: Callable[[], None] | None = None,
    ) -> float:
        """Held shared with a judge waiting to time: let it in and take the shared hold back
        once it is done (the turn it holds makes this wait for its whole exclusive section).
        Seconds waited; 0.0 when nobody was waiting.

        A shared holder otherwise keeps the gate until its block ends: a judge checking a
        candidate holds it through the candidate's compile and checks (seconds), so every
        exclusive section used to wait for every other judge's whole check."""
        if not self.waiter():
            return 0.0
        before = self.waited_s
        self._release(before_release)
        self._acquire("shared", on_wait, after_acquire)
        return self.waited_s - before

    def _acquire(self, mode, on_wait, after_acquire) -> None:
        started = time.monotonic()
        waiting = False

        def lock(fd: int, how: int) -> None:
            nonlocal waiting
            try:
                fcntl.flock(fd, how | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            if not waiting and on_wait is not None:
                on_wait(True)
            waiting = True
            fcntl.flock(fd, how)

        lock(self.turn_fd, fcntl.LOCK_EX)
        try:
            lock(self.main_fd, fcntl.LOCK_EX if mode == "exclusive" else fcntl.LOCK_SH)
        finally:
            if mode == "shared":  # an exclusive holder keeps the turn: nobody enters behind
                fcntl.flock(self.turn_fd, fcntl.LOCK_UN)
        self.held = mode
        self.waited_s += time.monotonic() - started
        if waiting and on_wait is not None:
            on_wait(False)
        if after_acquire is not None:
            after_acquire()

    def _release(self, before_release) -> None:
        if before_release is not None:
            before_release()
        if self.held == "exclusive":
            fcntl.flock(self.main_fd, fcntl.LOCK_UN)
            fcntl.flock(self.turn_fd, fcntl.LOCK_UN)
        elif self.held == "shared":
            fcntl.flock(self.main_fd, fcntl.LOCK_UN)
        self.held = None

    def close(self) -> None:
        for fd in (self.main_fd, self.turn_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.main_fd = self.turn_fd = -1
        self.held = None


def _open_lock(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)  # judges of other users on the machine share it
    return fd


def device_key(torch, device) -> str | None:
    """The GPU's UUID (the same for every process of the machine), or None without CUDA."""
    if not torch.cuda.is_available():
        return None
    try:
        props = torch.cuda.get_device_properties(device)
    except Exception:
        return None
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        return str(uuid)
    bus = [getattr(props, f"pci_{k}_id", None) for k in ("domain", "bus", "device")]
    return "pci-" + "-".join(str(b) for b in bus) if None not in bus else None


def freeze(pids: Callable[[], list[int]], stop: bool) -> None:
    """SIGSTOP (stop=True) or SIGCONT every process `pids()` names: the parent first, then the
    tree below it listed again (a stopped parent forks no new child)."""
    sig = signal.SIGSTOP if stop else signal.SIGCONT
    seen: set[int] = set()
    for _ in range(2):
        for pid in pids():
            if pid in seen:
                continue
            seen.add(pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
