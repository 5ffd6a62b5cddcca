"""Judge-owned memory a candidate process maps: every input it reads, every output slot it fills.

The judge creates one region per shape: `sets` input sets (each input's storage span, strides
kept, at an aligned offset) followed by `sets` output sets (each output leaf contiguous, from the
shapes and dtypes the reference's meta trace gives). On a GPU a region is device memory shared
by descriptor (devmem.py); on CPU a memfd sealed against shrinking and growing, so no side can
take pages from under the other's mapping (a SIGBUS in the judge). The judge writes the inputs
(inside its clock when timing), the candidate process computes on views of them and copies its
outputs into the slots; the judge reads the slots. Nothing is unpickled and no object crosses.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
from dataclasses import dataclass
from typing import Any

import torch

from .transport import DTYPES, ProtocolError, span

ALIGN = 256
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class HostRegion:
    """A sealed memfd of `nbytes` mapped read-write in this process."""

    def __init__(self, fd: int, nbytes: int, owner: bool):
        self.fd, self.nbytes, self.owner = fd, nbytes, owner
        self.map = mmap.mmap(fd, max(nbytes, 1), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.flat = torch.frombuffer(self.map, dtype=torch.uint8, count=max(nbytes, 1))
        self.closed = False

    @classmethod
    def create(cls, nbytes: int) -> HostRegion:
        from .transport import _memory_not_a_file

        fd = os.memfd_create("kw-region", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            with _memory_not_a_file():
                os.ftruncate(fd, max(nbytes, 1))
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
        except OSError:
            os.close(fd)
            raise
        return cls(fd, nbytes, owner=True)

    @classmethod
    def open(cls, fd: int, nbytes: int) -> HostRegion:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        if seals & (fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW) != (
            fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
        ):
            raise ProtocolError("a region that is not sealed against resizing")
        if os.fstat(fd).st_size < max(nbytes, 1):
            raise ProtocolError("a region smaller than described")
        return cls(os.dup(fd), nbytes, owner=False)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.flat = None  # type: ignore[assignment]
        with contextlib.suppress(BufferError, ValueError):
            self.map.close()  # BufferError while a view is alive: the GC unmaps it
        with contextlib.suppress(OSError):
            os.close(self.fd)


def create_region(nbytes: int, cuda: bool) -> Any:
    if cuda:
        from .devmem import DeviceRegion

        return DeviceRegion.create(nbytes)
    return HostRegion.create(nbytes)


def open_region(fd: int, nbytes: int, cuda: bool) -> Any:
    if cuda:
        from .devmem import DeviceRegion

        return DeviceRegion.open(fd, nbytes)
    return HostRegion.open(fd, nbytes)


@dataclass(frozen=True)
class Slot:
    """One tensor's place in a region: byte offset, dtype, shape and strides (elements)."""

    offset: int
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    span: int  # elements of storage from the view's first element on

    def to_json(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "stride": list(self.stride),
            "span": self.span,
        }

    @classmethod
    def from_json(cls, d: Any) -> Slot:
        if not isinstance(d, dict):
            raise ProtocolError("a slot that is not an object")
        try:
            slot = cls(
                int(d["offset"]),
                str(d["dtype"]),
                tuple(int(n) for n in d["shape"]),
                tuple(int(s) for s in d["stride"]),
                int(d["span"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ProtocolError(f"a malformed slot ({e})") from None
        if slot.dtype not in DTYPES or min((*slot.shape, *slot.stride, slot.span, 0)) < 0:
            raise ProtocolError("a slot with an unknown dtype or a negative size")
        return slot

    def view(self, flat: torch.Tensor) -> torch.Tensor:
        """This slot's tensor over a region's flat bytes (checked to fit)."""
        dtype = DTYPES[self.dtype]
        size = torch.empty((), dtype=dtype).element_size()
        end = self.offset + self.span * size
        if self.offset % size or end > flat.numel():
            raise ProtocolError("a slot outside its region")
        if self.span == 0:
            return torch.empty(self.shape, dtype=dtype, device=flat.device)
        raw = flat[self.offset : end].view(dtype)
        return raw.as_strided(self.shape, self.stride)  # from raw's own storage offset

    def storage(self, flat: torch.Tensor) -> torch.Tensor:
        """The slot's whole span as a flat tensor of its dtype (what a fill copies)."""
        dtype = DTYPES[self.dtype]
        size = torch.empty((), dtype=dtype).element_size()
        return flat[self.offset : self.offset + self.span * size].view(dtype)


def input_slot(t: torch.Tensor, offset: int) -> Slot:
    _, count = span(t)
    return Slot(
        offset,
        str(t.dtype).removeprefix("torch."),
        tuple(t.shape),
        tuple(t.stride()),
        count,
    )


def output_slot(shape: tuple[int, ...], dtype: torch.dtype, offset: int) -> Slot:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    numel = 1
    for n in shape:
        numel *= n
    return Slot(
        offset, str(dtype).removeprefix("torch."), tuple(shape), tuple(strides[::-1]), numel
    )


def _nbytes(slot: Slot) -> int:
    return slot.span * torch.empty((), dtype=DTYPES[slot.dtype]).element_size()


@dataclass
class Layout:
    """Where `sets` input sets and output sets of one shape sit in a region."""

    inputs: list[list[Slot | None]]  # per set, per input (None: a non-tensor input)
    outputs: list[list[Slot]]  # per set, per output leaf
    nbytes: int

    @classmethod
    def plan(cls, templates: list[Any], out_meta: list, sets: int, slots: bool = True) -> Layout:
        cursor = 0

        def place(n: int) -> int:
            nonlocal cursor
            start = -(-cursor // ALIGN) * ALIGN
            cursor = start + n
            return start

        inputs: list[list[Slot | None]] = []
        for _ in range(sets):
            row: list[Slot | None] = []
            for t in templates:
                if isinstance(t, torch.Tensor):
                    slot = input_slot(t, 0)
                    row.append(input_slot(t, place(_nbytes(slot))))
                else:
                    row.append(None)
            inputs.append(row)
        outputs = []
        for _ in range(sets if slots else 0):
            leaves = []
            for shape, dtype in out_meta:
                slot = output_slot(tuple(shape), dtype, 0)
                leaves.append(output_slot(tuple(shape), dtype, place(_nbytes(slot))))
            outputs.append(leaves)
        return cls(inputs, outputs, max(cursor, 1))

    @property
    def sets(self) -> int:
        return len(self.inputs)

    def to_json(self) -> dict[str, Any]:
        return {
            "inputs": [[s.to_json() if s else None for s in row] for row in self.inputs],
            "outputs": [[s.to_json() for s in row] for row in self.outputs],
            "nbytes": self.nbytes,
        }

    @classmethod
    def from_json(cls, d: Any) -> Layout:
        if not isinstance(d, dict):
            raise ProtocolError("a layout that is not an object")
        try:
            inputs = [
                [Slot.from_json(s) if s is not None else None for s in r] for r in d["inputs"]
            ]
            outputs = [[Slot.from_json(s) for s in r] for r in d["outputs"]]
            return cls(inputs, outputs, int(d["nbytes"]))
        except (KeyError, TypeError) as e:
            raise ProtocolError(f"a malformed layout ({e})") from None


def fill(flat: torch.Tensor, slots: list[Slot | None], values: list[Any]) -> None:
    """Copy each input's storage span into its slot (strides and expansion kept)."""
    for slot, x in zip(slots, values):
        if slot is None or not isinstance(x, torch.Tensor) or slot.span == 0:
            continue
        first, count = span(x)
        src = torch.empty(0, dtype=x.dtype, device=x.device)
        src.set_(x.untyped_storage(), first, (count,), (1,))
        slot.storage(flat).copy_(src, non_blocking=True)


_CHUNK = 1 << 26


def fingerprint(t: torch.Tensor, salt: int) -> int:
    """A salted, position-weighted checksum of t's bits (NaN payloads and -0.0 count), in
    chunks: the judge's record of an output it no longer keeps, to tell it was written again."""
    flat = t.detach().contiguous().reshape(-1)
    raw = flat.view(torch.uint8) if flat.numel() else flat.to(torch.uint8)
    words = raw.view(torch.int32) if raw.numel() % 4 == 0 and raw.numel() else raw.to(torch.int32)
    total = 0
    mod = 2_147_483_629
    a = (salt % mod) | 1
    for start in range(0, words.numel(), _CHUNK):
        chunk = words[start : start + _CHUNK].to(torch.int64)
        index = torch.arange(start, start + chunk.numel(), device=chunk.device, dtype=torch.int64)
        weights = (index * a + salt) % mod + 1
        total = (total + int((chunk * weights).sum().item())) % (1 << 61)
    return total
