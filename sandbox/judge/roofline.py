"""The physical floor of a task on this device: minimal bytes and FLOPs over measured ceilings."""

from __future__ import annotations

import contextlib
import json
import os
import re
import statistics
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from ..config import cache_dir
from ..contract import torch_dtypes
from ..results import Roofline

# A time under bound / IMPOSSIBLE_FACTOR is rejected as physically impossible. The ceilings are
# measured (a device-to-device copy, cuBLAS matmuls), and measured ceilings sit 10-25% under the
# datasheet: on an H200, copy 4.25-4.3 TB/s vs 4.8 (1.13x), bf16 matmul ~790 vs ~990 TFLOP/s
# (1.25x). A kernel may beat our measurement (read-only traffic streams a little faster than a
# copy; a kernel may beat cuBLAS at one shape) but not the datasheet: 1.25 is the largest
# measured-to-datasheet gap, so only a time that would need more than the datasheet peak fails.
# For tasks whose outputs fit in L2 (60 MB on an H200), writes may still sit in L2 when the end
# event fires: such small tasks can look up to (output bytes / total bytes) faster than HBM.
IMPOSSIBLE_FACTOR = 1.25

DTYPE_KEYS = {dtype: name for name, dtype in torch_dtypes().items()}

# Measurement sizes: a 1 GiB copy (2 GiB moved) runs ~0.5 ms on an H200, long enough for events
# to resolve it to <1%; matmuls of 8192^3 and 16384^3 (1.1 and 8.8 TFLOP) reach cuBLAS's best
# rate; the faster of the two sizes is the ceiling. Random data: zeros run ~13% faster
# (894 vs 788 TFLOP/s bf16 measured on an H200), so they would overstate nothing but the peak.
COPY_BYTES = 1 << 30
MATMUL_SIZES = (8192, 16384)
WARMUP = 3
REPS = 10
CACHE_FILE = "ceilings.json"


@dataclass(frozen=True)
class Ceilings:
    """What the device can do at best: copy bandwidth and matmul rate per dtype.

    peak_tflops["fp32"] is the fastest matmul on fp32 inputs the device offers (TF32 tensor
    cores): a legal tf32x3 kernel can beat plain fp32 SIMT and must not be called impossible.
    `meaningful` is False on CPU, where there is no roofline to speak of.
    """

    device: str
    bandwidth_gbps: float
    peak_tflops: dict[str, float] = field(default_factory=dict)
    meaningful: bool = True
    key: str = ""  # GPU name, driver and torch version the numbers were measured with
    measured_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ceilings:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def measure_ceilings(device="cuda", refresh: bool = False) -> Ceilings:
    """The ceilings of `device`: measured once per GPU/driver/torch and cached as JSON.

    The cache lives in $KERNELWRIGHT_CACHE_DIR or ~/.cache/kernelwright (ceilings.json); a file
    lock keeps two workers on one machine from measuring at the same time (they would halve each
    other's numbers). On CPU: Ceilings(device="cpu", meaningful=False), nothing measured.
    """
    device = torch.device(device)
    if device.type != "cuda":
        return Ceilings(device="cpu", bandwidth_gbps=0.0, peak_tflops={}, meaningful=False)
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = device_key(index)
    path = cache_dir() / CACHE_FILE
    with _locked(path.with_suffix(".lock")):
        if not refresh and (cached := _read_cache(path).get(key)) is not None:
            return Ceilings.from_dict(cached)
        ceilings = _measure(index, key)
        cache = _read_cache(path)
        cache[key] = ceilings.to_dict()
        _write_json(path, cache)
    return ceilings


def count_work(model: torch.nn.Module, inputs: list[Any], outputs: Any) -> tuple[int, int]:
    """(minimal bytes, FLOPs) of one forward: the floor any implementation must pay.

    Bytes: every distinct input tensor, parameter and buffer read once, every output written
    once, in their actual dtypes; except a tensor the forward only gathers rows or elements from
    (embedding, embedding_bag, index_select, gather), which counts what the gathers touch when
    that is less than the whole tensor: a lookup of a few rows of a large table must not make an
    honest kernel look faster than memory allows. FLOPs: torch.utils.flop_counter over a forward
    on the meta device (matmul, addmm, bmm, baddbmm, conv, sdpa: 2 per multiply-add). Pointwise
    work is not counted: it runs on the SIMT units and is bounded by memory long before it could
    approach the tensor-core peak the FLOPs are divided by (1 FLOP per element against 4.8 TB/s
    and 990 TFLOP/s would change the bound by <0.1%).
    """
    flops, gathered = _forward_counts(model, inputs)
    named: list[tuple[str, int | str, torch.Tensor]] = [
        ("input", i, t) for i, t in enumerate(_tensors(inputs))
    ]
    named += [("param", n, t) for n, t in [*model.named_parameters(), *model.named_buffers()]]
    read = _distinct_bytes([t for _, _, t in named])
    for kind, key, t in named:
        touched = gathered.get((kind, key))
        full = t.numel() * t.element_size()
        if touched is not None and touched < full:
            read -= full - touched
    written = _distinct_bytes(_tensors(outputs))
    return read + written, flops


# Ops that read only some rows (or elements) of their first argument, and the bytes they touch.
def _rows_touched(table: torch.Tensor, index: torch.Tensor, dim: int = 0) -> int:
    row = table.numel() // max(1, table.shape[dim]) if table.dim() else 1
    return index.numel() * row * table.element_size()


def _gather_ops() -> dict[Any, Any]:
    """aten op -> bytes it reads from its first argument, for the ops this torch has."""

    def by_rows(weight, index, *args, **kwargs) -> int:
        return _rows_touched(weight, index)

    table = {
        "embedding": by_rows,
        "_embedding_bag": by_rows,
        "_embedding_bag_forward_only": by_rows,
        "index_select": lambda t, dim, idx: _rows_touched(t, idx, dim),
        "gather": lambda t, dim, idx, **k: idx.numel() * t.element_size(),
    }
    ops = {}
    for name, touched in table.items():
        packet = getattr(torch.ops.aten, name, None)
        if packet is not None and hasattr(packet, "default"):
            ops[packet.default] = touched
    return ops


_GATHERS = _gather_ops()


class _GatherUse(TorchDispatchMode):
    """Records, for each watched tensor (by id), whether some op reads it whole and how many
    bytes the gather ops read from it."""

    def __init__(self, watched: dict[int, tuple[str, Any]]) -> None:
        super().__init__()
        self.watched = watched
        self.whole: set[tuple[str, Any]] = set()
        self.gathered: dict[tuple[str, Any], int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        gather = _GATHERS.get(func)
        for pos, t in enumerate(_tensors([list(args), kwargs])):
            key = self.watched.get(id(t))
            if key is None:
                continue
            touched = None
            if gather is not None and pos == 0 and args and args[0] is t:
                try:
                    touched = int(gather(*args, **kwargs))
                except Exception:  # an overload we do not know: count the tensor whole
                    touched = None
            if touched is None:
                self.whole.add(key)
            else:
                self.gathered[key] = self.gathered.get(key, 0) + touched
        return func(*args, **kwargs)


def _forward_counts(model: torch.nn.Module, inputs: list[Any]) -> tuple[int, dict]:
    """(FLOPs, {("input", i) | ("param", name): bytes gathered}) of one forward; the map holds
    only tensors that nothing but gathers read.

    On meta copies when the model allows (nothing runs, no buffer changes); a model that cannot
    run on meta is run for real under no_grad, its buffers restored afterwards.
    """
    state = {n: t for n, t in [*model.named_parameters(), *model.named_buffers()]}

    def counted(run, params: dict[str, torch.Tensor], args: list[Any]) -> tuple[int, dict]:
        watched: dict[int, tuple[str, str | int]] = {id(t): ("param", n) for n, t in params.items()}
        watched |= {id(t): ("input", i) for i, t in enumerate(_tensors(args))}
        counter, uses = FlopCounterMode(display=False), _GatherUse(watched)
        with torch.no_grad(), counter, uses:
            run()
        only = {k: b for k, b in uses.gathered.items() if k not in uses.whole}
        return int(counter.get_total_flops()), only

    try:
        meta_state = {n: torch.empty_like(t, device="meta") for n, t in state.items()}
        meta_inputs = _to_meta(list(inputs))
        return counted(
            lambda: torch.func.functional_call(model, meta_state, tuple(meta_inputs)),
            meta_state,
            meta_inputs,
        )
    except Exception:
        pass
    saved = {n: b.detach().clone() for n, b in model.named_buffers()}
    try:
        return counted(lambda: model(*inputs), state, list(inputs))
    finally:
        with torch.no_grad():
            for n, b in model.named_buffers():
                b.copy_(saved[n])


def roofline(
    bytes_: int, flops: int, dtype, ceilings: Ceilings, precision: str = "strict"
) -> Roofline:
    """The lower-bound time: max(bytes / bandwidth, FLOPs / peak for `dtype`), and its limiter;
    with the floor at the precision policy's fastest legal arithmetic beside it (policy_peak)."""
    if not ceilings.meaningful or ceilings.bandwidth_gbps <= 0:
        raise ValueError(f"no roofline on {ceilings.device}: its ceilings are not measured")
    key = dtype_key(dtype)
    peak = ceilings.peak_tflops[key]
    memory_ms = bytes_ / (ceilings.bandwidth_gbps * 1e9) * 1e3
    compute_ms = flops / (peak * 1e12) * 1e3 if peak > 0 else 0.0
    legal, how = policy_peak(ceilings, key, precision)
    legal_ms = flops / (legal * 1e12) * 1e3 if legal > 0 else 0.0
    return Roofline(
        bytes=int(bytes_),
        flops=int(flops),
        bandwidth_gbps=ceilings.bandwidth_gbps,
        peak_tflops=peak,
        bound_ms=max(memory_ms, compute_ms),
        limiter="compute" if legal_ms > memory_ms else "memory",
        device=ceilings.key or ceilings.device,
        policy_ms=max(memory_ms, legal_ms),
        policy_tflops=legal,
        policy=how,
    )


# tf32x3 (the fp32-strict policy's fast path) issues three TF32 products per product.
TF32X3_PRODUCTS = 3


def policy_peak(ceilings: Ceilings, key: str, precision: str = "strict") -> tuple[float, str]:
    """(TFLOP/s, how it was chosen): the fastest matmul rate the precision policy allows on
    `key` inputs. peak_tflops["fp32"] is the TF32 rate, which only tf32-ok allows; strict fp32
    gets the faster of cuBLAS's exact fp32 rate ("fp32-ieee"; a cache written without it has
    none) and TF32's rate over tf32x3's three products. A roofline fraction of this is one a
    strict kernel can reach: of the TF32 rate it could never pass a third."""
    peak = ceilings.peak_tflops[key]
    if key != "fp32" or precision == "tf32-ok":
        return peak, f"{key} matmul rate"
    split = peak / TF32X3_PRODUCTS
    ieee = ceilings.peak_tflops.get("fp32-ieee", 0.0)
    if ieee > split:
        return ieee, "fp32 strict: cuBLAS's exact fp32 rate"
    return split, "fp32 strict: TF32's rate / 3 (tf32x3)"


def fraction(bound_ms: float, time_ms: float) -> float | None:
    """The share of the roofline reached: bound / time (1.0 is the roofline); None if no time."""
    return bound_ms / time_ms if time_ms > 0 else None


def is_impossible(time_ms: float, bound_ms: float) -> bool:
    """True when `time_ms` beats the bound by more than IMPOSSIBLE_FACTOR: no device does that."""
    return bound_ms > 0 and time_ms < bound_ms / IMPOSSIBLE_FACTOR


def dtype_key(dtype) -> str:
    """ "fp32"/"fp16"/"bf16" for a torch dtype or one of those strings."""
    if isinstance(dtype, torch.dtype):
        if dtype not in DTYPE_KEYS:
            raise ValueError(f"no matmul ceiling for {dtype}")
        return DTYPE_KEYS[dtype]
    if dtype not in DTYPE_KEYS.values():
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPE_KEYS.values())}")
    return dtype


def device_key(index: int) -> str:
    """What the ceilings depend on: GPU name, driver, torch (and its CUDA) version."""
    name = torch.cuda.get_device_name(index)
    return f"{name}|driver {driver_version()}|torch {torch.__version__}|cuda {torch.version.cuda}"


# -- measuring -------------------------------------------------------------------------------------


def _measure(index: int, key: str) -> Ceilings:
    with torch.cuda.device(index):
        bandwidth = _copy_bandwidth_gbps(index)
        peaks = {
            "fp32": _matmul_tflops(torch.float32, index),
            "fp16": _matmul_tflops(torch.float16, index),
            "bf16": _matmul_tflops(torch.bfloat16, index),
            "fp32-ieee": _matmul_tflops(torch.float32, index, tf32=False),
        }
    torch.cuda.empty_cache()
    return Ceilings(
        device=f"cuda:{index}",
        bandwidth_gbps=bandwidth,
        peak_tflops=peaks,
        key=key,
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )


def _copy_bandwidth_gbps(index: int) -> float:
    """Device-to-device copy rate, bytes read plus bytes written, GB/s."""
    free, _ = torch.cuda.mem_get_info(index)
    n = min(COPY_BYTES, free // 8) // 4
    src = torch.randn(n, device=f"cuda:{index}")
    dst = torch.empty_like(src)
    ms = _median_ms(lambda: dst.copy_(src))
    moved = 2 * src.numel() * src.element_size()  # read n, write n
    return moved / (ms * 1e-3) / 1e9


def _matmul_tflops(dtype: torch.dtype, index: int, tf32: bool = True) -> float:
    """Best matmul rate on random data over MATMUL_SIZES; fp32 with TF32 allowed unless `tf32`
    is False (cuBLAS's exact SGEMM, the strict policy's other legal path)."""
    best = 0.0
    with _tf32_allowed(tf32):
        for n in MATMUL_SIZES:
            free, _ = torch.cuda.mem_get_info(index)
            if 3 * n * n * torch.finfo(dtype).bits // 8 > free // 2:
                continue
            a = torch.randn(n, n, device=f"cuda:{index}", dtype=dtype)
            b = torch.randn(n, n, device=f"cuda:{index}", dtype=dtype)
            c = torch.empty(n, n, device=f"cuda:{index}", dtype=dtype)
            ms = _median_ms(lambda a=a, b=b, c=c: torch.mm(a, b, out=c))
            best = max(best, 2 * n**3 / (ms * 1e-3) / 1e12)
            del a, b, c
    return best


def _median_ms(fn) -> float:
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(REPS):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


@contextlib.contextmanager
def _tf32_allowed(allowed: bool = True) -> Iterator[None]:
    """TF32 matmuls on inside (off with `allowed` False); the caller's setting restored after
    (the worker watches it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high" if allowed else "highest")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(before)


def driver_version() -> str:
    """The NVIDIA driver version ("580.159.04"), else the CUDA driver API version."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            first = f.readline()  # "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.."
    except OSError:
        first = ""
    found = re.search(r"\b\d{2,4}\.\d+(?:\.\d+)?\b", first)
    if found:
        return found.group(0)
    return str(getattr(torch._C, "_cuda_getDriverVersion", lambda: "")())


# -- cache -----------------------------------------------------------------------------------------


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, at worst two measurements
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# -- counting --------------------------------------------------------------------------------------


def _tensors(values: Any) -> list[torch.Tensor]:
    if isinstance(values, torch.Tensor):
        return [values]
    if isinstance(values, (list, tuple)):
        return [t for v in values for t in _tensors(v)]
    if isinstance(values, dict):
        return [t for v in values.values() for t in _tensors(v)]
    return []


def _distinct_bytes(tensors: list[torch.Tensor]) -> int:
    """Bytes of the tensors, each memory region counted once (the same tensor passed twice)."""
    seen = set()
    total = 0
    for t in tensors:
        key = (t.device, t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if key in seen:
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return total


def _to_meta(values: Any) -> Any:
    if isinstance(values, torch.Tensor):
        return torch.empty_strided(values.shape, values.stride(), dtype=values.dtype, device="meta")
    if isinstance(values, (list, tuple)):
        return type(values)(_to_meta(v) for v in values)
    return values
