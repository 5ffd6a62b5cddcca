"""Process-level isolation of a worker: allowlisted environment, rlimits, network namespace."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path

from ..config import cache_dir

# Variables a worker may inherit. Everything else (API keys, tokens, proxies, cloud credentials)
# never reaches candidate code. Prefixes cover the CUDA/Triton/torch knobs a user may rely on.
ENV_ALLOW = frozenset(
    {
        "PATH",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TERM",
        "TZ",
        "PYTHONPATH",
        "LD_LIBRARY_PATH",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        # The device tool sets these on multi-GPU hosts; they must survive into children.
        "NCCL_NVLS_ENABLE",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST",
        "NVSHMEM_DISABLE_NVLS",
        "OPENBLAS_CORETYPE",
        "OPENBLAS_L2_SIZE",
        "KERNELWRIGHT_CACHE_DIR",
        "KERNELWRIGHT_GUARD_TRACE",  # a file where the guard writes each denial's stack
    }
)
ENV_ALLOW_PREFIXES = ("TRITON_", "TORCHINDUCTOR_", "CUBLAS_", "CUDNN_")
# Never passed even if they match a prefix above.
ENV_DENY_SUBSTRINGS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
# The candidate process (remote.py's zygote) inherits less than the worker: ENV_ALLOW without
# these (remote.py sets PYTHONPATH and CUDA_VISIBLE_DEVICES itself; the others it never passed),
# and no torch.compile knobs, which only the worker's reference uses; NVIDIA_* container knobs.
CANDIDATE_ENV_WITHHELD = frozenset(
    {
        "LC_CTYPE",
        "TERM",
        "PYTHONPATH",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "NCCL_NVLS_ENABLE",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST",
        "NVSHMEM_DISABLE_NVLS",
        "KERNELWRIGHT_CACHE_DIR",
    }
)
CANDIDATE_ENV_ALLOW = ENV_ALLOW - CANDIDATE_ENV_WITHHELD
CANDIDATE_ENV_PREFIXES = (
    *(p for p in ENV_ALLOW_PREFIXES if p != "TORCHINDUCTOR_"),
    "NVIDIA_",
)


def allowlisted(
    parent: Mapping[str, str], names: AbstractSet[str], prefixes: tuple[str, ...]
) -> dict[str, str]:
    """The variables of `parent` named in `names` or starting with one of `prefixes`, except any
    whose name looks like a secret (ENV_DENY_SUBSTRINGS)."""
    return {
        name: value
        for name, value in parent.items()
        if (name in names or name.startswith(prefixes))
        and not any(s in name.upper() for s in ENV_DENY_SUBSTRINGS)
    }


def worker_env(parent: dict[str, str], *, home: Path, private: Path, device: str) -> dict[str, str]:
    """The environment a worker starts with: allowlisted names only, HOME and TMPDIR sandboxed.

    home: the candidate's working directory (the only place it may write).
    private: the evaluator's own directory beside it, which candidate code may neither read nor
    write: torch.compile of the reference keeps its generated code there.
    """
    env = allowlisted(parent, ENV_ALLOW, ENV_ALLOW_PREFIXES)
    # The measured device ceilings are shared by every worker on the machine (the user's cache,
    # not the worker's throwaway home): measured once per GPU, not once per pool.
    env.setdefault("KERNELWRIGHT_CACHE_DIR", str(cache_dir(parent)))
    env.update(
        HOME=str(home),
        TMPDIR=str(home),
        TRITON_CACHE_DIR=str(home / "triton"),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        # torch.compile's caches stay per worker and outside the candidate's home: the
        # reference's compiled code (the torch.compile baseline) is the evaluator's, and no file
        # a candidate wrote can be loaded as part of it.
        TORCHINDUCTOR_CACHE_DIR=str(private / "inductor"),
    )
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
        # One worker per core: more threads per worker only fight over the same cores.
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
        index = device.partition(":")[2] or "0"
        visible = parent.get("CUDA_VISIBLE_DEVICES", "")
        ids = [v for v in visible.split(",") if v.strip()] if visible else []
        env["CUDA_VISIBLE_DEVICES"] = ids[int(index)] if ids else index
    return env


def set_limits(*, max_file_mb: int) -> list[str]:
    """Resource limits every worker gets before it loads anything. Returns the layers applied."""
    applied = []
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash must not write GBs of core
    size = max_file_mb * 2**20
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if hard == resource.RLIM_INFINITY or hard > size:
        # The soft limit only: transport lifts it while sizing a memfd (memory, not a file).
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
        applied.append(f"rlimit-fsize={max_file_mb}MB")
    if os.getuid() != 0:
        # RLIMIT_NPROC counts every process of the user and root ignores it; the audit hook is
        # the fork-bomb barrier that always holds, this one only adds to it.
        _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        cap = 4096
        if hard == resource.RLIM_INFINITY or hard > cap:
            resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))
            applied.append("rlimit-nproc")
    return applied


def limit_cpu_seconds(budget_s: float) -> None:
    """Let this process use `budget_s` more CPU seconds; past that the kernel sends SIGXCPU."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = used.ru_utime + used.ru_stime
    soft = int(spent + budget_s) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY and soft > hard:
        soft = hard
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def lift_cpu_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))


CLONE_NEWNET = 0x40000000
PR_CAPBSET_DROP = 24
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
_CAP_VERSION_3 = 0x20080522


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name, use_errno=True) if name else None


def prctl(option: int, value: int) -> bool:
    """prctl(option, value, 0, 0, 0) through libc; True if it worked."""
    libc = _libc()
    return libc is not None and libc.prctl(option, value, 0, 0, 0) == 0


def not_dumpable() -> bool:
    """prctl(PR_SET_DUMPABLE, 0): no process without CAP_SYS_PTRACE may open this one's
    /proc/PID/mem (or maps, or ptrace it), even one of the same uid. Forked children inherit it;
    a process still reads its own /proc/self files. True if it worked."""
    return prctl(PR_SET_DUMPABLE, 0)


def drop_privileges() -> list[str]:
    """What a candidate process gives up before candidate code runs: new privileges through
    execve (PR_SET_NO_NEW_PRIVS) and every capability (bounding set, then permitted, effective
    and inheritable through capset), so that a uid-0 candidate holds no CAP_SYS_PTRACE,
    CAP_DAC_OVERRIDE or CAP_KILL. Under bwrap --cap-drop ALL there is nothing left to drop.
    Returns the layers that hold."""
    libc = _libc()
    if libc is None:
        return []
    held = []
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
        held.append("no-new-privs")
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: none to drop
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable}: all empty
    if libc.capset(header, data) == 0 and _no_capabilities():
        held.append("no-capabilities")
    return held


def _no_capabilities() -> bool:
    try:
        with open("/proc/self/status") as f:
            caps = dict(line.split(":", 1) for line in f if line.startswith("Cap"))
    except (OSError, ValueError):
        return False
    return all(int(caps.get(k, "1"), 16) == 0 for k in ("CapPrm", "CapEff", "CapAmb"))


def isolate_network() -> bool:
    """Move this process into a fresh network namespace (only loopback, down). True if it worked.

    Needs CAP_SYS_ADMIN (root in most containers); elsewhere it fails and the audit hook's
    socket rules are the barrier. Called before any thread starts (unshare needs a single thread).
    """
    unshare = getattr(os, "unshare", None)  # Python >= 3.12
    if unshare is not None:
        try:
            unshare(CLONE_NEWNET)
            return True
        except OSError:
            return False
    libc = _libc()
    return libc is not None and libc.unshare(CLONE_NEWNET) == 0


def rss_bytes(pid: int) -> int | None:
    """Resident memory of a process (VmRSS), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def descendants(pid: int | None) -> list[int]:
    """Every process below `pid` (children files of each thread, recursively)."""
    if pid is None:
        return []
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{current}/task/{tid}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except (OSError, ValueError):
                continue
            found.extend(kids)
            todo.extend(kids)
    return found
