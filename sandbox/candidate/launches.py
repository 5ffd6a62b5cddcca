"""Counting the Triton kernels a candidate launches, and reading their compile statistics.

Triton's launch hook is not called by the interpreter and is bypassed by torch.compile's own
launches, so the worker wraps the `run` methods of JITFunction and InterpretedFunction instead:
every `kernel[grid](...)` goes through one of them (autotuners and heuristics included).

A kernel compiled ahead with `compiled = kernel.warmup(..., grid=...)` and launched with
`compiled[grid](*args)` (Triton's fused-softmax tutorial) goes through neither: that runner of
CompiledKernel.__getitem__ is wrapped too, and its launch counts for the JITFunction that compiled
the kernel (`compiled.src.fn`), only for a CompiledKernel that JITFunction's own cache holds (what
its compile made, not an object put together by hand). Under the interpreter, warmup returns
tritoncompat's stand-in, whose launches go through InterpretedFunction.run.

The launcher itself, `compiled.run(grid0, grid1, grid2, stream, function, packed_metadata,
launch_metadata, enter_hook, exit_hook, *args)` (CompiledKernel's `run` property, what both
`kernel[grid]` and `compiled[grid]` call inside), is wrapped too, with the same rule: a launch
through it counts for `compiled.src.fn` when that kernel's cache holds `compiled`. A launch
already being counted (JITFunction.run, the __getitem__ runner) is not counted again by the
launcher it calls. Under the interpreter the stand-in's `run` takes the same arguments.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from typing import Any

from ..results import KernelStats

_counts: collections.Counter = collections.Counter()
_kernels: dict[int, Any] = {}
_installed = False


class _Launching(threading.local):
    depth = 0  # counted launches in progress on this thread


_launching = _Launching()


def _count(kernel: Any) -> None:
    _counts[id(kernel)] += 1
    _kernels[id(kernel)] = kernel


def install() -> None:
    """Wrap the launch entry points once per process (before the integrity snapshot is taken)."""
    global _installed
    if _installed:
        return
    from triton.runtime import jit

    classes = [jit.JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - every supported Triton has it
        pass
    for cls in classes:
        _wrap(cls)
    try:
        from triton.compiler.compiler import CompiledKernel
    except ImportError:  # pragma: no cover - every supported Triton has it
        pass
    else:
        _wrap_compiled(CompiledKernel)
    _installed = True


def _wrap(cls: Any) -> None:
    original = cls.run

    def run(self, *args, **kwargs):
        _launching.depth += 1
        try:
            out = original(self, *args, **kwargs)
        finally:
            _launching.depth -= 1
        # Counted once the launch returned: a launch that raised (and that a fallback caught)
        # did not run a kernel.
        if not kwargs.get("warmup", False):
            _count(self)
        return out

    run.__wrapped__ = original  # type: ignore[attr-defined]
    run.__name__ = "run"
    cls.run = run


def _wrap_compiled(cls: Any) -> None:
    original = cls.__getitem__

    def __getitem__(self, grid):
        runner = original(self, grid)
        kernel = _compiled_by(self)
        if kernel is None:
            return runner

        def launch(*args, **kwargs):
            _launching.depth += 1
            try:
                out = runner(*args, **kwargs)
            finally:
                _launching.depth -= 1
            _count(kernel)  # once the launch returned, as in `run`
            return out

        return launch

    __getitem__.__wrapped__ = original  # type: ignore[attr-defined]
    cls.__getitem__ = __getitem__
    launcher = vars(cls).get("run")
    if isinstance(launcher, property) and launcher.fget is not None:
        cls.run = property(_counted_launcher(launcher.fget), doc=launcher.__doc__)


def _counted_launcher(fget: Any) -> Any:
    """CompiledKernel.run's getter, returning a launcher that counts each call made outside a
    launch already counted."""

    def run(self):
        launcher = fget(self)
        if _launching.depth:  # JITFunction.run or the runner above is launching: counted there
            return launcher
        kernel = _compiled_by(self)
        if kernel is None:
            return launcher

        def launch(*args, **kwargs):
            if _launching.depth:
                return launcher(*args, **kwargs)
            _launching.depth += 1
            try:
                out = launcher(*args, **kwargs)
            finally:
                _launching.depth -= 1
            _count(kernel)
            return out

        return launch

    run.__wrapped__ = fget  # type: ignore[attr-defined]
    run.__name__ = "run"
    return run


def _compiled_by(compiled: Any) -> Any:
    """The JITFunction whose compile made `compiled` (a CompiledKernel), or None: its source's
    `fn`, provided that function's per-device caches hold this very object."""
    from triton.runtime import jit

    kernel = getattr(getattr(compiled, "src", None), "fn", None)
    if not isinstance(kernel, jit.JITFunction):
        return None
    if not any(ck is compiled for ck in _cached(kernel)):
        return None
    return kernel


def reset() -> None:
    _counts.clear()
    _kernels.clear()


def launches(module_name: str) -> dict[str, int]:
    """Launches since the last reset of kernels defined in `module_name`, by kernel name."""
    out: dict[str, int] = {}
    for key, n in _counts.items():
        fn = getattr(_kernels[key], "fn", None)
        if fn is not None and getattr(fn, "__module__", None) == module_name:
            out[fn.__name__] = out.get(fn.__name__, 0) + n
    return out


def kernel_stats(module_name: str) -> tuple[KernelStats, ...]:
    """Registers, spills, shared memory, warps and stages of each compiled kernel of the module."""
    stats = []
    for key, n in _counts.items():
        kernel = _kernels[key]
        fn = getattr(kernel, "fn", None)
        if fn is None or getattr(fn, "__module__", None) != module_name:
            continue
        compiled = _compiled_variants(kernel)
        if not compiled:  # interpreter: nothing was compiled
            stats.append(KernelStats(name=fn.__name__, launches=n))
            continue
        for ck in compiled:
            md = getattr(ck, "metadata", None)
            stats.append(
                KernelStats(
                    name=fn.__name__,
                    num_warps=_int(getattr(md, "num_warps", None)),
                    num_stages=_int(getattr(md, "num_stages", None)),
                    registers=_int(getattr(ck, "n_regs", None)),
                    spills=_int(getattr(ck, "n_spills", None)),
                    shared_bytes=_int(getattr(md, "shared", None)),
                    launches=n,
                )
            )
    return tuple(stats)


def _cached(kernel: Any) -> list[Any]:
    """CompiledKernel objects in a JITFunction's per-device caches (layout differs by version)."""
    found: list[Any] = []
    caches = getattr(kernel, "device_caches", None) or {}
    for entry in list(caches.values()):
        cache = entry[0] if isinstance(entry, tuple) else entry
        if isinstance(cache, dict):
            found.extend(cache.values())
    return found


def _compiled_variants(kernel: Any) -> list[Any]:
    """The CompiledKernels of a JITFunction, their handles loaded for the statistics."""
    found = _cached(kernel)
    for ck in found:
        init = getattr(ck, "_init_handles", None)
        if callable(init) and getattr(ck, "n_regs", None) is None:
            # Handles (and n_regs/n_spills) load lazily; stats are best-effort, never a verdict.
            with contextlib.suppress(Exception):
                init()
    return found


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
