"""The driver's own account of device memory, read by the judge: NVML through ctypes.

A candidate's device memory is measured from outside its process: `torch.cuda` statistics live
in the candidate's interpreter, where `reset_peak_memory_stats()` or a patched allocator can
say anything. NVML reports what the driver has given each process (`usedGpuMemory` of every
compute process on the device) and the device's total in use; `Sampler` polls it from a thread
of the judge while a candidate's request runs and keeps the peak.

NVML names processes by their PID in the host's namespace (the judge maps the candidate's
namespace PID to it, remote.py `host_pid`; on the H200 it named both). Where it names none of
the candidate's, nothing is sampled and only the arena's scan counts.
"""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Any

_lib: Any = None
_failed = False
_lock = threading.Lock()


class _Process(ctypes.Structure):
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


class _Memory(ctypes.Structure):
    _fields_ = [
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


def _nvml() -> Any:
    global _lib, _failed
    with _lock:
        if _lib is None and not _failed:
            try:
                lib = ctypes.CDLL("libnvidia-ml.so.1")
                if lib.nvmlInit_v2() != 0:
                    raise OSError("nvmlInit_v2 failed")
                _lib = lib
            except (OSError, AttributeError):
                _failed = True
        return _lib


def available() -> bool:
    return _nvml() is not None


def _handle(index: int) -> Any:
    lib = _nvml()
    if lib is None:
        return None
    handle = ctypes.c_void_p()
    if lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(handle)) != 0:
        return None
    return handle


def processes(index: int) -> dict[int, int] | None:
    """{host pid: bytes of device memory} of the compute processes on GPU `index`, or None."""
    lib, handle = _nvml(), _handle(index)
    if lib is None or handle is None:
        return None
    fn = getattr(lib, "nvmlDeviceGetComputeRunningProcesses_v3", None) or getattr(
        lib, "nvmlDeviceGetComputeRunningProcesses_v2", None
    )
    if fn is None:
        return None
    count = ctypes.c_uint(64)
    infos = (_Process * 64)()
    if fn(handle, ctypes.byref(count), infos) != 0:
        return None
    return {int(infos[i].pid): int(infos[i].usedGpuMemory) for i in range(min(count.value, 64))}


def device_used(index: int) -> int | None:
    """Bytes in use on GPU `index` by every process (and the driver), or None."""
    lib, handle = _nvml(), _handle(index)
    if lib is None or handle is None:
        return None
    mem = _Memory()
    if lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem)) != 0:
        return None
    return int(mem.used)


class Sampler:
    """Polls NVML from a thread while a candidate runs; `peak` is the most the candidate held.

    pids: the host PIDs whose memory is the candidate's (its process and any child).
    """

    def __init__(self, index: int, interval_s: float = 0.0005):
        self.index, self.interval = index, interval_s
        self.pids: set[int] = set()
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self.paused = threading.Event()  # set during timed rounds: no driver calls beside them
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        procs = processes(self.index)
        if procs is None or not self.pids & procs.keys():
            return
        used = sum(v for p, v in procs.items() if p in self.pids)
        self.samples += 1
        self.peak = max(self.peak, used)

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.paused.is_set():
                self.sample()
            time.sleep(self.interval)

    def __enter__(self) -> Sampler:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="kw-nvml", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
