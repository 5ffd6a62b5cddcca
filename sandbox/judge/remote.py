"""The judge's side of the wall: start the sandboxed zygote, fork candidate processes, talk to them.

`Sandbox` owns one zygote (zygote.py) under bubblewrap where it runs; `spawn()` gives a
`CandidateProcess`: a fresh forked process in a new directory, reached through its own socket.
Every request has a deadline; a candidate process that dies, hangs, floods its socket or sends
what is not a well-formed reply raises `CandidateFailure`, which the judge turns into a verdict.
Its host memory is watched while the judge waits.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..crossing import bwrap, transport
from ..crossing.isolation import (
    CANDIDATE_ENV_ALLOW,
    CANDIDATE_ENV_PREFIXES,
    allowlisted,
    descendants,
    rss_bytes,
)
from ..errors import KernelwrightError
from ..results import fault_of

# A new zygote imports torch and Triton (cold disk: ~30 s, warm ~2-4 s).
_START_TIMEOUT_S = 300.0
_POLL_S = 0.2
# How often a judge waiting for its candidate's reply looks for another judge waiting to time.
_IDLE_POLL_S = 0.01
_LOG_TAIL_BYTES = 16384
_LOG_TAIL_LINES = 25


class CandidateFailure(KernelwrightError):
    """The candidate process failed to answer: status, rule and message of the verdict."""

    def __init__(self, status: str, rule: str, message: str):
        super().__init__(message)
        self.status, self.rule, self.message = status, rule, message
        self.fault = fault_of(status, rule)


class Sandbox:
    """One zygote, started once per judge and replaced when a candidate broke it."""

    def __init__(
        self,
        device: str,
        root: Path,
        *,
        os_sandbox: bool = True,
        triton_seed: Path | None = None,
        allocator: Path | None = None,
    ):
        self.device = device
        # The candidates' device allocator on a GPU (arena.py), in a directory bound read-only.
        self.allocator = allocator
        self.triton_seed = triton_seed
        self.root = root
        # Candidates' homes, one per candidate, and the zygote's own directory (its working
        # directory and HOME, read-only in the sandbox): neither writable by a candidate where
        # the judge is root (a candidate holds no capability), and nothing of one candidate's is
        # left in either when the next one starts (CandidateProcess.close sweeps).
        self.dir = root / "candidates"
        self.zygote_dir = root / "zygote"
        for d in (self.dir, self.zygote_dir):
            d.mkdir(parents=True, exist_ok=True)
            _out_of_reach(d)
        self.live: set[str] = set()
        # Where the zygote's imports may write temporary files (they ask for a usable
        # directory); removed once it is ready, before any candidate starts.
        self.zygote_tmp = self.dir / "zygote-tmp"
        self.zygote_tmp.mkdir(exist_ok=True)
        self.log_path = root / "zygote.log"
        self.control, child = transport.channel_pair()
        env = _sandbox_env(os.environ, device, self.zygote_dir)
        env["TMPDIR"] = str(self.zygote_tmp)
        inner = [sys.executable, "-m", "kernelwright.sandbox.candidate.zygote"]
        inner += ["--control-fd", str(child.fileno()), "--device", device]
        probe = bwrap.probe() if os_sandbox else bwrap.Probe(None, False, False, "turned off")
        seccomp_fd = bwrap.seccomp_fd() if probe.works else None
        if probe.works:
            argv = bwrap.command(
                [*inner, "--pid-namespace"],
                readonly=[
                    *bwrap.python_paths(),
                    str(self.zygote_dir),
                    *([str(allocator.parent)] if allocator else []),
                ],
                writable=[str(self.dir)],
                env=env,
                device=device,
                seccomp_fd=seccomp_fd,
                chdir=str(self.zygote_dir),
            )
            self.layers = ["bubblewrap", "pid-namespace", "mount-namespace", "netns", "no-secrets"]
            if seccomp_fd is not None:
                self.layers.append("seccomp")
            self.note = ""
        else:
            argv = [*inner, "--isolate-network"]
            self.layers = ["process", "no-secrets"]
            self.note = (
                f"no operating-system sandbox ({probe.why}): the candidate ran in a process of "
                "its own with an allowlisted environment and rlimits, without bubblewrap's "
                "namespaces and seccomp"
            )
        self.pid_namespace = probe.works
        fds = [child.fileno()] + ([seccomp_fd] if seccomp_fd is not None else [])
        for fd in fds:
            os.set_inheritable(fd, True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=fds,
                env=env if not probe.works else {"PATH": env.get("PATH", "/usr/bin:/bin")},
                cwd=self.zygote_dir,
                start_new_session=True,
            )
        child.close()
        if seccomp_fd is not None:
            os.close(seccomp_fd)
        self.ready: dict[str, Any] | None = None

    def wait_ready(self) -> None:
        """Block until the zygote has imported torch and Triton (started in the background, so
        the judge imports torch meanwhile)."""
        if self.ready is None:
            self.ready = self._await_ready()
            shutil.rmtree(self.zygote_tmp, ignore_errors=True)
            self.layers += [x for x in self.ready.get("layers", []) if x not in self.layers]

    def _await_ready(self) -> dict[str, Any]:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                got = transport.receive(self.control, _POLL_S)
            except (transport.PeerGone, transport.ProtocolError):
                break
            if got is not None:
                got.close()
                if "ready" in got.message:
                    return got.message
            if self.proc.poll() is not None:
                break
        self.close()
        raise RuntimeError(f"the sandboxed zygote did not start:\n{_tail(self.log_path)}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def spawn(self, *, source: str, dtype: str, config: Any, arena: Any = None) -> CandidateProcess:
        """A fresh candidate process in a new directory holding the candidate's source."""
        self.wait_ready()
        home = self.dir / f"cand-{secrets.token_hex(8)}"
        home.mkdir()
        self.live.update((home.name, f"{home.name}.log"))
        # UTF-8 whatever the locale: the bytes the candidate process decodes are the checked
        # text (an unpaired surrogate is written as is, and refused there as not UTF-8).
        (home / "candidate.py").write_bytes(source.encode("utf-8", "surrogatepass"))
        if self.triton_seed is not None and self.triton_seed.is_dir():
            shutil.copytree(self.triton_seed, home / "triton")
        else:
            (home / "triton").mkdir()
        log_path = self.dir / f"{home.name}.log"
        ours, theirs = transport.channel_pair()
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            transport.send(
                self.control,
                {
                    "op": "spawn",
                    "home": str(home),
                    "dtype": dtype,
                    "env": {},
                    "cpu_time_s": config.cpu_time_s,
                    "max_file_mb": config.max_file_mb,
                    "host_memory_bytes": (
                        int(config.host_memory_gb * 2**30) if config.host_rlimit else None
                    ),
                    "gpu_memory_fraction": config.gpu_memory_fraction,
                    "precision": config.precision,
                    **(
                        {"arena": {"so": str(self.allocator), "nbytes": arena.nbytes}}
                        if arena is not None and self.allocator is not None
                        else {}
                    ),
                },
                [theirs.fileno(), log_fd, *([arena.fd] if arena is not None else [])],
            )
            got = transport.receive(self.control, 30.0)
        finally:
            theirs.close()
            os.close(log_fd)
        if got is None or "pid" not in got.message:
            raise RuntimeError(
                f"the zygote did not fork a candidate process:\n{_tail(self.log_path)}"
            )
        got.close()
        return CandidateProcess(self, ours, int(got.message["pid"]), home, log_path, config)

    def reap(self, pid: int) -> dict[str, Any]:
        """Kill a candidate process (and anything it started) and say how it ended."""
        try:
            transport.send(self.control, {"op": "reap", "pid": pid})
            got = transport.receive(self.control, 30.0)
        except (OSError, transport.PeerGone, transport.ProtocolError):
            got = None
        if got is None:  # the zygote itself is gone or stuck: a new sandbox takes its place
            self.close()
            return {"zygote": "lost"}
        got.close()
        return got.message.get("status", {})

    def sweep(self, done: Path) -> None:
        """Remove a finished candidate's home and log, and anything else in the candidates'
        directory that no live candidate owns (what one planted beside its home)."""
        self.live.difference_update((done.name, f"{done.name}.log"))
        with contextlib.suppress(OSError):
            for entry in self.dir.iterdir():
                if entry.name in self.live:
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        entry.unlink()

    def host_pid(self, ns_pid: int) -> int | None:
        """The host PID of a process the zygote reports by its own (namespace) PID."""
        if not self.pid_namespace:
            return ns_pid
        for pid in descendants(self.proc.pid):
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("NSpid:"):
                            ids = line.split()[1:]
                            if ids and int(ids[-1]) == ns_pid:
                                return pid
            except (OSError, ValueError):
                continue
        return None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.control.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


# The exit code of a candidate process whose device allocation found no room in the arena
# (arena.c): the memory rule.
ARENA_EXHAUSTED = 75


class CandidateProcess:
    """One candidate's process: requests with deadlines, host memory watched, log tail kept."""

    def __init__(self, sandbox: Sandbox, sock, pid: int, home: Path, log: Path, config: Any):
        self.sandbox, self.sock, self.pid = sandbox, sock, pid
        self.home, self.log = home, log
        self.memory_cap = config.host_memory_gb * 2**30
        self.rlimit = bool(config.host_rlimit)
        self.host = sandbox.host_pid(pid)
        self.ended: dict[str, Any] | None = None

    def request(
        self,
        message: dict[str, Any],
        fds: Sequence[int] = (),
        *,
        deadline: float,
        idle: Callable[[], float] | None = None,
    ) -> transport.Received:
        """Send one request and wait for its reply until `deadline` (time.monotonic()).

        idle: called every _IDLE_POLL_S while no reply has come (the judge's yield of the GPU's
        gate); the seconds it returns (the candidate was stopped meanwhile) move the deadline."""
        try:
            transport.send(self.sock, message, list(fds))
        except (BrokenPipeError, ConnectionResetError, OSError):
            raise self.died("while sending it a request") from None
        poll = _IDLE_POLL_S if idle is not None else _POLL_S
        memory_checked = time.monotonic()
        while True:
            if idle is not None:
                deadline += idle()
            left = deadline - time.monotonic()
            if left <= 0:
                self.end()
                raise CandidateFailure(
                    "timeout",
                    "wall-time",
                    f"the candidate ran past its wall-clock limit during {message.get('op')}; "
                    f"its processes were killed.\n{self.log_tail()}",
                )
            try:
                got = transport.receive(self.sock, min(poll, left))
            except transport.PeerGone:
                raise self.died(f"during {message.get('op')}") from None
            except transport.ProtocolError as e:
                self.end()
                raise CandidateFailure(
                    "rejected",
                    "protocol",
                    f"the candidate process sent what is not a reply ({e}): only the "
                    "evaluator's own code may write to its channel",
                ) from None
            if got is not None:
                self._name_the_limit(got.message)
                return got
            if time.monotonic() - memory_checked >= _POLL_S:
                self.check_memory()
                memory_checked = time.monotonic()

    def _name_the_limit(self, message: dict[str, Any]) -> None:
        """A host allocation the candidate process was refused: say which limit refused it."""
        e = message.get("error")
        if not (self.rlimit and isinstance(e, dict) and e.get("rule") == "memory"):
            return
        text = e.get("message")
        if isinstance(text, str) and "CUDA" not in text:
            e["message"] = (
                f"{text}\n(the candidate process's host memory is capped at "
                f"{self.memory_cap / 2**30:g} GB of private writable memory: RLIMIT_DATA, from "
                "EvalConfig.host_memory_gb)"
            )

    def check_memory(self) -> None:
        rss = sum(rss_bytes(p) or 0 for p in [self.host, *descendants(self.host)] if p)
        if self.host is not None and rss > self.memory_cap:
            self.end()
            raise CandidateFailure(
                "crashed",
                "memory",
                f"the candidate process used {rss / 2**30:.1f} GB of host memory (limit "
                f"{self.memory_cap / 2**30:g} GB) and was killed",
            )

    def died(self, when: str) -> CandidateFailure:
        status = self.end()
        tail = self.log_tail()
        sig = status.get("signal")
        if sig == signal.SIGXCPU:
            return CandidateFailure(
                "timeout", "cpu-time", f"CPU time limit exceeded {when}\n{tail}"
            )
        if sig is not None:
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
            return CandidateFailure(
                "crashed",
                "signal",
                f"the candidate process died of {name} {when} (a segfault or abort in native "
                f"code, or a kill); the next candidate gets a fresh process.\n{tail}",
            )
        code = status.get("exit")
        if code == ARENA_EXHAUSTED:
            return CandidateFailure(
                "rejected",
                "memory",
                f"the candidate's device memory passed its limit {when}: its allocations come "
                "from the judge's arena, whose size is the limit (max(4x the reference's peak, "
                "that + 1 GiB), or --max-memory) and room for the outputs the judge asks it to "
                f"hold past one call's.\n{tail}",
            )
        return CandidateFailure(
            "crashed",
            "exit",
            f"the candidate process exited (code {code}) {when} without a reply (exit()/os._exit "
            f"in candidate code?); exiting proves nothing, results come from the evaluator."
            f"\n{tail}",
        )

    def end(self) -> dict[str, Any]:
        """Kill the process and everything it started (idempotent); how it ended."""
        if self.ended is None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.ended = self.sandbox.reap(self.pid)
        return self.ended

    def close(self) -> None:
        """Say bye, end the process, remove its directory."""
        if self.ended is None:
            with contextlib.suppress(OSError):
                transport.send(self.sock, {"op": "bye"})
        self.end()
        self.sandbox.sweep(self.home)

    def log_tail(self) -> str:
        return _tail(self.log)


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - _LOG_TAIL_BYTES))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-_LOG_TAIL_LINES:])


def _out_of_reach(path: Path) -> None:
    """Make a directory of the judge's one no candidate may write: owned by nobody where the
    judge is root (a candidate is uid 0 without capabilities, so only the mode's 'other' bits
    apply to it), never group- or world-writable."""
    os.chmod(path, 0o755)
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)


def _sandbox_env(parent: os._Environ | dict, device: str, home: Path) -> dict[str, str]:
    """The zygote's whole environment: allowlisted names only, nothing that looks like a secret
    (it starts from an empty environment; isolation.py holds the allowlist)."""
    env = allowlisted(parent, CANDIDATE_ENV_ALLOW, CANDIDATE_ENV_PREFIXES)
    env.update(
        HOME=str(home),
        TMPDIR=str(home),
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        PATH=parent.get("PATH", "/usr/bin:/bin"),
    )
    if device == "cpu":
        env.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    else:
        env.pop("TRITON_INTERPRET", None)
        if "CUDA_VISIBLE_DEVICES" in parent:
            env["CUDA_VISIBLE_DEVICES"] = parent["CUDA_VISIBLE_DEVICES"]
    return env
