"""The zygote: a warm process in the sandbox that forks one fresh candidate process per candidate.

Started by the judge (worker.py) as `python -m kernelwright.sandbox.candidate.zygote --control-fd N
--device D`, under bubblewrap where it runs. It imports torch, Triton and the candidate-side
code once, never initialises CUDA (a forked child could not use a context its parent made),
and then, per candidate, forks a child that gets its own session, directory, Triton cache and
limits and serves the judge on a socket of its own (process.py). The child pays for its own
CUDA context and compile, not for imports: on CPU a fork takes ~10 ms where a fresh interpreter
with torch takes ~2 s.

Control requests (JSON over a SEQPACKET socket, see transport.py):
- {"op": "spawn", ...} with [candidate socket, log file] attached: fork; reply {"pid": N}.
- {"op": "reap", "pid": N}: kill the child's process group and, in the sandbox's own PID
  namespace, every process but this one and its init; reply how the child ended.
Nothing a candidate leaves behind (signal handlers, threads, patched modules, files, processes)
outlives it: the next candidate is a new fork of this untouched process, in a new directory.
Untouched because no candidate can reach it: once warm it is not dumpable (its /proc/PID/mem
opens for no one without CAP_SYS_PTRACE, and nothing in the sandbox holds a capability), its
working directory is its own (read-only in the sandbox, dropped from sys.path), and a
candidate's process drops its privileges and gets an RLIMIT_DATA before candidate code runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path

from ..crossing import transport
from ..crossing.isolation import descendants, not_dumpable, prctl

PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--pid-namespace", action="store_true")
    parser.add_argument("--isolate-network", action="store_true")
    args = parser.parse_args(argv)
    # `python -m` put the working directory (the zygote's own, read-only) first on sys.path:
    # no candidate inherits an import path entry but the installation's.
    cwd = os.path.realpath(os.getcwd())
    sys.path[:] = [p for p in sys.path if p not in ("", ".") and os.path.realpath(p) != cwd]
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if not args.pid_namespace:
        # Without a PID namespace of our own, a process a candidate left in a new session would
        # go to init; as the subreaper we get it back, and _reap kills everything below us.
        prctl(PR_SET_CHILD_SUBREAPER, 1)
    layers = []
    if args.isolate_network:
        from ..crossing.isolation import isolate_network

        if isolate_network():
            layers.append("netns")
    import socket

    control = socket.socket(fileno=args.control_fd)
    started = time.monotonic()
    _warm(args.device)
    # Not dumpable from here on, and so every child forked after: no candidate may open this
    # process's /proc/PID/mem, the memory every later candidate is forked from.
    if not_dumpable():
        layers.append("zygote-not-dumpable")
    transport.send(
        control,
        {"ready": os.getpid(), "layers": layers, "warm_s": round(time.monotonic() - started, 3)},
    )
    children: set[int] = set()
    while True:
        try:
            got = transport.receive(control, None)
        except (transport.PeerGone, transport.ProtocolError):
            return 0
        if got is None:
            continue
        m = got.message
        if m.get("op") == "spawn" and len(got.fds) in (2, 3):
            pid = os.fork()
            if pid == 0:
                control.close()
                arena_fd = got.fds[2] if len(got.fds) == 3 else None
                _child(m, got.fds[0], got.fds[1], args.device, arena_fd)  # never returns
            got.close()
            children.add(pid)
            transport.send(control, {"pid": pid})
        elif m.get("op") == "reap":
            got.close()
            pid = int(m.get("pid", 0))
            status = _reap(pid, args.pid_namespace)
            children.discard(pid)
            _collect_zombies(children)
            transport.send(control, {"status": status})
        else:
            got.close()
            transport.send(control, {"error": f"unknown request {str(m.get('op'))[:40]!r}"})


def _warm(device: str) -> None:
    """Import everything a candidate process needs; on CPU also run one interpreted kernel."""
    import torch
    import torch._dynamo

    from . import launches, process, tritoncompat  # noqa: F401

    tritoncompat.fix_interpreter()
    launches.install()
    if device == "cpu":
        from ..crossing.warmup import warm_up

        warm_up(torch.device("cpu"))
        launches.reset()


def enter_home(home: Path, env: dict[str, str]) -> None:
    """Make `home` the candidate process's working, home and temporary directory.

    The environment alone is not enough: `tempfile` caches the directory it first found, and
    the zygote's imports already asked it (so it names the zygote's directory, which is not the
    candidate's to write). On the GPU, Triton builds its launcher in a `tempfile` directory; a
    stale cache made the guard refuse every kernel there.
    """
    os.chdir(home)
    os.environ.update(
        HOME=str(home),
        TMPDIR=str(home),
        # Every cache a candidate's process reads or writes is its own: nothing one candidate
        # leaves in a cache is loaded by another (the seeded Triton cache is a copy).
        TRITON_CACHE_DIR=str(home / "triton"),
        TORCHINDUCTOR_CACHE_DIR=str(home / "inductor"),
        XDG_CACHE_HOME=str(home / ".cache"),
        PYTHONPYCACHEPREFIX=str(home / "pycache"),
        **env,
    )
    tempfile.tempdir = str(home)
    sys.pycache_prefix = str(home / "pycache")
    sys.dont_write_bytecode = True


def _child(m: dict, sock_fd: int, log_fd: int, device: str, arena_fd: int | None) -> None:
    """The candidate process: its own session, directory, limits; then serve the judge."""
    code = 0
    try:
        os.setsid()
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        # Nothing of the zygote's descriptors but the candidate's own socket (and, on a GPU,
        # the judge's arena until it is mapped).
        keep = sorted({sock_fd, *([arena_fd] if arena_fd is not None else [])})
        low = 3
        for fd in keep:
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        home = Path(m["home"])
        enter_home(home, m["env"])
        sys.path[:] = [p for p in sys.path if p not in ("", ".")]
        size = int(m["max_file_mb"]) * 2**20
        # The soft limit only: transport lifts it while sizing a memfd (memory, not a file).
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
        if m.get("host_memory_bytes"):
            # Private writable memory (heap, anonymous maps; what it inherited from us too), not
            # address space: CUDA reserves far more of that than it uses.
            cap = int(m["host_memory_bytes"])
            resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        import socket

        import torch

        from ..crossing.isolation import drop_privileges, limit_cpu_seconds
        from .process import CandidateServer

        limit_cpu_seconds(float(m["cpu_time_s"]))
        drop_privileges()
        arena = None
        if device != "cpu" and arena_fd is not None and m.get("arena"):
            from ..crossing.arena import install

            # Every device tensor of this process in the judge's region, before CUDA starts.
            arena = install(str(m["arena"]["so"]), arena_fd, int(m["arena"]["nbytes"]))
            os.close(arena_fd)
        elif device != "cpu":
            torch.cuda.set_device(0)
            fraction = float(m.get("gpu_memory_fraction", 0.9))
            torch.cuda.set_per_process_memory_fraction(fraction, 0)
        sock = socket.socket(fileno=sock_fd)
        dtype = transport.DTYPES[m["dtype"]]
        precision = m.get("precision", "strict")
        CandidateServer(sock, device, home, dtype, precision, arena=arena).serve()
    except BaseException:  # the judge sees the socket close and asks how the child ended
        import traceback

        traceback.print_exc()
        code = 70
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # no atexit handler or finalizer a candidate registered runs


def _reap(pid: int, own_namespace: bool) -> dict:
    """Kill the candidate's group and every stray process (in our own PID namespace, all but
    this one and its init; else everything below us, their subreaper) and wait."""
    if pid > 0:
        for target in (-pid, pid):
            try:
                os.kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    if own_namespace:
        me = os.getpid()
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) not in (1, me):
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
    status: dict = {}
    if pid > 0:
        try:
            _, code = os.waitpid(pid, 0)
            status = (
                {"signal": os.WTERMSIG(code)}
                if os.WIFSIGNALED(code)
                else {"exit": os.WEXITSTATUS(code)}
            )
        except ChildProcessError:
            pass
    if not own_namespace:  # one candidate lives at a time: nothing below us outlives it
        for _ in range(50):
            below = descendants(os.getpid())
            if not below:
                break
            for other in below:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(other, signal.SIGKILL)
            _collect_zombies(set())
            time.sleep(0.005)
    return status


def _collect_zombies(children: set[int]) -> None:
    """Reap grandchildren re-parented to us (we are the subreaper's child only in a namespace)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)


if __name__ == "__main__":
    sys.exit(main())
