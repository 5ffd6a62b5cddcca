"""Integrity of what a cheat would patch: identities and flags, compared before and after."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

from ..crossing import view
from ..rules import _words, any, callable, getattr, isinstance, len, sorted, type, vars
from . import guard as _guard
from .guard import _short

_MODULES_TO_WATCH = (
    "torch",
    "torch.cuda",
    "torch.testing",
    "torch.nn",
    "torch.nn.functional",
    "triton",
    "triton.testing",
    "triton.runtime.jit",
    "triton.runtime.autotuner",
    "triton.runtime.interpreter",
    "triton.language",
    "time",
    "builtins",
    "math",
    "gc",
    "os",
    "sys",
    "copy",
    "json",
    "random",
    "threading",
)
_TENSOR_METHODS = _words(
    "__eq__ __ne__ __sub__ __getitem__ __setitem__ __bool__ __len__ __repr__ __torch_function__ "
    "__torch_dispatch__ __init_subclass__ sub abs max min isnan isinf isfinite clone copy_ "
    "data_ptr untyped_storage storage_offset stride size dim numel is_contiguous contiguous to "
    "double float cpu cuda eq ne all any sum item tolist equal allclose fill_ zero_ view reshape "
    "flatten detach element_size nbytes shape dtype device is_floating_point new_empty norm "
    "__class__"
)
_MODULE_METHODS = _words(
    "__call__ _call_impl _wrapped_call_impl __getattr__ __setattr__ to parameters named_parameters "
    "buffers named_buffers state_dict load_state_dict train eval"
)
_WATCHED: tuple[str, ...] = (
    *(
        f"torch.cuda.{n}"
        for n in _words(
            "synchronize current_stream default_stream stream set_stream Stream Event graph "
            "CUDAGraph empty_cache is_available memory_allocated max_memory_allocated "
            "reset_peak_memory_stats set_per_process_memory_fraction"
        )
    ),
    *(
        f"torch.cuda.Event.{n}"
        for n in ["__new__", "__init__", "record", "elapsed_time", "synchronize", "query", "wait"]
    ),
    *(f"torch.cuda.Stream.{n}" for n in ["__new__", "synchronize", "wait_stream", "wait_event"]),
    "torch.cuda.CUDAGraph.replay",
    *(
        f"time.{n}"
        for n in _words(
            "perf_counter perf_counter_ns time time_ns monotonic monotonic_ns process_time sleep"
        )
    ),
    *(
        f"torch.{n}"
        for n in _words(
            "allclose equal isclose isnan isinf isfinite abs max min sub eq ne all any where empty "
            "empty_like zeros zeros_like ones randn rand randint manual_seed no_grad clone norm "
            "Tensor Generator get_default_dtype set_default_dtype"
        )
    ),
    "torch.testing.assert_close",
    *(f"torch.Tensor.{n}" for n in _TENSOR_METHODS),
    *(f"torch.nn.Module.{n}" for n in _MODULE_METHODS),
    "torch.nn.functional.conv2d",
    "torch.nn.functional.linear",
    "triton.testing.do_bench",
    "triton.testing.do_bench_cudagraph",
    "triton.jit",
    "triton.runtime.jit.JITFunction.run",
    "triton.runtime.jit.JITFunction.__getitem__",
    "triton.runtime.jit.JITFunction.__call__",
    "triton.runtime.interpreter.InterpretedFunction.run",
    "triton.runtime.interpreter.InterpretedFunction.__call__",
    "triton.runtime.autotuner.Autotuner.run",
    "triton.runtime.autotuner.Heuristics.run",
    "triton.knobs.runtime.launch_enter_hook",
    "triton.knobs.runtime.launch_exit_hook",
    *(
        f"builtins.{n}"
        for n in _words(
            "print open isinstance issubclass type id len getattr setattr hasattr __import__ "
            "compile exec eval float int bool max min abs sum range zip any all sorted round super "
            "object repr str"
        )
    ),
    "math.isclose",
    "math.isfinite",
    "math.isnan",
    "gc.collect",
    "os._exit",
    "os.getpid",
    "sys.exit",
    "sys.addaudithook",
    "copy.deepcopy",
    "json.dumps",
    "json.loads",
    "random.SystemRandom",
    "threading.enumerate",
)

# The evaluator's own modules (some imported lazily by the worker): a patched `compare` or
# `same_bits` would pass anything, so they are watched like torch's.
_OWN_MODULES = (
    "rules",
    "static.aliases",
    "static.check",
    "candidate.places",
    "candidate.guard",
    "candidate.integrity",
    "judge.compare",
    "task",
    "judge.timing",
    "judge.roofline",
    "candidate.launches",
    "results",
)
_SANDBOX = __package__.rpartition(".")[0]  # kernelwright.sandbox
_MISSING = object()


def _static_attr(owner: Any, name: str) -> Any:
    """owner.name without running descriptors on classes, so the identity is stable."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            found = vars(klass).get(name, _MISSING)
            if found is not _MISSING:
                return found
        return _MISSING
    return getattr(owner, name, _MISSING)


def _lookup(path: str) -> Any:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is not None:
            value: Any = module
            for name in parts[cut:]:
                value = _static_attr(value, name)
                if value is _MISSING:
                    return _MISSING
            return value
    return _MISSING


def _flag_readers() -> dict[str, Callable[[], object]]:
    """Precision and numerics switches whose change is rule "precision-flag"."""
    import torch

    b = torch.backends
    readers: dict[str, Callable[[], object]] = {
        "torch.backends.cuda.matmul.allow_tf32": lambda: b.cuda.matmul.allow_tf32,
        "torch.backends.cudnn.allow_tf32": lambda: b.cudnn.allow_tf32,
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": (
            lambda: b.cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction": (
            lambda: b.cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision,
        "torch.backends.cudnn.benchmark": lambda: b.cudnn.benchmark,
        "torch.backends.cudnn.deterministic": lambda: b.cudnn.deterministic,
        "torch.backends.cudnn.enabled": lambda: b.cudnn.enabled,
        "torch.get_default_dtype()": torch.get_default_dtype,
        "torch.are_deterministic_algorithms_enabled()": (
            torch.are_deterministic_algorithms_enabled
        ),
        "torch.backends.cuda.flash_sdp_enabled()": lambda: b.cuda.flash_sdp_enabled(),
        "torch.backends.cuda.mem_efficient_sdp_enabled()": lambda: (
            b.cuda.mem_efficient_sdp_enabled()
        ),
        "torch.backends.cuda.math_sdp_enabled()": lambda: b.cuda.math_sdp_enabled(),
        "torch.backends.cuda.preferred_blas_library()": lambda: b.cuda.preferred_blas_library(),
        # torch >= 2.9 spells TF32 this way too; absent attributes read as missing.
        "torch.backends.fp32_precision": lambda: getattr(b, "fp32_precision", None),
        "torch.backends.cuda.matmul.fp32_precision": (
            lambda: getattr(b.cuda.matmul, "fp32_precision", None)
        ),
        "torch.backends.cudnn.fp32_precision": lambda: getattr(b.cudnn, "fp32_precision", None),
        "torch.is_autocast_enabled('cuda')": lambda: torch.is_autocast_enabled("cuda"),
        "torch.is_autocast_enabled('cpu')": lambda: torch.is_autocast_enabled("cpu"),
        "torch.get_default_device()": lambda: str(torch.get_default_device()),
    }
    return readers


def _state_readers() -> dict[str, Callable[[], object]]:
    """Process-wide hooks and modes that would change how the reference runs ("monkeypatch")."""
    import torch
    import torch.nn.modules.module as module_mod

    readers: dict[str, Callable[[], object]] = {}
    for name in dir(module_mod):
        if name.startswith("_global_") and name.endswith("hooks"):
            readers[f"torch.nn.modules.module.{name}"] = lambda name=name: tuple(  # type: ignore[misc]
                getattr(module_mod, name).values()
            )
    readers["torch function modes"] = lambda: torch._C._len_torch_function_stack()
    readers["torch dispatch modes"] = lambda: torch._C._len_torch_dispatch_stack()
    # A directory put first on the import path makes the evaluator's next import of a module
    # load a file from there (the worker drops its cwd, the candidate's home, at start).
    readers["sys.path"] = lambda: tuple(sys.path)
    readers["sys.gettrace()"] = sys.gettrace
    readers["sys.getprofile()"] = sys.getprofile
    readers["the sandbox guard"] = lambda: _guard._GUARD
    return readers


def _read(reader: Callable[[], object]) -> object:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # reading legacy TF32 flags warns on torch >= 2.9
            return reader()
    except Exception:  # an API this torch version lacks
        return _MISSING


_HERE = view.SANDBOX_DIR  # the worker run as __main__ lives under it (judge/worker.py)


def _own_modules() -> dict[str, Any]:
    """kernelwright.sandbox modules (and the worker run as __main__)."""
    found = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None) or ""
        if name.startswith("kernelwright.sandbox") or (
            name == "__main__" and file.startswith(_HERE + os.sep)
        ):
            found[name] = module
    return found


def _own_functions() -> dict[str, object]:
    """Every callable at the top of the evaluator's modules, and the methods of their classes."""
    entries: dict[str, object] = {}
    for name, module in _own_modules().items():
        for attr, value in list(vars(module).items()):
            if not callable(value):
                continue
            entries[f"{name}.{attr}"] = value
            if isinstance(value, type) and value.__module__ == module.__name__:
                for k, v in vars(value).items():
                    if callable(v) or isinstance(v, (staticmethod, classmethod, property)):
                        entries[f"{name}.{attr}.{k}"] = v
    return entries


_SNAPSHOT_KEY = "the integrity snapshot itself"


def integrity_snapshot() -> dict[str, object]:
    """Identities of patchable functions and classes, and the values of precision/state flags.

    Imports the watched modules first, so that one a candidate imports later cannot arrive
    patched. Take it after the worker has wrapped what it wraps (launch counting). Never raises:
    if patched builtins break it half way, that failure is itself part of the snapshot.
    """
    snap: dict[str, object] = {_SNAPSHOT_KEY: "complete"}
    try:
        for name in (*_MODULES_TO_WATCH, *(f"{_SANDBOX}.{m}" for m in _OWN_MODULES)):
            with contextlib.suppress(Exception):
                importlib.import_module(name)
        for path in _WATCHED:
            snap[path] = _lookup(path)
        for name in _MODULES_TO_WATCH:
            snap[f"sys.modules[{name!r}]"] = sys.modules.get(name, _MISSING)
        snap.update(_own_functions())
        for key, reader in {**_flag_readers(), **_state_readers()}.items():
            snap[key] = _read(reader)
    except Exception as e:  # builtins or the standard library patched under our feet
        snap[_SNAPSHOT_KEY] = f"failed ({type(e).__name__})"
    return snap


def integrity_restore(snapshot: dict[str, object]) -> list[str]:
    """Put back the watched functions and classes a candidate replaced; the keys restored.

    For the worker, after integrity_diff found a change: a patched builtin (isinstance, print)
    would otherwise break the evaluator's own reply. Flags and hooks are not restored (the worker
    is replaced after such a candidate anyway).
    """
    restored = []
    for path in (*_WATCHED, *(k for k in snapshot if k.startswith("kernelwright.sandbox"))):
        original = snapshot.get(path, _MISSING)
        if original is _MISSING or _lookup(path) is original:
            continue
        owner_path, _, name = path.rpartition(".")
        owner = _lookup(owner_path)
        if owner is _MISSING:
            continue
        with contextlib.suppress(Exception):
            inherited = isinstance(owner, type) and any(
                vars(base).get(name, _MISSING) is original for base in owner.__mro__[1:]
            )
            if inherited and name in vars(owner):
                delattr(owner, name)  # the candidate shadowed a base class's method
            else:
                setattr(owner, name, original)
            restored.append(path)
    return restored


_FLAG_KEYS_CACHE: set[str] = set()
_STATE_KEYS_CACHE: set[str] = set()


def integrity_diff(before: dict[str, object], after: dict[str, object]) -> list[tuple[str, str]]:
    """(rule, what changed) for each difference: "precision-flag" for flags, else "monkeypatch"."""
    if not _FLAG_KEYS_CACHE:
        _FLAG_KEYS_CACHE.update(_flag_readers())
        _STATE_KEYS_CACHE.update(_state_readers())
        _STATE_KEYS_CACHE.add(_SNAPSHOT_KEY)
    changes = []
    for key in sorted(set(before) | set(after), key=lambda k: (k not in _FLAG_KEYS_CACHE, k)):
        old, new = before.get(key, _MISSING), after.get(key, _MISSING)
        if key in _FLAG_KEYS_CACHE or key in _STATE_KEYS_CACHE:
            if _same_value(old, new):
                continue
            rule = "precision-flag" if key in _FLAG_KEYS_CACHE else "monkeypatch"
            changes.append(
                (rule, f"{key} ({_short(_shown_value(old))} -> {_short(_shown_value(new))})")
            )
        elif old is not new:
            if key not in before:
                continue  # a sandbox module first imported since the snapshot
            how = "deleted" if new is _MISSING else "replaced"
            changes.append(("monkeypatch", f"{key} ({how})"))
    return changes


def _same_value(a: object, b: object) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:
        return False


def _shown_value(value: object) -> object:
    return "missing" if value is _MISSING else value


def python_threads() -> set[int]:
    """Idents of every live Python thread (threading's and raw _thread ones)."""
    idents = {t.ident for t in threading.enumerate() if t.ident is not None}
    idents.update(sys._current_frames())
    return idents
