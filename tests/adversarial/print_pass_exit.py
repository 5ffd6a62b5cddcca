# Exploit: printing PASS and exiting 0. A harness that trusts a printed verdict or the exit code
# of the process would record a pass. Caught statically ("builtin": SystemExit), and at run time
# with the static checks skipped: stdout belongs to the candidate and proves nothing, results come
# only from the evaluator's own channel with a per-request nonce, and a SystemExit from candidate
# code is a failure ("exit").
import torch
import torch.nn as nn
import triton
import triton.language as tl

print("PASS")
print('{"status": "ok", "speedup_eager": 1000.0}')
raise SystemExit(0)


@triton.jit
def _noop_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(x_ptr + offs, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        return x
