"""The runtime guard's unsampled call: one function of (guard, args) built ahead of time, and
the hook checks that send a call through nn.Module's own call instead.

The unsampled call takes no lock and runs one function built ahead of time (`unsampled_call`,
rebuilt whenever what it holds changes), its state bound in its closure rather than read off the
nn.Module (each of whose attribute reads goes through Module.__getattr__'s hook): the hook dicts
nn.Module.__call__ would look at (any hook, a compiled module or a jit trace recording scopes
sends the call through nn.Module's call instead); one tick of a shared counter
(`itertools.count`, whose next() the GIL makes atomic) that both counts the call and says whether
it is the next sampled call (the gaps between sampled calls are drawn from the seeded RNG once
per sampled call: a geometric law, the same as a draw per call); the envelope's compiled check
(`Envelope.condition`, written into that function); on one call in `host_time_every` (16), two
perf_counter reads whose difference goes on a lock-free queue, folded into the latency log every
1024 calls and on every read of the stats (none with capture_safe); and the kernel's `forward`,
without nn.Module's `__call__` hop. No device synchronisation, no copy.

Guard (guard.py) rebuilds it whenever an attribute in REFRESH_ON changes; every call it does not
take goes back to Guard._call or Guard._routed. This module stands below guard.py and never
imports it: `unsampled_call` is handed the Guard (typed Any here for that reason).
"""

from __future__ import annotations

import importlib
import time
from typing import TYPE_CHECKING, Any

import torch
from torch.nn.modules import module as _nn_module

if TYPE_CHECKING:
    from torch import nn

# Unsampled calls' host times wait on a lock-free queue; one call in this many folds them in.
FOLD_EVERY = 1024  # a power of two: the fast path folds when tick & (FOLD_EVERY - 1) == 0

# The attributes the unsampled path's function holds: setting one on the guard rebuilds it.
REFRESH_ON = frozenset(
    (
        "optimized",
        "capture_safe",
        "host_time_every",
        "_compiled_call_impl",
        "_forward_hooks",
        "_forward_pre_hooks",
        "_backward_hooks",
        "_backward_pre_hooks",
    )
)


def unsampled_call(guard: Any) -> Any:
    """The unsampled call as one function of (guard, args), everything it reads bound in its
    namespace (an nn.Module's attribute reads go through its __getattr__ hook, ~40 ns each):

    - the hooks nn.Module.__call__ would run, on every module, on the guard and on the kernel, a
      torch.compile'd kernel, and a torch.jit.trace recording module scopes (only then does
      nn.Module's _slow_forward do more than forward): any of them, and the call goes back to
      Guard._call, which takes nn.Module's call;
    - one tick of the call counter, compared with the tick of the next sampled call;
    - the envelope's compiled check (Envelope.checker), when there is an envelope;
    - the kernel's forward, read off the kernel at each call (as nn.Module.__call__ reads it),
      one call in host_time_every timed with two perf_counter reads onto the lock-free queue
      (none with capture_safe).

    A sampled tick or an input outside the envelope goes to Guard._routed with its tick. The
    function is generated (its source is its docstring): the envelope's condition is written
    into it rather than called, and everything it reads is a name of its own namespace (no
    value is written into the source). It holds no reference to the guard (passed in): no cycle
    keeps a dropped guard's kernel alive. Built by _refresh whenever what it holds changes."""
    envelope = guard._envelope
    ns: dict[str, Any] = {
        "kernel": guard._modules["optimized"],
        # The kernel's hook dicts are read at each call (torch may rebind them); the guard's own
        # are bound here: rebinding one (__setattr__) rebuilds this function.
        "kd": guard._modules["optimized"].__dict__,
        "gf": guard._forward_hooks,
        "gfp": guard._forward_pre_hooks,
        "gb": guard._backward_hooks,
        "gbp": guard._backward_pre_hooks,
        "g1": _GLOBAL_HOOKS[0],
        "g2": _GLOBAL_HOOKS[1],
        "g3": _GLOBAL_HOOKS[2],
        "g4": _GLOBAL_HOOKS[3],
        "jit_trace": _jit_trace,
        "shadow_at": guard._shadow_at,
        "tick_of": guard._ticks.__next__,
        "clock": time.perf_counter,
        "queue": guard._pending.append,
    }
    lines = [
        "def fast(g, args):",
        "    if (g1 or g2 or g3 or g4 or gf or gfp or gb or gbp",
        '            or kd["_forward_hooks"] or kd["_forward_pre_hooks"]',
        '            or kd["_backward_hooks"] or kd["_backward_pre_hooks"]',
        '            or ("_compiled_call_impl" in kd and kd["_compiled_call_impl"] is not None)',
        "            or jit_trace._trace_module_map is not None):",
        "        return g._call(args, {})",
        "    tick = tick_of()",
        "    if tick >= shadow_at[0]:",
        "        return g._routed(tick, args, {})",
    ]
    if envelope is not None:  # its check inline, not a call (envelope.condition)
        expr, env_ns = envelope.condition
        ns.update(env_ns)
        lines += [
            "    try:",
            f"        inside = {expr}",
            "    except Exception:",
            "        inside = False",
            "    if not inside:",
            "        return g._routed(tick, args, {})",
        ]
    if not guard.capture_safe:
        lines += [
            f"    if tick & {guard.host_time_every - 1}:  # not one of the timed calls",
            "        try:",
            "            return kernel.forward(*args)",
            "        except Exception as e:",
            "            return g._kernel_raised(e, args, {})",
            "    t0 = clock()",
            "    try:",
            "        out = kernel.forward(*args)",
            "    except Exception as e:",
            "        return g._kernel_raised(e, args, {})",
            "    queue(clock() - t0)",
            f"    if not tick & {FOLD_EVERY - 1}:",
            "        g._fold_now()",
            "    return out",
        ]
    else:
        lines += [
            "    try:",
            "        return kernel.forward(*args)",
            "    except Exception as e:",
            "        return g._kernel_raised(e, args, {})",
        ]
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<kernelwright guard {guard.name}>", "exec"), ns)  # names only
    fast = ns["fast"]
    fast.__doc__ = source
    return fast


# nn.Module's hooks on every module: dicts that torch mutates and never rebinds.
_GLOBAL_HOOKS = (
    _nn_module._global_forward_hooks,
    _nn_module._global_forward_pre_hooks,
    _nn_module._global_backward_hooks,
    _nn_module._global_backward_pre_hooks,
)
_tracing_state = torch._C._get_tracing_state
_jit_trace = importlib.import_module("torch.jit._trace")  # its _trace_module_map, read per call


def hooked_globally() -> bool:
    """A hook on every module, or a TorchScript trace in progress: calls must go through
    nn.Module.__call__ (what nn.Module._call_impl looks at before it calls forward)."""
    g1, g2, g3, g4 = _GLOBAL_HOOKS
    return bool(g1 or g2 or g3 or g4 or _tracing_state())


def hooked(module: nn.Module) -> bool:
    """A hook on `module` itself, or a torch.compile'd call (module.compile()): calling it must
    go through nn.Module.__call__."""
    return bool(
        module._forward_hooks
        or module._forward_pre_hooks
        or module._backward_hooks
        or module._backward_pre_hooks
        or module._compiled_call_impl is not None
    )
