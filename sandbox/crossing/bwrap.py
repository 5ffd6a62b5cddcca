"""The operating-system sandbox around candidate processes: bubblewrap, plus a seccomp filter.

The zygote (and every candidate process it forks) runs under `bwrap --unshare-all
--die-with-parent --new-session` with an explicit read-only view of what Python, torch and
Triton need, the candidates' directory writable, an empty read-only /tmp, a fresh /proc of its
own PID namespace, no network, no capability (--cap-drop ALL, also where bwrap runs as real
root), a cleared environment and only the CUDA device nodes of its GPU. A seccomp
filter (libseccomp through pyseccomp, compiled here and handed to bwrap with --seccomp) refuses
the system calls a candidate has no use for and that reach beyond its process: ptrace and
process_vm_*, mount and namespace calls, keyrings, BPF, perf events, io_uring (which bypasses
seccomp), kernel modules, and sockets other than AF_UNIX.

Where bwrap cannot run (not installed, user namespaces refused), `probe()` says why and the
pool runs candidates as plain forked processes; the result's isolation layers say so.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from . import view

# Device nodes a CUDA process opens: the control node, unified memory, and its GPU's node.
_NVIDIA_COMMON = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
# /etc entries the dynamic loader, Python and the C compiler need: view.ETC.
_ETC = view.ETC
# System calls refused inside the sandbox (EPERM), each beyond what a kernel launch needs.
DENIED_SYSCALLS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "open_by_handle_at",
    "name_to_handle_at",
    "personality",
)
_AF_UNIX = 1


@dataclass(frozen=True)
class Probe:
    """Whether bwrap can run here, and with seccomp; `why` when it cannot."""

    path: str | None
    works: bool
    seccomp: bool
    why: str = ""


@functools.lru_cache(maxsize=1)
def probe() -> Probe:
    """Run `bwrap --unshare-all ... true` once per process and remember what happened."""
    path = shutil.which("bwrap")
    if path is None:
        return Probe(None, False, False, "bubblewrap (bwrap) is not installed")
    argv = [path, "--unshare-all", "--die-with-parent", *_system_binds(), "--", "/bin/true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Probe(path, False, False, f"bwrap failed to run: {e}")
    if done.returncode != 0:
        text = done.stderr.decode(errors="replace").strip().splitlines()
        return Probe(path, False, False, f"bwrap refused here: {text[-1] if text else 'no reason'}")
    return Probe(path, True, seccomp_filter() is not None)


def command(
    inner: list[str],
    *,
    readonly: Iterable[str],
    writable: Iterable[str],
    env: Mapping[str, str],
    device: str,
    keep_fds: Iterable[int] = (),
    seccomp_fd: int | None = None,
    chdir: str | None = None,
) -> list[str]:
    """The bwrap argv that runs `inner` in the sandbox.

    readonly: paths bound read-only at the same place (the Python installation, site-packages,
    the project); writable: paths bound read-write (the candidates' directory); env: the whole
    environment inside (bwrap starts from an empty one); device "cuda:N" binds the control
    nodes and /dev/nvidiaN only; chdir: the working directory inside.
    """
    p = probe()
    argv = [
        p.path or "bwrap",
        "--unshare-all",  # user, ipc, pid, net, uts, cgroup namespaces
        "--die-with-parent",
        "--new-session",  # no TIOCSTI into the judge's terminal
        # No capability inside, even where bwrap runs as real root (it keeps them all there):
        # CAP_SYS_PTRACE would open a non-dumpable zygote's memory.
        "--cap-drop",
        "ALL",
        "--clearenv",
        *_system_binds(),
    ]
    for path in _existing(readonly):
        argv += ["--ro-bind", path, path]
    for path in writable:
        argv += ["--bind", path, path]
    if device.startswith("cuda"):
        index = device.partition(":")[2] or "0"
        gpus = sorted(glob.glob("/dev/nvidia[0-9]*")) if index == "all" else [f"/dev/nvidia{index}"]
        for node in (*_NVIDIA_COMMON, *gpus):
            if os.path.exists(node):
                argv += ["--dev-bind", node, node]
        # The CUDA driver reads the PCI topology and its own parameters here.
        for path in ("/sys", "/proc/driver/nvidia"):
            if os.path.exists(path):
                argv += ["--ro-bind", path, path]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    if chdir is not None:
        argv += ["--chdir", chdir]
    # /tmp read-only once every bind below it is mounted (not recursive: the binds keep theirs):
    # a directory every candidate of the sandbox could write would be one they share (each
    # writes in its own home, which is also its TMPDIR).
    argv += ["--remount-ro", "/tmp"]
    del keep_fds  # inherited descriptors pass through bwrap as they are (pass_fds of Popen)
    return [*argv, "--", *inner]


def _system_binds() -> list[str]:
    """The base view: /usr and its links, a fresh /dev, /proc of the new PID namespace, /tmp."""
    argv = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = f"/{name}"
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for path in _existing(_ETC):
        argv += ["--ro-bind", path, path]
    argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    return argv


def _existing(paths: Iterable[str]) -> list[str]:
    """Real paths, each once: bwrap cannot bind onto a symlink, so a link in the view (a
    site directory's `kernelwright -> /repo`, as the GPU runs install it) resolves through the
    binding of its target."""
    seen, out = set(), []
    for path in paths:
        real = os.path.realpath(path)
        if real in seen or not os.path.exists(real):
            continue
        seen.add(real)
        out.append(real)
    return out


def python_paths() -> list[str]:
    """What the interpreter needs to run the package: its prefixes and every sys.path entry."""
    paths = {*view.interpreter_prefixes(), os.path.dirname(sys.executable)}
    paths.update(view.import_path())
    # A pyenv or venv interpreter is a link into its real installation.
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    # The package itself (installed editable, it lives outside site-packages).
    paths.add(view.PACKAGE_DIR)
    for pattern in ("/usr/local/cuda*", "/usr/local/nvidia"):
        paths.update(glob.glob(pattern))
    # /usr is in the base view already.
    return sorted(p for p in paths if p != "/usr" and not p.startswith("/usr/"))


@functools.lru_cache(maxsize=1)
def seccomp_filter() -> bytes | None:
    """The compiled BPF program, or None where libseccomp (pyseccomp) is not available."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError):
        return None
    try:
        f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
        eperm = seccomp.ERRNO(1)
        for name in DENIED_SYSCALLS:
            try:
                f.add_rule(eperm, name)
            except (RuntimeError, ValueError, OSError):
                continue  # not a syscall on this architecture
        # Sockets: AF_UNIX only (the judge's channel); no network family even in an empty netns.
        f.add_rule(eperm, "socket", seccomp.Arg(0, seccomp.NE, _AF_UNIX))
        with tempfile.TemporaryFile() as out:
            f.export_bpf(out)
            out.seek(0)
            return out.read()
    except Exception:  # a libseccomp that cannot build the filter: the layer is reported missing
        return None


def seccomp_fd() -> int | None:
    """A readable descriptor holding the filter for bwrap's --seccomp (inheritable)."""
    program = seccomp_filter()
    if program is None:
        return None
    fd = os.memfd_create("kw-seccomp", 0)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd
