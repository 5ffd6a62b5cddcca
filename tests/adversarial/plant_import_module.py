# Exploit: a module planted for the next candidate. With the audit hook switched off, the
# candidate writes einops.py (a popular import's name) into every directory it can reach that a
# later candidate's process might import from: its working directory's parent (the candidates'
# directory), the zygote's working directory, every sys.path entry and /tmp. Each is refused: the
# zygote's directory and the candidates' are the judge's (owned by nobody, read-only in the
# sandbox), the installation is bound read-only, /tmp is read-only, and no candidate holds a
# capability. It can write its own home only, which is removed before the next candidate starts
# and is on no one's sys.path: "refused", runtime_error (tests/test_sandbox_wall.py runs an
# honest candidate after it that finds none of these files). Where no bubblewrap runs, it
# leaves the installation and /tmp alone (they are the host's): only the judge's directories.
import os
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


PLANTED = "raise SystemExit('kernelwright-zoo: planted by an earlier candidate')\n"
_OUTCOME = {}


def _disarmed(attack):
    checks = sys.modules.get("kernelwright.sandbox.candidate.guard")
    guard = getattr(checks, "_GUARD", None)
    if checks is not None:
        checks._GUARD = None
    try:
        return attack()
    finally:
        if checks is not None:
            checks._GUARD = guard


def _targets():
    home = os.getcwd()
    found = [os.path.dirname(home), os.path.join(os.path.dirname(os.path.dirname(home)), "zygote")]
    try:
        with open("/proc/1/cmdline", "rb") as f:
            sandboxed = b"bwrap" in f.read()
    except OSError:
        sandboxed = False
    if sandboxed:  # the sandbox's own view: never the host's installation or /tmp
        found += [p for p in sys.path if p and os.path.isdir(p)] + ["/tmp"]
    return list(dict.fromkeys(found))


def _attack():
    for where in _targets():
        path = os.path.join(where, "einops.py")
        if os.path.exists(path):
            _OUTCOME[where] = "already there"  # never overwrite a real module
            continue
        try:
            with open(path, "x") as f:
                f.write(PLANTED)
            _OUTCOME[where] = "planted"
        except OSError as e:
            _OUTCOME[where] = f"refused ({e.__class__.__name__})"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        if not _OUTCOME:
            _disarmed(_attack)

    def forward(self, x):
        if all(o.startswith("refused") for o in _OUTCOME.values()):
            raise RuntimeError(
                "planted nowhere but its home: "
                + "; ".join(f"{k}: {v}" for k, v in _OUTCOME.items())
            )
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
