"""Export: a run's winning ModelNew, with its tuned launch constants, as one standalone module
that imports nothing but torch, triton and the standard library; with --guard, wrapped in the
runtime guard (kernelwright.runtime) with the task's reference Model and the verified envelope."""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import KernelwrightError
from ..run.rundir import RunDir, best_files, read_run, without_best_header
from ..sandbox.contract import ALLOWED_ROOTS
from ..sandbox.static.pyparse import parse
from .common import EXIT_NEGATIVE, EXIT_OK, NoSuchRun, UserError, find_run_dir

# What an exported module may import: the candidate contract's allowlist (sandbox/contract.py;
# the static check enforces it on every candidate; checked again here so an export can never
# need kernelwright).
STANDALONE_IMPORTS = ALLOWED_ROOTS


class ExportError(KernelwrightError):
    """A run that cannot be exported (no such run, a winner that is not standalone): one line."""

    fault = "configuration"


class NoWinner(ExportError):
    """The run ended without a verified kernel: nothing to export (a verdict, not a misuse)."""

    fault = "candidate"


@dataclass(frozen=True)
class Exported:
    path: Path
    run_id: str
    key: str  # round_NN/cand_K of the winner
    tuned: dict[str, int]


def foreign_imports(source: str) -> list[str]:
    """Top-level modules the source imports beyond STANDALONE_IMPORTS."""
    found = set()
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add("." if node.level else (node.module or "").split(".")[0])
    return sorted(found - STANDALONE_IMPORTS)


# Appended to every export. The kernels compute the forward pass only; without this, backward()
# on an output fails with "element 0 of tensors does not require grad", which names no culprit,
# or (output mixed into a larger loss) the inputs silently get no gradient. With it, an output
# of a call that could need a gradient (grad mode on, an input or parameter requiring one) is
# tied to those tensors through a Function whose backward raises an error that says what to do.
FORWARD_ONLY_GUARD = """

# -- kernelwright: forward only --------------------------------------------------------------------
import os as _kw_os

import torch as _kw_torch

# Triton reads TRITON_INTERPRET when the kernels above are defined: set it before the import.
_KW_INTERPRETED = _kw_os.environ.get("TRITON_INTERPRET") == "1"
_KW_NO_GPU = (
    "kernelwright: this ModelNew's Triton kernels run on a CUDA GPU and torch sees none here; "
    "on CPU, set TRITON_INTERPRET=1 before importing this module (the Triton interpreter: "
    "slow, for checking only)"
)

_KW_FORWARD_ONLY = (
    "kernelwright: this ModelNew is forward-only (exported from run {run_id}): its Triton kernels "
    "define no backward, so no gradient can flow through it. Train with the task's reference "
    "Model (its autograd path) and load its state_dict into ModelNew for inference, or call "
    "ModelNew under torch.no_grad() / torch.inference_mode()."
)


class _KwForwardOnly(_kw_torch.autograd.Function):
    @staticmethod
    def forward(ctx, run, *watched):
        return run()

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(_KW_FORWARD_ONLY)


_KwModelNew = ModelNew


class ModelNew(_KwModelNew):  # noqa: F811 (the kernel's ModelNew, guarded)
    __doc__ = _KwModelNew.__doc__

    def forward(self, *args, **kwargs):
        if not _KW_INTERPRETED and not _kw_torch.cuda.is_available():
            raise RuntimeError(_KW_NO_GPU)  # Triton's own error would not say why
        tensors = (*args, *kwargs.values(), *self.parameters())
        watched = [t for t in tensors if isinstance(t, _kw_torch.Tensor) and t.requires_grad]
        run = super().forward
        if not (watched and _kw_torch.is_grad_enabled()):
            return run(*args, **kwargs)
        return _KwForwardOnly.apply(lambda: run(*args, **kwargs), *watched)
"""


RUNS_ON = (
    "a CUDA GPU; on CPU only with TRITON_INTERPRET=1 set before it is imported (the Triton "
    "interpreter: slow, for checking)"
)


def header(run: dict, key: str, tuned: dict[str, int], summary: str, guarded: bool = False) -> str:
    env = run.get("environment") or {}
    where = env.get("gpu") or "CPU (Triton interpreter: correctness only)"
    constants = ", ".join(f"{k}={v}" for k, v in sorted(tuned.items())) or (
        "none swept (the file's own values)"
    )
    lines = [
        f"Exported by kernelwright from run {run['run_id']} ({key}) for task "
        f"{run.get('task_name', '?')} ({run.get('config', {}).get('dtype', 'fp32')}).",
        f"Verified: {summary}.",
        f"Measured on {where}, torch {env.get('torch', '?')}, triton {env.get('triton', '?')}.",
        f"Runs on: {RUNS_ON}.",
        f"Tuned launch constants: {constants}.",
        (
            "Guarded: needs torch, triton and kernelwright (kernelwright.runtime, the guard at the"
            " end). Use it as the task's Model:"
            if guarded
            else "Standalone: needs only torch and triton. Use it as the task's Model:"
        ),
        "ModelNew(*get_init_inputs())(*get_inputs()).",
        "Forward only: its kernels define no backward; backward() through an output raises an",
        "error saying so (the guard at the end). Train with the task's reference Model and load",
        "its state_dict into ModelNew for inference"
        + (" with ModelNew.load_weights(state_dict)." if guarded else "."),
    ]
    return "".join(f"# {line}\n" for line in lines) + "\n"


def export_run(run_dir: Path, to: str | os.PathLike[str], guard: bool = False) -> Exported:
    """Write the run's winner to `to` (behind the runtime guard with `guard`); ExportError when
    it has none."""
    run = read_run(run_dir)
    winner = best_files(run_dir) if run.get("best") else None
    if winner is None or not winner.result.ok:
        raise NoWinner(
            f"run {run.get('run_id', run_dir.name)} has no verified winner "
            "(the reference stays): nothing to export"
        )
    extra = foreign_imports(winner.source)
    if extra:
        raise ExportError(
            f"the winner of run {run['run_id']} imports {', '.join(extra)}: not standalone"
        )
    tuned = dict((run.get("best") or {}).get("tuned") or {})
    source = without_best_header(winner.source).rstrip() + "\n"
    tail = runtime_guard(run_dir, run, winner.result) if guard else None
    return _write_module(run, winner.key, tuned, winner.result.summary(), source, to, tail)


def export_current(
    store,
    task: str,
    to: str | os.PathLike[str],
    out: str = "runs",
    guard: bool = False,
    **selectors,
) -> Exported:
    """Write TASK's current version in the store (commands.versions.one_key picks it: --env,
    --variant) to `to`, with its latest verdict; UserError when the store has none. With
    `guard`, the version's run directory (under `out`) gives the guard its reference and
    envelope."""
    from .versions import one_key, where

    key, versions = one_key(
        store, task, selectors.get("env"), selectors.get("variant"), str(store.path)
    )
    best = store.best_kernel(*key)
    current = next((v for v in versions if v.current), None)
    if best is None or current is None:
        raise ExportError(f"{task} has no current kernel version in {store.path}")
    extra = foreign_imports(best.source)
    if extra:
        raise ExportError(f"{task} v{current.version} imports {', '.join(extra)}: not standalone")
    env = best.result.environment
    run = {
        "run_id": current.run_id or "-",
        "task_name": current.task_name,
        "config": {"dtype": best.result.dtype},
        "environment": {"gpu": env.gpu, "torch": env.torch, "triton": env.triton},
    }
    key_text = f"v{current.version}, the current version for {where(key)}"
    source = without_best_header(best.source).rstrip() + "\n"
    tail = None
    if guard:
        try:
            run_dir = find_run_dir(current.run_id or "-", out)
        except NoSuchRun:
            raise ExportError(
                f"--guard needs the run directory of v{current.version} (run "
                f"{current.run_id or 'unknown'}) under {out}: the task's Model and the verified "
                "shapes come from it"
            ) from None
        tail = runtime_guard(run_dir, read_run(run_dir), best.result)
    done = _write_module(run, key_text, {}, best.result.summary(), source, to, tail)
    return Exported(done.path, done.run_id, key_text, {})


def _write_module(
    run: dict, key: str, tuned: dict[str, int], summary: str, source: str, to, guard_tail=None
) -> Exported:
    """The module file: header, the kernel, the forward-only guard, and the runtime guard's
    block (`guard_tail`) when exporting behind it."""
    forward_only = FORWARD_ONLY_GUARD.replace("{run_id}", str(run["run_id"]))
    text = header(run, key, tuned, summary, guard_tail is not None) + source + forward_only
    text += guard_tail or ""
    path = Path(to)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return Exported(path, run["run_id"], key, tuned)


# Appended with --guard: ModelNew becomes a runtime Guard (kernelwright.runtime) around the
# kernel, with the task's Model as the reference (its source below, executed in a module of its
# own so that its names cannot clash with the kernel's) and the envelope the evaluator verified.
RUNTIME_GUARD = """

# -- kernelwright: runtime guard ------------------------------------------------------------------
import types as _kw_types

from kernelwright.runtime import Envelope as _KwEnvelope
from kernelwright.runtime import Guard as _KwGuard

# The inputs the kernel was verified on (run {run_id}: {shapes}); a call outside runs the
# reference. A dimension the evaluator checked at several sizes is None (any); widen by editing.
KERNELWRIGHT_ENVELOPE = _KwEnvelope.from_dict({envelope})
# The guard's settings (see kernelwright.runtime.Guard): edit to taste.
KERNELWRIGHT_GUARD = {options}
_KW_REFERENCE_SOURCE = {reference}


def _kw_reference():
    module = _kw_types.ModuleType("kernelwright_reference_{task}")
    exec(compile(_KW_REFERENCE_SOURCE, "<kernelwright reference: {task}>", "exec"), module.__dict__)
    return module


_KW_REFERENCE = _kw_reference()
_KwKernel = ModelNew


class ModelNew(_KwGuard):  # noqa: F811 (the kernel behind the runtime guard)
    \"\"\"The kernel, shadow-checked against the task's Model; load a trained Model's weights
    with load_weights(model.state_dict()).\"\"\"

    def __init__(self, *args, **kwargs):
        kernel = _KwKernel(*args, **kwargs)
        reference = _KW_REFERENCE.Model(*args, **kwargs)
        super().__init__(reference, kernel, envelope=KERNELWRIGHT_ENVELOPE, **KERNELWRIGHT_GUARD)
        self.sync_reference()  # the same weights in both until load_weights
"""


def runtime_guard(run_dir: Path, run: dict, result) -> str:
    """The RUNTIME_GUARD block for this run: the task's source as the reference, the envelope of
    the shapes the winner was verified at (its result's), the run's dtype and device."""
    from ..runtime.verified import task_envelope

    task_py = RunDir(run_dir).task_py
    if not task_py.is_file():
        raise ExportError(f"run {run['run_id']}: no {task_py.name} in its directory to guard with")
    shapes = list(result.correctness.shapes) if result.correctness else []
    dtype = (run.get("config") or {}).get("dtype", "fp32")
    device = "cuda" if (run.get("environment") or {}).get("gpu") else "cpu"
    envelope = task_envelope(task_py, shapes, dtype, device)
    options = {"name": run.get("task_name", "kernel"), "version": str(run["run_id"])}
    options |= {"dtype": dtype, "shadow_rate": 0.01, "on_mismatch": "fallback"}
    fields = {
        "run_id": str(run["run_id"]),
        "shapes": "; ".join(", ".join(f"{k}={v}" for k, v in s.items()) for s in shapes)
        or "the task's own sizes",
        "envelope": repr(envelope.to_dict()),
        "options": repr(options),
        "reference": repr(task_py.read_text()),
        "task": "".join(c if c.isalnum() else "_" for c in str(run.get("task_name", "task"))),
    }
    # One pass: what is put in (the task's source) is never searched for placeholders itself.
    return re.sub(r"\{(\w+)\}", lambda m: fields.get(m[1], m[0]), RUNTIME_GUARD)


# -- the command ----------------------------------------------------------------------------------
def _export(args: argparse.Namespace) -> Exported:
    """RUN's winner; or, when no run has that name, the current version of the store's task."""
    try:
        run_dir = find_run_dir(args.run, args.out)
    except NoSuchRun as no_run:
        store = _store_with_versions(args)
        if store is None:
            raise
        try:
            return export_current(
                store,
                args.run,
                args.to,
                out=args.out,
                guard=getattr(args, "guard", False),
                env=args.env,
                variant=args.variant,
            )
        except UserError as e:
            raise ExportError(f"{no_run}; and {e}") from None
    return export_run(run_dir, args.to, getattr(args, "guard", False))


def _store_with_versions(args: argparse.Namespace):
    """The results store (--db, else the runs directory's) when it holds kernel versions."""
    from .common import open_store
    from .versions import store_path

    db = store_path(args)
    store = open_store(db) if Path(db).is_file() else None
    return store if store is not None and store.kernel_versions() else None


def cmd_export(args: argparse.Namespace) -> int:
    try:
        done = _export(args)
    except NoWinner as e:
        print(f"kernelwright: {e}", file=sys.stderr)
        return EXIT_NEGATIVE
    except ExportError as e:
        raise UserError(str(e)) from None
    tuned = ", ".join(f"{k}={v}" for k, v in sorted(done.tuned.items())) or "as written"
    guarded = " behind the runtime guard" if getattr(args, "guard", False) else ""
    print(
        f"wrote {done.path}: ModelNew of run {done.run_id} ({done.key}){guarded}, constants {tuned}"
    )
    print(f"runs on: {RUNS_ON}")
    return EXIT_OK
