"""The runtime guard: runs an optimized kernel in production with its PyTorch reference one step
away: shadow checks on a sampled fraction of calls, falling back to the reference on a mismatch,
an exception, NaN/Inf the reference does not have, or inputs outside the verified envelope, a
canary for a new kernel version, structured logs and counters.

The unsampled call takes no lock, synchronises nothing and copies nothing: one function built
ahead of time (fastpath.py says what it holds). Everything else (a sampled call, a canary, a
tripped guard, an input outside the envelope, check_finite="always") takes the routed path under
the lock. Sampled calls clone the inputs (the reference must see them as the kernel got them),
run both modules, time the kernel with CUDA events and compare on the device: those calls
synchronise.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import random
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from ..sandbox.errors import KernelwrightError
from ..sandbox.judge.compare import TOLERANCES, check_structure, compare, mismatch_rule, tolerance
from ..sandbox.task import load_parameters
from .canary import Canary, CanaryPolicy, Decision
from .envelope import Envelope, signature
from .fastpath import FOLD_EVERY, REFRESH_ON, hooked, hooked_globally, unsampled_call
from .latency import LatencyLog, device_of, device_time

logger = logging.getLogger("kernelwright.runtime")

OnMismatch = Literal["fallback", "call", "raise"]
CheckFinite = Literal["sampled", "always"]
ON_MISMATCH: tuple[str, ...] = ("fallback", "call", "raise")
# Distinct out-of-envelope signatures logged at WARNING; later ones, and repeats, at DEBUG.
_WARN_SIGNATURES = 64
_NEVER = 1 << 62  # the tick of the next sampled call when nothing is sampled


class GuardMismatch(KernelwrightError, RuntimeError):
    """on_mismatch="raise": the kernel disagreed with the reference (or raised, or gave NaN)."""

    fault = "candidate"


@dataclass(frozen=True)
class _Verdict:
    kind: Literal["ok", "mismatch", "nonfinite"]
    reason: str = ""


class Guard(nn.Module):
    """An nn.Module that runs `optimized` and falls back to `reference` when it cannot be trusted.

    Both modules are submodules (`.to()`, `.eval()`, `.cuda()` reach them); their weights are the
    caller's to keep equal (`load_weights` loads one state_dict into both, and into a canary).
    """

    def __init__(
        self,
        reference: nn.Module,
        optimized: nn.Module,
        *,
        shadow_rate: float = 0.01,
        rtol: float | None = None,
        atol: float | None = None,
        on_mismatch: OnMismatch = "fallback",
        canary: tuple | None = None,
        envelope: Envelope | None = None,
        check_finite: CheckFinite = "sampled",
        dtype: torch.dtype | str | None = None,
        clone_inputs: bool = True,
        name: str = "kernel",
        version: str = "1",
        canary_policy: CanaryPolicy | None = None,
        seed: int = 0,
        capture_safe: bool = False,
        host_time_every: int = 16,
    ):
        super().__init__()
        if not 0.0 <= shadow_rate <= 1.0:
            raise ValueError(f"shadow_rate must be within [0, 1], got {shadow_rate}")
        if on_mismatch not in ON_MISMATCH:
            raise ValueError(f"on_mismatch must be one of {ON_MISMATCH}, got {on_mismatch!r}")
        if check_finite not in ("sampled", "always"):
            raise ValueError(f"check_finite must be 'sampled' or 'always', got {check_finite!r}")
        if capture_safe and check_finite == "always":
            raise ValueError('capture_safe=True cannot check_finite="always" (a sync per call)')
        self.reference, self.optimized = reference, optimized
        self.rtol, self.atol = rtol, atol
        self.on_mismatch, self.capture_safe = on_mismatch, capture_safe
        # One unsampled call in this many is timed on the host (two clock reads and a queued
        # float: ~0.5 us a call in a small kernel's loop, the biggest part of the guard's cost).
        self.host_time_every = host_time_every
        self.dtype, self.clone_inputs = dtype, clone_inputs
        self.name, self.version = name, version
        self.canary_policy = canary_policy or CanaryPolicy()
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._tripped: str | None = None  # why every call goes to the reference, or None
        self._counts = dict.fromkeys(COUNTERS, 0)  # "calls" is the tick count, read in _counters
        self._ticks = itertools.count()  # one next() per call (and per read: _reads says how many)
        self._reads = 0
        self._pending: deque[float] = deque()  # unsampled host times not yet in _host
        self._host = LatencyLog()  # the timed unsampled calls (host_time_every), host wall time
        self._device = LatencyLog()  # its sampled calls, device time (CUDA events on a GPU)
        self._canary: Canary | None = None
        self.decisions: list[Decision] = []
        self._warned: set[tuple[str, ...]] = set()
        # The unsampled call (fastpath.unsampled_call), or None when every call takes the routed
        # path; a plain attribute, not a submodule.
        self.__dict__["_fast"] = None
        self._shadow_at = [_NEVER]  # the tick of the next sampled call, read without the lock
        self._envelope: Envelope | None = envelope
        self._check_finite: CheckFinite = check_finite
        self.shadow_rate = shadow_rate  # draws the first sampled tick
        if canary is not None:
            self.set_canary(*canary)
        self._refresh()

    # -- the options the unsampled path depends on ------------------------------------------------
    @property
    def shadow_rate(self) -> float:
        return self._shadow_rate

    @shadow_rate.setter
    def shadow_rate(self, rate: float) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"shadow_rate must be within [0, 1], got {rate}")
        with self._lock:
            self._shadow_rate = rate
            self._shadow_at[0] = self._gap(next(self._ticks))
            self._reads += 1  # that tick was no call

    @property
    def envelope(self) -> Envelope | None:
        return self._envelope

    @envelope.setter
    def envelope(self, envelope: Envelope | None) -> None:
        with self._lock:
            self._envelope = envelope
            self._refresh()

    @property
    def check_finite(self) -> CheckFinite:
        return self._check_finite

    @check_finite.setter
    def check_finite(self, mode: CheckFinite) -> None:
        if mode not in ("sampled", "always"):
            raise ValueError(f"check_finite must be 'sampled' or 'always', got {mode!r}")
        with self._lock:
            self._check_finite = mode
            self._refresh()

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "host_time_every" and (
            not isinstance(value, int) or not 1 <= value <= FOLD_EVERY or value & (value - 1)
        ):  # the unsampled path masks the tick with it, and folds on a timed call
            raise ValueError(
                f"host_time_every must be a power of two up to {FOLD_EVERY}, got {value}"
            )
        super().__setattr__(name, value)
        if name in REFRESH_ON and "_fast" in self.__dict__:  # what the unsampled path holds
            self._refresh()

    def _refresh(self) -> None:
        """The unsampled call's function (fastpath.unsampled_call), or None (every call takes the
        routed path): not while the guard falls back, runs a canary, checks every output or is
        compiled. Under the lock (or before any call)."""
        fast = (
            self._tripped is None
            and self._canary is None
            and self._check_finite == "sampled"
            and self._compiled_call_impl is None
        )
        self.__dict__["_fast"] = unsampled_call(self) if fast else None

    def _gap(self, tick: int) -> int:
        """The tick of the next sampled call after `tick`: a geometric gap, so that each call is
        sampled with probability shadow_rate (one seeded draw per sampled call). Under the lock."""
        rate = self._shadow_rate
        if rate <= 0.0:
            return _NEVER
        if rate >= 1.0:
            return tick + 1
        u = self._rng.random()
        return tick + 1 + int(math.log1p(-u) / math.log1p(-rate))

    # -- the call ----------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The unsampled call's function when it is armed (it sends every other call back to
        _call); nn.Module's call (hooks, tracing, compile) when something asks for it; else
        forward's work without that hop."""
        fast = self._fast
        if fast is not None and not kwargs:
            return fast(self, args)
        return self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        if hooked_globally() or hooked(self):
            return nn.Module.__call__(self, *args, **kwargs)
        return self._run(args, kwargs, False)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(args, kwargs, hooked_globally())

    def _run(self, args: tuple, kwargs: dict, hooked_globally: bool) -> Any:
        tick = next(self._ticks)
        kernel = self.optimized
        if self._fast is not None and tick < self._shadow_at[0] and not kwargs:
            envelope = self._envelope
            if envelope is None or envelope.admits(args):
                # The unsampled call: no lock, nothing allocated on the device.
                run = kernel if hooked_globally or hooked(kernel) else kernel.forward
                if self.capture_safe:
                    try:
                        return run(*args)
                    except Exception as e:
                        return self._kernel_raised(e, args, kwargs)
                if tick & (self.host_time_every - 1):
                    try:
                        return run(*args)
                    except Exception as e:
                        return self._kernel_raised(e, args, kwargs)
                t0 = time.perf_counter()
                try:
                    out = run(*args)
                except Exception as e:
                    return self._kernel_raised(e, args, kwargs)
                self._pending.append(time.perf_counter() - t0)
                if not tick % FOLD_EVERY:
                    self._fold_now()
                return out
        return self._routed(tick, args, kwargs)

    def _routed(self, tick: int, args: tuple, kwargs: dict) -> Any:
        """Every call the lock-free path does not take."""
        outside = self.envelope.mismatch(args, kwargs) if self.envelope is not None else None
        with self._lock:
            route, module, canary = self._route(tick, outside)
        if route == "plain":
            return self._plain(module, args, kwargs)
        if route == "tripped":
            return self.reference(*args, **kwargs)
        if route == "outside":
            self._outside(outside or "", args, kwargs)
            return self.reference(*args, **kwargs)
        if route == "canary" and canary is not None:
            return self._canary_call(canary, args, kwargs)
        if route == "control" and canary is not None:
            return self._control_call(module, canary, args, kwargs)
        return self._shadow(module, args, kwargs)

    def _route(self, tick: int, outside: str | None) -> tuple[str, nn.Module, Canary | None]:
        """Where this call goes; under the lock. A sampled tick is used up whichever way the call
        goes (as a draw per call would be): a call that cannot be sampled forfeits it."""
        module, canary = self.optimized, self._canary
        sampled = tick >= self._shadow_at[0]  # this tick, or a later one when another took it
        if sampled:
            self._shadow_at[0] = self._gap(tick)
        if self._tripped is not None:
            self._counts["fallbacks"] += 1
            return "tripped", module, None
        if outside is not None:
            self._counts["out_of_envelope"] += 1
            self._counts["fallbacks"] += 1
            return "outside", module, None
        if self.capture_safe and _capturing():
            return "plain", module, None  # a sampled call synchronises: not while capturing
        if canary is not None:
            u = self._rng.random()
            if u < canary.fraction:
                return "canary", module, canary
            if u < 2 * canary.fraction:  # a control group of the same size, timed the same way
                return "control", module, canary
        if sampled:
            self._counts["shadow_checks"] += 1
            return "shadow", module, None
        return "plain", module, None

    def _plain(self, module: nn.Module, args: tuple, kwargs: dict) -> Any:
        t0 = time.perf_counter()
        try:
            out = module(*args, **kwargs)
        except Exception as e:
            return self._kernel_raised(e, args, kwargs)
        if not self.capture_safe:
            self._pending.append(time.perf_counter() - t0)
        if self.check_finite == "always" and _has_nonfinite(out):
            return self._judge_nonfinite(out, args, kwargs)
        return out

    def _fold_now(self) -> None:
        with self._lock:
            self._fold()

    def _fold(self) -> None:
        """Move the queued host times into the latency log; under the lock."""
        pending = self._pending
        take = pending.popleft  # as many as are there now: appends go on the other end
        self._host.extend([take() for _ in range(len(pending))])

    def _counters(self) -> dict[str, int]:
        """The counters now, "calls" read off the tick counter; under the lock."""
        self._reads += 1
        return {**self._counts, "calls": next(self._ticks) - self._reads + 1}

    def _shadow(self, module: nn.Module, args: tuple, kwargs: dict) -> Any:
        ref_args, ref_kwargs = self._pristine(args, kwargs)
        try:
            with device_time(device_of(args, kwargs)) as took:
                out = module(*args, **kwargs)
        except Exception as e:
            return self._kernel_raised(e, ref_args, ref_kwargs)
        with self._lock:
            self._device.add(took[0])
        ref = self._reference_or_none(ref_args, ref_kwargs, args, kwargs)
        return self._against(out, ref, args, kwargs)

    def _against(self, out: Any, ref: Any, args: tuple, kwargs: dict) -> Any:
        """The kernel's output where it matches the reference's (or there is none), else the
        reference's, through _failed."""
        if ref is None:
            return out
        verdict = self._compare(out, ref)
        if verdict.kind == "ok":
            return out
        return self._failed(verdict.kind, verdict.reason, ref, args, kwargs)

    # -- failures ----------------------------------------------------------------------------------
    def _kernel_raised(self, error: Exception, args: tuple, kwargs: dict) -> Any:
        reason = f"{type(error).__name__}: {error}"[:500]
        with self._lock:
            self._counts["errors"] += 1
        if self.on_mismatch == "raise":
            self._event("error", logging.ERROR, reason, args, kwargs)
            raise GuardMismatch(f"{self.name} v{self.version} raised: {reason}") from error
        ref = self.reference(*args, **kwargs)
        self._fall_back("error", reason, args, kwargs)
        return ref

    def _failed(self, kind: str, reason: str, ref: Any, args: tuple, kwargs: dict) -> Any:
        with self._lock:
            self._counts["mismatches" if kind == "mismatch" else "nonfinite"] += 1
        if self.on_mismatch == "raise":
            self._event(kind, logging.ERROR, reason, args, kwargs)
            raise GuardMismatch(f"{self.name} v{self.version}: {reason}")
        self._fall_back(kind, reason, args, kwargs)
        return ref

    def _fall_back(self, kind: str, reason: str, args: tuple, kwargs: dict) -> None:
        """This call returns the reference's result; with on_mismatch="fallback" every later
        call does too, until reset()."""
        with self._lock:
            self._counts["fallbacks"] += 1
            trips = self.on_mismatch == "fallback" and self._tripped is None
            if trips:
                self._tripped = f"{kind}: {reason}"
                self._refresh()
        self._event(kind, logging.ERROR, reason, args, kwargs, tripped=trips)
        if trips:
            self._event("fallback", logging.ERROR, f"every call now runs the reference ({kind})")

    def _judge_nonfinite(self, out: Any, args: tuple, kwargs: dict) -> Any:
        """check_finite="always" found NaN/Inf: the reference decides whether it should be there.
        (The kernel ran on these inputs already; a kernel verified not to write them is trusted
        not to have.)"""
        return self._against(out, self._reference_or_none(args, kwargs, args, kwargs), args, kwargs)

    def _outside(self, reason: str, args: tuple, kwargs: dict) -> None:
        sig = tuple(signature(args, kwargs))
        with self._lock:
            first = sig not in self._warned and len(self._warned) < _WARN_SIGNATURES
            if first:
                self._warned.add(sig)
        level = logging.WARNING if first else logging.DEBUG
        if logger.isEnabledFor(level):
            self._event("out-of-envelope", level, reason, args, kwargs)

    def _reference_or_none(self, ref_args, ref_kwargs, args, kwargs) -> Any:
        """The reference's output, or None when the reference itself raised (logged, counted:
        the kernel's output cannot be judged, and is returned)."""
        try:
            return self.reference(*ref_args, **ref_kwargs)
        except Exception as e:
            with self._lock:
                self._counts["reference_errors"] += 1
            self._event(
                "reference-error", logging.WARNING, f"{type(e).__name__}: {e}", args, kwargs
            )
            return None

    # -- comparing ---------------------------------------------------------------------------------
    def _compare(self, out: Any, ref: Any) -> _Verdict:
        """The evaluator's comparison (sandbox/judge/compare.py): structure first, then every
        element within the dtype's atol/rtol (or the guard's), NaN/Inf at the same positions."""
        with torch.no_grad():
            problem = check_structure(out, ref)
            if problem is not None:
                return _Verdict("mismatch", f"{problem[0]}: {problem[1]}")
            dtype = self._dtype_of(ref)
            m = compare(out, ref, dtype, tol=self._tolerance(dtype))
        if m is None:
            return _Verdict("ok")
        kind = "nonfinite" if mismatch_rule(m) == "nan" else "mismatch"
        reason = (
            f"{m.output}: {m.count} of {m.total} elements off (max abs err {m.max_abs_err:.3g}, "
            f"max rel err {m.max_rel_err:.3g}"
            + (f", first at {list(m.first_bad[0][0])}: {m.first_bad[0][1]!r} vs "
               f"{m.first_bad[0][2]!r})" if m.first_bad else ")")
        )  # fmt: skip
        return _Verdict(kind, reason)

    def _dtype_of(self, ref: Any) -> torch.dtype:
        if self.dtype is not None:
            from ..sandbox.task import as_dtype

            return as_dtype(self.dtype)
        for t in _tensors(ref):
            if t.dtype in TOLERANCES:
                return t.dtype
        return torch.float32

    def _tolerance(self, dtype: torch.dtype) -> tuple[float, float] | None:
        if self.rtol is None and self.atol is None:
            return None
        atol, rtol = tolerance(dtype)
        return (atol if self.atol is None else self.atol, rtol if self.rtol is None else self.rtol)

    def _pristine(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if not self.clone_inputs:
            return args, kwargs
        return tuple(map(_clone, args)), {k: _clone(v) for k, v in kwargs.items()}

    # -- the canary --------------------------------------------------------------------------------
    def set_canary(self, module: nn.Module, fraction: float, version: str | None = None) -> None:
        """Route `fraction` of the calls to `module` (shadow-checked, timed with CUDA events
        beside as many calls of the current kernel) until it is promoted or rolled back."""
        if not 0.0 < fraction <= 0.5:
            raise ValueError(f"a canary's fraction must be within (0, 0.5], got {fraction}")
        canary = Canary(module, fraction, version or f"{self.version}-canary")
        with self._lock:
            self._canary = canary
            self.canary_module = module  # a submodule, so .to()/.eval() reach it
            self._refresh()
        self._event(
            "canary-start", logging.INFO, f"{fraction:.3g} of calls", version=canary.version
        )

    def _canary_call(self, canary: Canary, args: tuple, kwargs: dict) -> Any:
        ref_args, ref_kwargs = self._pristine(args, kwargs)
        try:
            with device_time(device_of(args, kwargs)) as took:
                out = canary.module(*args, **kwargs)
        except Exception as e:
            out, took = e, []
        ref = self.reference(*ref_args, **ref_kwargs)
        if isinstance(out, Exception):
            verdict = _Verdict("mismatch", f"{type(out).__name__}: {out}"[:500])
        else:
            verdict = self._compare(out, ref)
        with self._lock:
            canary.record(took[0] if took else None, verdict.kind != "ok")
        if verdict.kind != "ok":
            self._event("canary-fault", logging.WARNING, verdict.reason, args, kwargs)
        self._auto_decide(canary)
        return out if verdict.kind == "ok" else ref

    def _control_call(self, module: nn.Module, canary: Canary, args: tuple, kwargs: dict) -> Any:
        try:
            with device_time(device_of(args, kwargs)) as took:
                out = module(*args, **kwargs)
        except Exception as e:
            return self._kernel_raised(e, args, kwargs)
        with self._lock:
            canary.control.add(took[0])
            self._device.add(took[0])
        self._auto_decide(canary)
        return out

    def _auto_decide(self, canary: Canary) -> None:
        if not self.canary_policy.auto:
            return
        with self._lock:
            if self._canary is not canary:
                return  # decided by another thread meanwhile
            action, reason = canary.decide(self.canary_policy)
        if action == "promote":
            self._apply("promote", reason, canary)
        elif action == "rollback":
            self._apply("rollback", reason, canary)

    def canary_decision(self) -> tuple[str, str]:
        """What the thresholds say now: ("promote" | "rollback" | "hold", why)."""
        with self._lock:
            if self._canary is None:
                return "hold", "no canary"
            return self._canary.decide(self.canary_policy)

    def promote(self, force: bool = False) -> Decision:
        """Swap the canary into the optimized slot, when its thresholds say so (or `force`)."""
        with self._lock:
            canary = self._canary
            if canary is None:
                raise RuntimeError(f"guard {self.name}: no canary to promote")
            action, reason = canary.decide(self.canary_policy)
        if action != "promote" and not force:
            raise RuntimeError(f"guard {self.name}: canary not promoted: {action}: {reason}")
        return self._apply(
            "promote", reason if action == "promote" else f"forced ({reason})", canary
        )

    def rollback(self, reason: str = "manual") -> Decision:
        """Drop the canary; the current kernel keeps every call."""
        with self._lock:
            canary = self._canary
        if canary is None:
            raise RuntimeError(f"guard {self.name}: no canary to roll back")
        return self._apply("rollback", reason, canary)

    def _apply(self, action: str, reason: str, canary: Canary) -> Decision:
        with self._lock:
            if self._canary is not canary:  # another thread decided first
                return self.decisions[-1]
            decision = canary.decision(action, reason, from_version=self.version)
            self._canary = None
            del self.canary_module
            if action == "promote":
                self.optimized, self.version = canary.module, canary.version
                self._pending.clear()  # the old kernel's, as the log they would have gone to
                self._host, self._device = LatencyLog(), LatencyLog()
            self._refresh()
            self.decisions.append(decision)
        self._event(f"canary-{action}", logging.WARNING, reason, version=canary.version)
        return decision

    # -- state -------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Send calls to the optimized kernel again after a fallback (counters are kept)."""
        with self._lock:
            was, self._tripped = self._tripped, None
            self._refresh()
        self._event("reset", logging.WARNING, f"was: {was}" if was else "was not falling back")

    @property
    def falling_back(self) -> str | None:
        """Why every call runs the reference, or None when the kernel runs."""
        return self._tripped

    def stats(self) -> dict[str, Any]:
        """Counters, latency (host wall time of one unsampled call in host_time_every; device
        time of sampled ones), the fallback state, the canary and the decisions."""
        with self._lock:
            self._fold()
            canary = self._canary.summary() if self._canary is not None else None
            return {
                "name": self.name,
                "version": self.version,
                **self._counters(),
                "falling_back": self._tripped,
                "latency": {"host": self._host.summary(), "device": self._device.summary()},
                "canary": canary,
                "decisions": [d.to_dict() for d in self.decisions],
            }

    def metrics(self) -> tuple[dict[str, int], LatencyLog, bool]:
        """(counters, a copy of the host latency log, falling back): what Prometheus scrapes."""
        with self._lock:
            self._fold()
            host = LatencyLog()
            host.buckets, host.count, host.sum = (
                list(self._host.buckets),
                self._host.count,
                self._host.sum,
            )
            return self._counters(), host, self._tripped is not None

    def load_weights(self, state_dict: dict[str, torch.Tensor]) -> list[str]:
        """Load the reference's state_dict (a trained Model's) into the reference (strictly) and
        into the kernel and the canary (by name where shapes match, else in order, as the
        evaluator does); returns the kernel's names that found no match."""
        self.reference.load_state_dict(state_dict)
        missing = load_parameters(self.reference, self.optimized)
        if self._canary is not None:
            load_parameters(self.reference, self._canary.module)
        return missing

    def sync_reference(self) -> list[str]:
        """Copy the kernel's weights into the reference (by name where shapes match, else in
        order); returns the reference's names that found no match. For modules built apart
        from one another, whose random initial weights differ."""
        return load_parameters(self.optimized, self.reference)

    def expose_prometheus(self, registry: Any = None) -> None:
        """Publish this guard's counters in a prometheus_client registry (the default one when
        None); see runtime/prometheus.py."""
        from .prometheus import register

        register(self, registry)

    def _event(
        self,
        event: str,
        level: int,
        reason: str = "",
        args: tuple | None = None,
        kwargs: dict | None = None,
        **extra: Any,
    ) -> None:
        """One JSON line on the "kernelwright.runtime" logger."""
        if not logger.isEnabledFor(level):
            return
        with self._lock:
            counts = self._counters()
        record = {
            "event": event,
            "time": time.time(),
            "guard": self.name,
            "version": self.version,
            "reason": reason,
            **({"inputs": signature(args, kwargs)} if args is not None else {}),
            "counters": counts,
            **extra,
        }
        logger.log(level, json.dumps(record, default=str))


COUNTERS = (
    "calls",
    "shadow_checks",
    "mismatches",
    "nonfinite",
    "errors",
    "fallbacks",
    "out_of_envelope",
    "reference_errors",
)


def guard(
    reference: nn.Module,
    optimized: nn.Module,
    *,
    shadow_rate: float = 0.01,
    rtol: float | None = None,
    atol: float | None = None,
    on_mismatch: OnMismatch = "fallback",
    canary: tuple | None = None,
    **options: Any,
) -> Guard:
    """`optimized` behind the runtime guard, with `reference` one step away (see Guard)."""
    return Guard(
        reference,
        optimized,
        shadow_rate=shadow_rate,
        rtol=rtol,
        atol=atol,
        on_mismatch=on_mismatch,
        canary=canary,
        **options,
    )


def _capturing() -> bool:
    """Whether the current CUDA stream is being captured into a graph."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def _tensors(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for v in out for t in _tensors(v)]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _tensors(v)]
    return []


def _has_nonfinite(out: Any) -> bool:
    """Any NaN/Inf in a floating output (one synchronisation per tensor)."""
    return any(t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in _tensors(out))


def _clone(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, (tuple, list)):
        return type(x)(_clone(v) for v in x)
    return x
