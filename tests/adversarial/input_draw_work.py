# Exploit (issue 30): move the work into the input draw. The judge v2 had the candidate process
# draw its timed inputs from the task's get_inputs, outside the judge's clock; this candidate
# swaps get_inputs in every namespace it finds for one that also computes and caches the answer,
# and its forward returns the cached answer when there is one. The judge v3 draws every input
# itself and writes it into its own region inside its clock: the swapped draw never runs, the
# cache stays empty, and the time is the real work (WORK_S per call). Static checks off.
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
_CACHE = {}


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


def _swap():
    for obj in gc.get_objects():
        if isinstance(obj, dict) and callable(obj.get("get_inputs")) and "Model" in obj:
            draw = obj["get_inputs"]

            def cheating(draw=draw):
                inputs = draw()
                x = inputs[0]
                _CACHE[x.data_ptr()] = x * 3.0 + 1.0  # the answer, computed outside the clock
                return inputs

            obj["get_inputs"] = cheating


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _swap()

    def forward(self, x):
        hit = _CACHE.pop(x.data_ptr(), None)
        if hit is not None:
            return hit
        time.sleep(WORK_S)
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
