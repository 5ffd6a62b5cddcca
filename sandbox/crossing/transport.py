"""Messages and tensors between the judge and a candidate process: JSON plus shared memory.

The two processes talk over one AF_UNIX SOCK_SEQPACKET socket pair: each message is one
datagram of JSON, bounded in size, with the memfds of its tensors attached (SCM_RIGHTS). A
tensor travels as a description (dtype, shape, strides, offset) and a memfd holding the bytes of
its storage span; the receiver maps the memfd and builds a plain torch.Tensor over it with
`torch.frombuffer` and `as_strided`, after checking that the description fits the buffer. Nothing
is unpickled and no object of the sender's is ever called: the judge sees bytes, not objects
(OpenSSH's privilege separation, Chromium's broker: the trusted side receives data only).

A memfd is the sender's until it is sealed: an unsealed one can be shrunk while the receiver
reads it (the receiver dies of SIGBUS) or rewritten during its copy. So every memfd allows
sealing; a sender of bytes to be read drops its mapping and seals size and writes
(`export_sealed`, `pack`); a buffer the receiver may write into, the judge's inputs, has its
size sealed (`export`). `rebuild` refuses a memfd without the seals it needs before it looks at
its size (F_GET_SEALS, then fstat).

File descriptors cross PID, mount and user namespaces, which legacy CUDA IPC handles cannot
(they are refused across PID namespaces), so the same path serves the GPU: device tensors are
copied through host memory (on the H200 a pageable copy runs at ~10-20 GB/s; see RESULTS.md).
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import json
import mmap
import os
import resource
import select
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import torch

from ..errors import KernelwrightError

# One message's JSON: requests and replies are descriptions, never data (data rides in memfds).
MAX_MESSAGE_BYTES = 256 * 1024
# Tensors (memfds) one message may carry: outputs and inputs of one call.
MAX_FDS = 64
# The most dimensions a described tensor may have (torch allows 64; no task uses more than 8).
MAX_DIMS = 16

DTYPES: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
        torch.complex64,
        torch.complex128,
    )
}


# A memfd whose size is fixed, and one whose bytes are fixed too (see the module's docstring).
SEALS_SIZE = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
SEALS_FROZEN = SEALS_SIZE | fcntl.F_SEAL_WRITE


class ProtocolError(KernelwrightError):
    """The peer sent something that is not a well-formed message: a verdict, never a crash."""

    fault = "candidate"  # the pool makes a worker's its own rule, "protocol" (the evaluator's)


class PeerGone(KernelwrightError):
    """The peer closed its end (it exited or was killed)."""

    fault = "candidate"


@dataclass
class Received:
    """One message: its JSON and the file descriptors that came with it (owned by the caller)."""

    message: dict[str, Any]
    fds: list[int]

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


def channel_pair() -> tuple[socket.socket, socket.socket]:
    """A connected pair of SEQPACKET sockets (message boundaries kept, fds passable)."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_MESSAGE_BYTES * 2)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, MAX_MESSAGE_BYTES * 2)
    return a, b


def send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(data)} bytes is over {MAX_MESSAGE_BYTES}")
    if len(fds) > MAX_FDS:
        raise ProtocolError(f"{len(fds)} file descriptors in one message (at most {MAX_FDS})")
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([data], ancillary)


def receive(sock: socket.socket, timeout: float | None) -> Received | None:
    """The next message, or None when none arrived within `timeout` seconds.

    Raises PeerGone on EOF and ProtocolError on an oversized, truncated or non-JSON message;
    descriptors that came with a bad message are closed.
    """
    if timeout is not None:
        ready, _, _ = select.select([sock], [], [], max(0.0, timeout))
        if not ready:
            return None
    try:
        data, ancdata, flags, _ = sock.recvmsg(
            MAX_MESSAGE_BYTES + 1, socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize)
        )
    except ConnectionResetError as e:
        raise PeerGone(str(e)) from None
    fds: list[int] = []
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            got = array.array("i")
            got.frombytes(payload[: len(payload) - len(payload) % got.itemsize])
            fds.extend(got)
    received = Received({}, fds)
    if not data and not fds:
        raise PeerGone("the peer closed its end")
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) or len(data) > MAX_MESSAGE_BYTES:
        received.close()
        raise ProtocolError(f"a message over {MAX_MESSAGE_BYTES} bytes or {MAX_FDS} descriptors")
    try:
        message = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        received.close()
        raise ProtocolError(f"a message that is not JSON ({e})") from None
    if not isinstance(message, dict):
        received.close()
        raise ProtocolError("a message that is not a JSON object")
    received.message = message
    return received


# -- tensors through memfds ------------------------------------------------------------------------


def span(t: torch.Tensor) -> tuple[int, int]:
    """(first, count) elements of t's storage that t can reach (strides are never negative)."""
    if t.numel() == 0:
        return t.storage_offset(), 0  # type: ignore[return-value]  # never a SymInt: real tensors
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return t.storage_offset(), last + 1  # type: ignore[return-value]  # never a SymInt: real tensors


class SharedBuffer:
    """A memfd of `nbytes` mapped read-write; `tensor(dtype)` views it as a flat tensor.

    private: map a received memfd copy-on-write (one sealed against writes cannot be mapped
    shared and writable; what the receiver writes stays its own).
    """

    def __init__(
        self, nbytes: int, name: str = "kw-tensor", fd: int | None = None, *, private: bool = False
    ):
        self.nbytes = nbytes
        if fd is None:
            fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            try:
                with _memory_not_a_file():
                    os.ftruncate(fd, max(nbytes, 1))  # the one byte an empty buffer maps
            except OSError:
                os.close(fd)
                raise
        # mmap cannot map 0 bytes: an empty tensor gets a one-byte mapping it never reads.
        flags = mmap.MAP_PRIVATE if private else mmap.MAP_SHARED
        self.map = mmap.mmap(fd, max(nbytes, 1), flags, mmap.PROT_READ | mmap.PROT_WRITE)
        self.fd = fd

    def seal(self, *, writes: bool) -> None:
        """Fix the memfd's size, and with `writes` its bytes too: the mapping is dropped first
        (a writable shared mapping would keep F_SEAL_WRITE out: EBUSY), so no tensor of this
        buffer's may be alive. F_SEAL_SEAL: no seal is added later."""
        if writes:
            self.map.close()  # BufferError while a tensor views it: a bug of the sender's
        fcntl.fcntl(
            self.fd, fcntl.F_ADD_SEALS, (SEALS_FROZEN if writes else SEALS_SIZE) | fcntl.F_SEAL_SEAL
        )

    def tensor(self, dtype: torch.dtype) -> torch.Tensor:
        size = torch.empty((), dtype=dtype).element_size()
        count = self.nbytes // size
        if count == 0:
            return torch.empty(0, dtype=dtype)
        return torch.frombuffer(self.map, dtype=dtype, count=count)

    def close(self) -> None:
        with contextlib.suppress(BufferError, ValueError):
            self.map.close()  # BufferError while a tensor still views it: the GC unmaps it
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


@contextlib.contextmanager
def _memory_not_a_file():
    """Lift RLIMIT_FSIZE's soft limit to its hard one while a memfd is sized.

    The limit keeps a process from filling the disk; a memfd is memory, bounded by the memory
    rule, and a 6 GB tensor of a KernelBench task would otherwise fail with EFBIG. Both sides
    set only the soft limit (isolation.set_limits, zygote), and the candidate's guard denies
    resource.setrlimit, so only this function lifts it.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == hard:
        yield
        return
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def describe(t: torch.Tensor, fd_index: int, *, contiguous: bool) -> dict[str, Any]:
    """The wire description of `t` whose bytes sit in the memfd at `fd_index`."""
    if contiguous:
        stride, offset = _contiguous_strides(tuple(t.shape)), 0
    else:
        first, _ = span(t)
        stride, offset = list(t.stride()), t.storage_offset() - first  # type: ignore[assignment]
    return {
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
        "stride": list(stride),
        "offset": offset,
        "fd": fd_index,
        "device": str(t.device),
    }


def export(t: torch.Tensor, *, keep_layout: bool) -> tuple[SharedBuffer, torch.Tensor]:
    """Copy `t` into a new memfd: its storage span (strides kept) or its values (contiguous).

    Returns the buffer and the host tensor over it, in t's layout. The span copy keeps an
    input's strides (a transposed or expanded input stays so on the other side). The memfd's
    size is sealed, its bytes are not: the judge's inputs, which a candidate on the host writes
    in place (the judge reads what forward left through its own view).
    """
    buffer, view = _filled(t, keep_layout)
    buffer.seal(writes=False)
    return buffer, view


def export_sealed(t: torch.Tensor, *, keep_layout: bool) -> SharedBuffer:
    """`export`, with the mapping dropped and the memfd sealed against writes too: bytes for
    the receiver to read that nobody can change or resize any more (a candidate's replies)."""
    buffer, view = _filled(t, keep_layout)
    del view
    buffer.seal(writes=True)
    return buffer


def _filled(t: torch.Tensor, keep_layout: bool) -> tuple[SharedBuffer, torch.Tensor]:
    if keep_layout:
        first, count = span(t)
        flat = torch.empty(0, dtype=t.dtype, device=t.device)
        flat.set_(t.untyped_storage(), first, (count,), (1,))
        buffer = SharedBuffer(count * t.element_size())
        host = buffer.tensor(t.dtype)
        if count:
            host.copy_(flat)
        view = host.as_strided(tuple(t.shape), tuple(t.stride()), t.storage_offset() - first)
        return buffer, view
    buffer = SharedBuffer(t.numel() * t.element_size())
    host = buffer.tensor(t.dtype).view(tuple(t.shape)) if t.numel() else buffer.tensor(t.dtype)
    if t.numel():
        host.copy_(t)
    return buffer, host.view(tuple(t.shape)) if t.numel() else host.reshape(tuple(t.shape))


# Where pack() starts each tensor: a multiple of every element size (complex128's 16 too).
_PACK_ALIGN = 64


def pack(
    tensors: Sequence[torch.Tensor], fd_index: int
) -> tuple[SharedBuffer, list[dict[str, Any]]]:
    """The values of many tensors in one memfd, each contiguous at an aligned offset, and their
    descriptions (all naming the memfd at `fd_index`).

    A model's parameters and buffers travel so: a ResNet-101 has over 500, more than one
    message carries descriptors for (MAX_FDS, and the kernel's own limit of 253).
    """
    starts, nbytes = [], 0
    for t in tensors:
        nbytes = -(-nbytes // _PACK_ALIGN) * _PACK_ALIGN
        starts.append(nbytes)
        nbytes += t.numel() * t.element_size()
    buffer = SharedBuffer(nbytes, name="kw-tensors")
    descs = []
    for t, start in zip(tensors, starts, strict=True):
        desc = describe(t, fd_index, contiguous=True)
        desc["offset"] = start // t.element_size()
        descs.append(desc)
        _copy_into(buffer, t, start)
    buffer.seal(writes=True)  # the candidate reads the parameters: fixed, like its replies
    return buffer, descs


def _copy_into(buffer: SharedBuffer, t: torch.Tensor, start: int) -> None:
    """t's values at byte `start` of the buffer (the view dies here, so the buffer can seal)."""
    if t.numel():
        flat = torch.frombuffer(buffer.map, dtype=t.dtype, count=t.numel(), offset=start)
        flat.view(tuple(t.shape)).copy_(t)


def rebuild(
    desc: Any, fds: list[int], *, max_bytes: int, shared: bool = False
) -> tuple[SharedBuffer, torch.Tensor]:
    """A plain host tensor over the memfd a description names, after checking that it fits.

    Raises ProtocolError for anything malformed: an unknown dtype, a negative or oversized shape,
    strides that reach outside the buffer, a buffer larger than `max_bytes`, a descriptor that
    is not a memfd sealed against shrinking, growing and (unless `shared`) writes. The tensor
    maps it copy-on-write; `shared`: writable and shared with the sender (the candidate's view
    of the judge's inputs, which forward may write in place).
    """
    layout = _checked(desc, fds, max_bytes=max_bytes, shared=shared)
    buffer = _mapped(fds[layout[0]], layout[5], shared)
    return buffer, _view(buffer, *layout[1:5])


def rebuild_packed(
    descs: Sequence[Any], fds: list[int], *, max_bytes: int
) -> tuple[list[SharedBuffer], list[torch.Tensor]]:
    """Many tensors of a few memfds (pack's): each memfd checked as `rebuild` checks it and
    mapped once, every tensor a view of its memfd's one mapping. A model's hundreds of
    parameters travel in one memfd; a mapping per tensor, each of the whole memfd and
    copy-on-write, counts against the process's data limit once per tensor (Swin V2's ~400
    tensors of a 0.1 GiB memfd found no memory under the candidate's RLIMIT_DATA)."""
    layouts = [_checked(d, fds, max_bytes=max_bytes, shared=False) for d in descs]
    maps: dict[int, SharedBuffer] = {}
    for index, _, _, _, _, nbytes in layouts:
        if index not in maps:
            maps[index] = _mapped(fds[index], nbytes, False)
    tensors = [
        _view(maps[index], dtype, shape, stride, offset)
        for index, dtype, shape, stride, offset, _ in layouts
    ]
    return list(maps.values()), tensors


def _checked(
    desc: Any, fds: list[int], *, max_bytes: int, shared: bool
) -> tuple[int, torch.dtype, list[int], list[int], int, int]:
    """rebuild's checks of one description: (its fd's index, dtype, shape, strides, offset,
    the memfd's size in bytes)."""
    if not isinstance(desc, dict):
        raise ProtocolError("a tensor description that is not an object")
    dtype = DTYPES.get(desc.get("dtype"))  # type: ignore[arg-type]
    shape, stride, offset = desc.get("shape"), desc.get("stride"), desc.get("offset")
    index = desc.get("fd")
    if dtype is None:
        raise ProtocolError(f"unknown dtype {str(desc.get('dtype'))[:40]!r}")
    if not (_ints(shape) and _ints(stride) and len(shape) == len(stride) <= MAX_DIMS):
        raise ProtocolError("shape and strides must be lists of non-negative ints of one length")
    if not (isinstance(offset, int) and offset >= 0 and isinstance(index, int)):
        raise ProtocolError("offset and fd must be non-negative ints")
    if not 0 <= index < len(fds):
        raise ProtocolError(f"tensor names descriptor {index}, the message carries {len(fds)}")
    fd = fds[index]
    _check_seals(fd, SEALS_SIZE if shared else SEALS_FROZEN)
    nbytes = os.fstat(fd).st_size  # fixed from here on: the seals are in place
    if nbytes > max_bytes:
        raise ProtocolError(f"a tensor buffer of {nbytes} bytes (at most {max_bytes} expected)")
    if nbytes == 0:
        raise ProtocolError("an empty tensor buffer (an empty tensor travels in one byte)")
    size = torch.empty((), dtype=dtype).element_size()
    numel = 1
    for n in shape:
        numel *= n
    reach = offset + (sum((n - 1) * s for n, s in zip(shape, stride)) + 1 if numel else 0)
    if reach * size > nbytes:
        raise ProtocolError(
            f"a tensor of shape {shape[:8]} strides {stride[:8]} reaches {reach * size} bytes "
            f"of a {nbytes}-byte buffer"
        )
    return index, dtype, shape, stride, offset, nbytes


def _mapped(fd: int, nbytes: int, shared: bool) -> SharedBuffer:
    buffer = SharedBuffer(nbytes, fd=os.dup(fd), private=not shared)
    os.close(buffer.fd)  # the mapping needs no descriptor: none leaks, whoever keeps the tensor
    buffer.fd = -1
    return buffer


def _view(
    buffer: SharedBuffer, dtype: torch.dtype, shape: list[int], stride: list[int], offset: int
) -> torch.Tensor:
    if any(n == 0 for n in shape):
        return torch.empty(tuple(shape), dtype=dtype)
    return buffer.tensor(dtype).as_strided(tuple(shape), tuple(stride), offset)


_SEAL_NAMES = {
    fcntl.F_SEAL_SHRINK: "shrinking",
    fcntl.F_SEAL_GROW: "growing",
    fcntl.F_SEAL_WRITE: "writes",
}


def _check_seals(fd: int, needed: int) -> None:
    """Refuse a descriptor that is not a memfd carrying the seals `needed` (a memfd made
    without MFD_ALLOW_SEALING reports F_SEAL_SEAL only)."""
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError as e:  # EINVAL: not a memfd (a pipe, a socket, a file on disk)
        raise ProtocolError(f"a tensor buffer that is not a memfd ({e})") from None
    missing = [name for bit, name in _SEAL_NAMES.items() if needed & bit and not seals & bit]
    if missing:
        raise ProtocolError(
            f"a tensor buffer not sealed against {' and '.join(missing)}: its sender could "
            "still resize or rewrite it while it is read"
        )


def _ints(value: Any) -> TypeGuard[list[int]]:
    return isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**48 for v in value
    )


def _contiguous_strides(shape: tuple[int, ...]) -> list[int]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return strides[::-1]
