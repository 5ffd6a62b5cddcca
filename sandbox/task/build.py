"""Build a task's reference and inputs: seeded, on a device and dtype, parameters re-drawn; and copy
parameters from one model to another (the candidate gets the reference's).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn

from ..contract import torch_dtypes

DTYPES: dict[str, torch.dtype] = torch_dtypes()

# Re-drawing parameters: a constant tensor (LayerNorm weight 1, bias 0) gets spread around its
# value: CONSTANT_SPREAD of its magnitude, or ZERO_SPREAD when it is 0 (a bias of 0 +- 0.1 still
# moves every output by far more than the fp32 tolerance of 1e-4).
CONSTANT_SPREAD = 0.5
ZERO_SPREAD = 0.1


# -- reference and inputs --------------------------------------------------------------------------


def build_reference(ns: Mapping[str, Any], dtype, device, seed: int) -> nn.Module:
    """Model(*get_init_inputs()) on `device` in `dtype`, floating parameters/buffers re-drawn.

    Default initialisation (LayerNorm weight 1, bias 0) hides a kernel that ignores its
    parameters; every floating parameter and buffer is re-drawn from a seeded generator with the
    mean and spread of its default values (see `redraw_`). The model keeps its default training
    mode (KernelBench semantics: batch norm uses batch statistics).
    """
    dtype, device = as_dtype(dtype), torch.device(device)
    with seeded(seed, device):
        init_inputs = list(ns["get_init_inputs"]())
        with torch.device(device):
            model = ns["Model"](*init_inputs)
    redraw_(model, seed)
    return model.to(device=device, dtype=dtype)


def build_inputs(ns: Mapping[str, Any], dtype, device, seed: int) -> list[Any]:
    """get_inputs() under seeded generators; floating tensors cast to `dtype`, all on `device`.

    On a GPU, get_inputs runs with `device` as torch's default device, so its torch.randn & co.
    draw there: a GB of inputs drawn on the host takes seconds, and the evaluator draws fresh
    inputs many times per candidate. A get_inputs that cannot run that way (it needs host
    tensors: numpy, pin_memory) draws on the host. Tensors are always copied (a task may hand out
    the same module-level tensor twice), keep their strides (a transposed or sliced input stays
    non-contiguous) and expanded dimensions stay expanded. Non-tensor inputs pass through.
    """
    return build_input_sets(ns, dtype, device, seed, 1)[0]


def build_input_sets(ns: Mapping[str, Any], dtype, device, seed: int, n: int) -> list[list[Any]]:
    """n input sets as build_inputs draws one, under a single seeding: set k is what the k-th
    call of get_inputs() after seeding draws (set 0 is build_inputs' set for `seed`). A timed
    round draws up to 64 sets, and the generators' fork, seeding and restore cost more than a
    small set's draw."""
    dtype, device = as_dtype(dtype), torch.device(device)
    sets = None
    if device.type == "cuda":
        try:
            with seeded(seed, device), device:
                sets = [list(ns["get_inputs"]()) for _ in range(n)]
        except Exception:
            sets = None
    if sets is None:
        with seeded(seed, device):  # the device's RNG too, for a get_inputs that draws there
            sets = [list(ns["get_inputs"]()) for _ in range(n)]
    return [[_placed(x, dtype, device) for x in inputs] for inputs in sets]


def load_parameters(src: nn.Module | list[tuple[str, torch.Tensor]], dst: nn.Module) -> list[str]:
    """Copy parameters and buffers of `src` into `dst`; returns dst's names that found no match.

    By name where the name and shape match, else in order among the unused tensors of `src`
    with the same shape and the same kind (floating or not). `src` may be the (name, tensor)
    list of a module that lives in another process (the judge's reference).
    """
    source = src if isinstance(src, list) else _named_tensors(src)
    used: set[str] = set()
    pending = []
    with torch.no_grad():
        for name, t in _named_tensors(dst):
            s = dict(source).get(name)
            if s is not None and s.shape == t.shape and _same_kind(s, t):
                t.copy_(s)
                used.add(name)
            else:
                pending.append((name, t))
        rest = [(n, s) for n, s in source if n not in used]
        unmatched = []
        for name, t in pending:
            match = next(
                (i for i, (_, s) in enumerate(rest) if s.shape == t.shape and _same_kind(s, t)),
                None,
            )
            if match is None:
                unmatched.append(name)
                continue
            t.copy_(rest.pop(match)[1])
    return unmatched


def redraw_(model: nn.Module, seed: int) -> nn.Module:
    """Re-draw every floating parameter and buffer of `model` in place, keeping its magnitude.

    A tensor with spread keeps its mean and standard deviation; a constant one gets spread around
    its value (CONSTANT_SPREAD relative, ZERO_SPREAD for zeros); a non-negative one (running_var,
    a scale of ones) stays non-negative: uniform in [max(0, m - sqrt(3) s), m + sqrt(3) s].
    Left alone: integer and bool buffers (num_batches_tracked, indices), tensors holding inf or
    NaN (a -inf attention mask), and 0/1 buffers holding both values (a causal mask registered as
    `torch.tril(torch.ones(n, n))`): their values are the task's semantics, not weights.
    """
    generators: dict[torch.device, torch.Generator] = {}
    buffers = {id(b) for b in model.buffers()}
    with torch.no_grad():
        for _, t in _named_tensors(model):
            if not t.is_floating_point() or t.numel() == 0 or t.device.type == "meta":
                continue
            if not torch.isfinite(t).all() or (id(t) in buffers and _is_mask(t)):
                continue
            if t.device not in generators:
                generators[t.device] = torch.Generator(device=t.device).manual_seed(seed)
            t.copy_(_redrawn(t, generators[t.device]))
    return model


def _is_mask(t: torch.Tensor) -> bool:
    """True for a tensor of 0s and 1s that holds both."""
    zeros, ones = (t == 0), (t == 1)
    return bool((zeros | ones).all() and zeros.any() and ones.any())


def _redrawn(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    values = t.detach().double()
    mean = values.mean().item()
    std = values.std(unbiased=False).item() if t.numel() > 1 else 0.0
    lo, hi = values.min().item(), values.max().item()
    if std <= 1e-12 * max(1.0, abs(mean)):
        std = CONSTANT_SPREAD * abs(mean) if mean != 0 else ZERO_SPREAD
    if lo >= 0 and hi > 0:
        half = math.sqrt(3.0) * std
        low, high = max(0.0, mean - half), mean + half
        u = torch.rand(t.shape, generator=gen, device=t.device, dtype=torch.float64)
        return low + (high - low) * u
    return mean + std * torch.randn(t.shape, generator=gen, device=t.device, dtype=torch.float64)


@contextlib.contextmanager
def seeded(seed: int, device: torch.device | str = "cpu") -> Iterator[None]:
    """torch's global RNG (CPU, and `device` if CUDA) seeded inside, restored afterwards."""
    device = torch.device(device)
    cuda = (
        [device.index if device.index is not None else torch.cuda.current_device()]
        if (device.type == "cuda")
        else []
    )
    with torch.random.fork_rng(devices=cuda, device_type="cuda"):
        torch.default_generator.manual_seed(seed)
        for index in cuda:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(seed)
        yield


def as_dtype(dtype) -> torch.dtype:
    """A torch.dtype from "fp32"/"fp16"/"bf16" or a torch.dtype."""
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPES)}") from None


def _placed(x: Any, dtype: torch.dtype, device: torch.device) -> Any:
    if isinstance(x, (list, tuple)):
        return type(x)(_placed(v, dtype, device) for v in x)
    if not isinstance(x, torch.Tensor):
        return x
    target = dtype if x.is_floating_point() else x.dtype
    expanded = [d for d, (n, s) in enumerate(zip(x.shape, x.stride())) if s == 0 and n > 1]
    if expanded:  # keep a broadcast input broadcast: move one slice, expand it again
        base = x
        for d in expanded:
            base = base.narrow(d, 0, 1)
        return _placed(base, dtype, device).expand(x.shape)
    out = torch.empty_strided(x.shape, x.stride(), dtype=target, device=device)
    out.copy_(x)
    return out


def _named_tensors(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    return [*model.named_parameters(), *model.named_buffers()]


def _same_kind(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.is_floating_point() == b.is_floating_point()
