"""The candidate's device memory on a GPU: one region the judge owns, the candidate allocates from.

On a GPU the candidate process's torch allocator is `arena.c` (through
`torch.cuda.memory.CUDAPluggableAllocator`), installed before its CUDA context exists and fed
one region of device memory the judge created and maps too (devmem.py). Every tensor the
candidate allocates (its outputs, its workspace, its parameters) lies there, so the judge:
- reads an output where the candidate left it, without a copy by the candidate: a timed call's
  outputs are snapshot by the judge inside its clock (a copy the candidate could fuse away or
  skip does not exist);
- sees storage identity from its own side: two outputs held at once that share bytes are output
  reuse, whatever the candidate's Python holds (issue 29);
- measures the candidate's memory from outside: the region is filled with a secret pattern
  before the candidate starts, and the pages no longer holding it are the memory it touched.
  The region's size is the memory limit: past it, the candidate's allocation fails (a "memory"
  verdict). Device memory taken past the allocator (cudaMalloc through ctypes) shows in the
  driver's per-process account (nvml.py).
The C allocator's own bookkeeping lives in the candidate's process and is never read.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import torch

_SOURCE = Path(__file__).with_name("arena.c")
PAGE = 2 << 20  # the granularity the touched-memory scan counts in
_SCAN_CHUNK = 256 << 20


def build_allocator(directory: Path) -> Path:
    """Compile arena.c into `directory` (once per source version) and return the .so's path.

    The directory must be bound read-only into the sandbox: a candidate that could replace the
    library would run its code in every later candidate's process.
    """
    source = _SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    target = directory / f"kw_arena_{digest}.so"
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler (cc) to build the candidate allocator")
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".so")
    os.close(fd)
    try:
        subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", tmp, str(_SOURCE), "-lpthread"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        os.chmod(tmp, 0o555)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return target


class Arena:
    """The judge's side: the region, its secret pattern, and the scan of what was touched."""

    def __init__(self, nbytes: int):
        from .devmem import DeviceRegion, granularity

        step = granularity(torch.cuda.current_device())
        self.region = DeviceRegion.create(max(step, -(-nbytes // step) * step))
        self.nbytes = self.region.nbytes
        self.seed = int.from_bytes(os.urandom(7), "little")
        self._pattern(write=True)

    @property
    def fd(self) -> int:
        return self.region.fd

    @property
    def base(self) -> int:
        return self.region.ptr

    def _chunks(self):
        words = self.region.flat.view(torch.int32)
        step = _SCAN_CHUNK // 4
        gen = torch.Generator(device=words.device)
        gen.manual_seed(self.seed)
        for start in range(0, words.numel(), step):
            chunk = words[start : start + step]
            pattern = torch.randint(
                -(2**31),
                2**31 - 1,
                (chunk.numel(),),
                dtype=torch.int32,
                device=words.device,
                generator=gen,
            )
            yield start * 4, chunk, pattern

    def _pattern(self, write: bool) -> int:
        touched = 0
        for _, chunk, pattern in self._chunks():
            if write:
                chunk.copy_(pattern)
            else:
                words_per_page = PAGE // 4
                n = chunk.numel() // words_per_page * words_per_page
                diff = chunk[:n] != pattern[:n]
                touched += int(diff.view(-1, words_per_page).any(dim=1).sum().item()) * PAGE
                if n < chunk.numel() and bool((chunk[n:] != pattern[n:]).any().item()):
                    touched += (chunk.numel() - n) * 4
        torch.cuda.synchronize()
        return touched

    def rearm(self) -> None:
        """Write the pattern again: every page counts as untouched (after the judge's own use
        of the region, before the candidate's code runs)."""
        self._pattern(write=True)

    def touched_bytes(self) -> int:
        """Bytes of the region (in whole pages) that no longer hold the pattern."""
        return self._pattern(write=False)

    def view(self, offset: int, nbytes: int) -> torch.Tensor:
        """The region's bytes [offset, offset + nbytes) as a uint8 tensor (checked to fit)."""
        if offset < 0 or nbytes < 0 or offset + nbytes > self.nbytes:
            raise ValueError("outside the arena")
        return self.region.flat[offset : offset + nbytes]

    def close(self) -> None:
        self.region.close()


def install(so_path: str, fd: int, nbytes: int) -> Any:
    """The candidate process's side, before anything touches CUDA: route torch's device
    allocations to the arena. Returns the imported region (kept alive for the process)."""
    import ctypes

    from .devmem import DeviceRegion

    allocator = torch.cuda.memory.CUDAPluggableAllocator(so_path, "kw_malloc", "kw_free")
    torch.cuda.memory.change_current_allocator(allocator)
    torch.cuda.set_device(0)
    region = DeviceRegion.open(fd, nbytes)
    lib = ctypes.CDLL(so_path)
    lib.kw_arena_init.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.kw_arena_init(ctypes.c_void_p(region.ptr), ctypes.c_size_t(region.size))
    return region
