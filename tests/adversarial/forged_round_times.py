# Exploit (issue 30): forge the times. The candidate process's own clocks are rewritten (the
# host clock runs at 65%, CUDA events report 65% of the truth), the server object gets instance
# attributes op_time / op_block_prepare / op_block_run (the judge v2's dispatch by name), and a
# background thread is left running. None of it reaches a time: the judge's clock, in the
# judge's process, runs from before it writes the inputs until it holds the outputs. The work
# here is WORK_S of host time per call (time.sleep) beside a real kernel, so the judged time
# must be at least WORK_S per call. Run with the static checks off.
import gc
import time

import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

# The candidate owns its process: the in-process layers (audit-hook guard, integrity snapshot)
# are advice to an honest coder, and off here.
sys.modules["kernelwright.sandbox.candidate.guard"]._GUARD = None
sys.modules["kernelwright.sandbox.candidate.integrity"].integrity_diff = lambda before, after: []

WORK_S = 0.005
_real_perf = time.perf_counter
_real_sleep = time.sleep


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


def _forge():
    start = _real_perf()
    time.perf_counter = lambda: start + (_real_perf() - start) * 0.65
    time.monotonic = time.perf_counter
    elapsed = torch.cuda.Event.elapsed_time
    torch.cuda.Event.elapsed_time = lambda self, other: 0.65 * elapsed(self, other)
    for obj in gc.get_objects():
        if type(obj).__name__ == "CandidateServer":
            obj.op_time = lambda *a: {"ms": 1e-4, "output": None, "state": []}
            obj.op_block_prepare = lambda *a: {"ready": 1}
            obj.op_block_run = lambda *a: {"digests": [], "state": []}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.forged = False

    def forward(self, x):
        if not self.forged:
            _forge()
            self.forged = True
        _real_sleep(WORK_S)
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
