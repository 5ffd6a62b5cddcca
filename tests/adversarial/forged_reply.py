# Exploit: a forged verdict. The candidate writes a result message of the evaluator's old
# protocol (status ok, a 1000x speedup) to every descriptor it has, then exits at once with
# os._exit(0) so that nothing of the real evaluation follows. The judge's verdicts are made in
# the judge's process and its channel is not among the candidate's descriptors; the candidate
# process ending without a reply is a crash ("exit").
import json
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


_FORGED = {"type": "result", "status": "ok", "speedup_eager": 1000.0, "recycle": False}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        line = (json.dumps({"result": _FORGED, **_FORGED}) + "\n").encode()
        for fd in range(3, 64):
            try:
                os.write(fd, line)
            except OSError:
                pass
        os._exit(0)
