"""The candidate process: import one candidate, run forward on what the judge sends, return bytes.

A fresh process per candidate, forked from the zygote (zygote.py) inside the operating-system
sandbox. It holds nothing that judges the candidate: no reference outputs, no pristine copies,
no tolerances, no roofline, no result channel, no secret. (Before the candidate's code is
imported, the judge may have it run the task's own Model through timed rounds, to measure what
the wall costs a round (op_build with "reference", timed.py); that model is gone before the
import.) It receives the candidate's
parameters (the reference's re-drawn values), inputs (shared memory), seeds for the timed calls,
and answers each request on its socket with a description of what happened and the outputs'
bytes. Everything it reports is a claim: the judge (worker.py) checks values itself, keeps its
own pristine inputs, and holds its own clock against the times claimed here.

The contract checks that need the candidate's objects (a kernel launched, outputs that alias an
input or an earlier output, a tensor subclass, the sandbox guard and the integrity snapshot) run
here, in trusted code of an untrusted process: they give the coder exact messages, and a
candidate that subverts its own process can defeat them, which is why none of them is what makes
a speedup real.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import socket
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any

import torch

from ..crossing import transport, view
from ..crossing.outputs import flatten_outputs, storages_overlap
from ..static import pyparse, sourcetext
from ..task import Task, load_parameters, seeded, task_namespace
from . import integrity, launches, tritoncompat
from .guard import Guard
from .refusals import Refusal, check_signature, classify


def _globals_read(fn: Any) -> set[str]:
    """The global names a function of the task reads itself (its comprehensions included)."""
    import dis

    code = getattr(fn, "__code__", None)
    names: set[str] = set()
    todo = [code] if code is not None else []
    while todo:
        c = todo.pop()
        for ins in dis.get_instructions(c):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(ins.argval, str):
                names.add(ins.argval)
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return names


def _same_size(value: Any, size: Any) -> bool:
    """`value` is the size `size` (an int, or a tuple or list of them), compared by type and
    value: no method of the candidate's objects runs."""
    if type(size) is int:
        return type(value) is int and value == size
    if type(size) in (tuple, list):
        return (
            type(value) in (tuple, list)
            and len(value) == len(size)
            and all(_same_size(a, b) for a, b in zip(value, size))
        )
    return False


class CandidateServer:
    """Answers the judge's requests for one candidate until the judge says bye or kills it."""

    def __init__(
        self,
        sock: socket.socket,
        device: str,
        home: Path,
        dtype: torch.dtype,
        precision: str,
        arena: Any = None,
    ):
        self.sock = sock
        self.home = home
        self.cuda = device != "cpu"
        self.device = torch.device("cuda", 0) if self.cuda else torch.device("cpu")
        self.dtype = dtype
        self.module: types.ModuleType | None = None
        self.module_name = "kw_candidate"
        self.path = home / "candidate.py"
        self.task: Task | None = None
        self.size_names: list[str] | None = None  # the candidate's copies of the task's sizes
        self.shapes: dict[str, dict[str, Any]] = {}  # "main"/"variant" -> model, ns, out_meta
        # On a GPU every device tensor of this process lies in the judge's arena (arena.py).
        self.arena = arena
        self.regions: dict[str, dict[str, Any]] = {}  # shape -> the judge's region, its views
        self.held: list[Any] = []  # outputs the judge asked this process to keep (a caller would)
        self.round_outputs: list[Any] = []
        self.copies: list[torch.Tensor] = []  # outputs copied into the arena, kept with them
        set_precision(precision)
        self.guard = install_guard(home)
        self.base_threads = integrity.python_threads()
        self.snapshot = integrity.integrity_snapshot()

    # -- the loop ------------------------------------------------------------------------------

    def serve(self) -> None:
        while True:
            try:
                got = transport.receive(self.sock, None)
            except transport.PeerGone:
                return
            if got is None:
                continue
            op = got.message.get("op")
            if op == "bye":
                return
            buffers: list[transport.SharedBuffer] = []
            try:
                reply = getattr(self, f"op_{op}")(got.message, got.fds, buffers)
            except Refusal as r:
                reply = {"error": {"status": r.status, "rule": r.rule, "message": r.message}}
            except BaseException as e:  # a bug of ours: the judge calls it an evaluator error
                reply = {"internal": "".join(traceback.format_exception(e))[-3000:]}
            finally:
                got.close()
            transport.send(self.sock, reply, [b.fd for b in buffers])
            for b in buffers:
                b.close()

    # -- requests ------------------------------------------------------------------------------

    def op_build(self, m: dict[str, Any], fds: list[int], buffers: list) -> dict[str, Any]:
        """Import the candidate (once), build ModelNew at one shape, load the judge's parameters.

        With "reference" (the judge's calibration, before the import): the task's own Model
        instead, built and loaded the same way; op_forget drops it before any candidate code."""
        if self.task is None:
            self.task = Task(**m["task"])
        ns = task_namespace(self.task, m["overrides"])
        if m.get("reference"):
            if self.module is not None:
                raise RuntimeError("the reference is built only before the candidate's import")
            model = self.construct(ns["Model"], ns, m, fds, "constructing the reference Model")
            self.shapes[m["shape"]] = {"model": model, "ns": ns, "out_meta": m["out_meta"]}
            return {"ok": True}
        if self.module is None:
            self.forget()
            self.load_module()
        cls = getattr(self.module, "ModelNew", None)
        if not isinstance(cls, type) or not issubclass(cls, torch.nn.Module):
            raise Refusal(
                "rejected", "the candidate defines no `class ModelNew(nn.Module)`", "model-new"
            )
        check_signature(cls, ns["Model"])
        own = self.bind_sizes(ns)
        try:
            model = self.construct(cls, ns, m, fds, "constructing ModelNew")
        finally:
            self.module.__dict__.update(own)
        self.shapes[m["shape"]] = {"model": model, "ns": ns, "out_meta": m["out_meta"]}
        return {"ok": True, "state": self.state()}

    def bind_sizes(self, ns: dict[str, Any]) -> dict[str, Any]:
        """While ModelNew is built at a shape, the candidate module's copies of the size
        constants that the task's Model.__init__ reads hold that shape's values, as the task's
        namespace does for Model: a constructor that sizes state by a module-level constant
        (KernelBench's VanillaRNN, `torch.randn((batch_size, hidden_size))`) builds what Model
        builds there. A copy is a module-level name of that constant bound at import to the
        task's own value. Forward calls see the file's values again, and a constant Model's
        constructor does not read is never bound: a kernel that takes its sizes from a constant
        instead of its inputs is still caught by the other shape. Returns what to restore."""
        assert self.module is not None and self.task is not None
        if self.size_names is None:  # once, right after the import
            found = self.module.__dict__
            init = ns["Model"].__init__
            # Only a constructor the task file defines reads its constants (not nn.Module's).
            read = _globals_read(init) if getattr(init, "__globals__", None) is ns else set()
            self.size_names = [
                n
                for n, v in self.task.constants.items()
                if n in read and n in found and _same_size(found[n], v)
            ]
        names = [n for n in self.size_names if n in self.module.__dict__]  # one it deleted: gone
        own = {n: self.module.__dict__[n] for n in names}
        self.module.__dict__.update({n: ns[n] for n in names})
        return own

    def construct(self, cls: type, ns: dict[str, Any], m: dict[str, Any], fds, what: str):
        """cls(*get_init_inputs()) on the device in the task's dtype, holding the judge's
        parameters (sent in m["params"])."""
        with seeded(m["seed"], self.device):
            init_inputs = list(ns["get_init_inputs"]())
        with self.candidate_code(what), torch.device(self.device):
            torch.manual_seed(0)
            model = cls(*init_inputs)
            model = model.to(device=self.device)
            model = model.to(self.dtype)
        if not isinstance(model, torch.nn.Module):
            raise Refusal(
                "rejected", "ModelNew(...).to(...) did not return an nn.Module", "model-new"
            )
        model.train(bool(m["training"]))
        entries = m["params"]
        # One mapping of the packed memfd for all of them (transport.rebuild_packed).
        _, hosts = transport.rebuild_packed([e["tensor"] for e in entries], fds, max_bytes=1 << 40)
        params = [(e["name"], h.to(self.device)) for e, h in zip(entries, hosts, strict=True)]
        del hosts
        unmatched = load_parameters(params, model)
        own = {name for name, _ in model.named_parameters()}
        bad = [n for n in unmatched if n in own]
        if bad:
            names = [n for n, _ in params][:8]
            raise Refusal(
                "rejected",
                f"ModelNew's parameters {bad[:5]} match none of Model's ({names}) by name or by "
                "order and shape. Hold the same parameters as Model (same names, e.g. build the "
                "same nn.Linear/nn.Conv2d submodules) so both get the same values.",
                "parameters",
            )
        return model

    def op_forget(self, m: dict[str, Any], fds: list[int], buffers: list) -> dict[str, Any]:
        """The judge's calibration is over: its reference model and outputs are dropped."""
        self.forget()
        return {"forgotten": True}

    def forget(self) -> None:
        """Nothing of the reference survives into the candidate's code: its models, outputs and
        the cuBLAS workspaces its calls left cached in the arena (whose pages the judge then
        marks untouched again, arena.py)."""
        import gc

        self.shapes.clear()
        self.held, self.round_outputs, self.copies = [], [], []
        gc.collect()
        if self.cuda:
            torch.cuda.synchronize()
            clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
            if clear is not None:
                clear()
            torch.cuda.synchronize()

    def op_regions(self, m: dict[str, Any], fds: list[int], buffers: list) -> dict[str, Any]:
        """Map the judge's region of one shape: its input sets and (on CPU) output slots."""
        from ..crossing.regions import Layout, open_region

        layout = Layout.from_json(m["layout"])
        old = self.regions.pop(m["shape"], None)
        if old is not None:
            old["views"] = None
        region = open_region(fds[0], layout.nbytes, self.cuda)
        views = [
            [s.view(region.flat) if s is not None else None for s in row] for row in layout.inputs
        ]
        self.regions[m["shape"]] = {"region": region, "layout": layout, "views": views}
        return {"ok": True}

    def inputs_of(self, shape: str, k: int, values: list[Any]) -> list[Any]:
        """Set k's inputs: the judge's region views (the same tensor objects every call: a
        result cached by data_ptr or id is stale the next time), non-tensors as sent."""
        views = self.regions[shape]["views"][k]
        return [v if v is not None else values[i] for i, v in enumerate(views)]

    def op_call(self, m: dict[str, Any], fds: list[int], buffers: list) -> dict[str, Any]:
        """One checked forward call on input set k of the judge's region; outputs described."""
        shape = self.shapes[m["shape"]]
        k = int(m.get("set", 0))
        inputs = self.inputs_of(m["shape"], k, m.get("values") or [])
        if not self.arena:
            self.poison(shape["out_meta"])
        launches.reset()
        with self.candidate_code(m["what"]), torch.no_grad():
            out = shape["model"](*inputs)
        if not launches.launches(self.module_name):
            raise Refusal(
                "rejected",
                f"{m['what']}: ModelNew.forward launched no @triton.jit kernel defined in the "
                "candidate file",
                "no-triton-launch",
            )
        facts = self.contract_facts(out, inputs, shape["model"])
        reply: dict[str, Any] = {
            "output": self.describe(out, m["shape"], k, buffers),
            "facts": facts,
            "state": self.state(),
        }
        if m.get("hold"):
            self.held.append(out)
        return reply

    def op_round(self, m: dict[str, Any], fds: list[int], buffers: list) -> dict[str, Any]:
        """A timed round: one call on each of the first n input sets, back to back, then where
        each output lies. The judge's clock runs from before it wrote the inputs until it has
        its own copy of these bytes: nothing here is timed by this process."""
        model = self.shapes["main"]["model"]
        n = int(m["calls"])
        values = m.get("values") or []
        sets = [self.inputs_of("main", k, values) for k in range(n)]
        launches.reset()
        # Inside the judge's clock: no check of this process's own state here (the integrity
        # snapshot alone costs milliseconds); op_describe, after the clock, reports it.
        began = time.perf_counter()
        with self.candidate_code("a timed call", check=False), torch.no_grad():
            self.round_outputs = [model(*args) for args in sets]
            launched = time.perf_counter()
        ended = time.perf_counter()
        if m.get("reference"):  # the judge's calibration (the task's Model): no kernel of ours
            if self.module is not None:
                raise RuntimeError("a reference round after the candidate's import")
        elif not launches.launches(self.module_name):
            raise Refusal(
                "rejected", "a timed call launched no @triton.jit kernel", "no-triton-launch"
            )
        spans = []
        for k, out in enumerate(self.round_outputs):
            spans.append(self.spans(out, k, buffers))
        # This process's own account of the round (a claim: the audit prints it, nothing uses
        # it): launching the calls, then waiting for the device.
        inside = [(launched - began) * 1e3, (ended - launched) * 1e3]
        return {"spans": spans, "inside": inside}

    def op_describe(self, m: dict[str, Any], fds: list[int], buffers: list) -> dict[str, Any]:
        """The last round's outputs, described (after the judge's clock stopped)."""
        outs = self.round_outputs
        return {
            "outputs": [
                self.describe(o, "main", k, buffers, copy=False) for k, o in enumerate(outs)
            ]
        }

    def op_refetch(self, m: dict[str, Any], fds: list[int], buffers: list) -> dict[str, Any]:
        """Every output held since the last release, described again (on CPU copied again into
        the slots of its set): the judge compares them with what it saw when each was returned."""
        described = []
        for k, out in enumerate(self.held):
            described.append(self.describe(out, m["shape"], k, buffers))
        return {"outputs": described}

    def op_release(self, m: dict[str, Any], fds: list[int], buffers: list) -> dict[str, Any]:
        self.held, self.round_outputs, self.copies = [], [], []
        return {"released": True}

    def op_stats(self, m: dict[str, Any], fds: list[int], buffers: list) -> dict[str, Any]:
        stats = launches.kernel_stats(self.module_name)
        # What the interpreter fixes did that the result must say (first autotune config run).
        notes = tritoncompat.notes()[:8]
        return {"kernels": [dataclasses.asdict(s) for s in stats], "notes": notes}

    # -- helpers -------------------------------------------------------------------------------

    def load_module(self) -> None:
        """Import the candidate from the text the judge checked: the file's bytes (the judge
        wrote them) decoded as strict UTF-8 and compiled as a str, so that no coding
        declaration makes Python decode other text (sourcetext.py). linecache holds the same
        lines, for inspect.getsource (Triton reads a kernel's source so) and tracebacks."""
        import importlib.util
        import linecache

        filename = str(self.path)
        with open(filename, "rb") as f:
            data, stat = f.read(), os.fstat(f.fileno())
        try:
            text = sourcetext.decode(data)
        except UnicodeDecodeError as e:
            raise Refusal(
                "rejected", f"the candidate file is not valid UTF-8 ({e})", "encoding"
            ) from None
        lines = io.StringIO(text, newline=None).readlines()  # split as linecache would
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        linecache.cache[filename] = (stat.st_size, stat.st_mtime, lines, filename)
        spec = importlib.util.spec_from_file_location(self.module_name, self.path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]  # a .py path has one
        sys.modules[self.module_name] = module
        self.module = module
        with self.candidate_code("importing the candidate"):
            code = pyparse.compile_source(text, filename, dont_inherit=True)
            exec(code, module.__dict__)

    @contextlib.contextmanager
    def candidate_code(self, what: str, check: bool = True):
        """Run candidate code under the guard, turning its failures into refusals; check=False
        leaves the check of violations to the next reply that carries the state."""
        try:
            with self.guard.active():
                yield
                if self.cuda:
                    torch.cuda.synchronize()  # async faults surface here, inside the guard
        except Refusal:
            raise
        except BaseException as e:  # candidate code may raise anything
            self.raise_violation()  # a sandbox denial explains the error best
            raise classify(e, what, str(self.path), self.cuda) from None
        if check:
            self.raise_violation()

    def state(self) -> list[dict[str, str]]:
        """Violations seen since the last call: the judge rejects on the first."""
        found = []
        for v in self.guard.violations:
            found.append({"rule": v.rule, "message": v.message})
        diff = integrity.integrity_diff(self.snapshot, integrity.integrity_snapshot())
        for rule, what in diff:
            found.append(
                {
                    "rule": rule,
                    "message": f"the candidate changed {what}: patching torch, triton, the timer "
                    "or precision flags is not allowed",
                }
            )
        extra = integrity.python_threads() - self.base_threads
        if extra:
            found.append(
                {
                    "rule": "thread",
                    "message": f"the candidate left {len(extra)} Python thread(s) running: all "
                    "work must happen inside forward, on the calling thread",
                }
            )
        return found[:8]

    def raise_violation(self) -> None:
        found = self.state()
        if found:
            raise Refusal("rejected", found[0]["message"], found[0]["rule"])

    def poison(self, out_meta: list) -> None:
        """Fill the blocks the allocator hands out next with NaN (or -1): an output left unwritten
        (`torch.empty_like(x)` returned as is) must not find a freed block holding the answer."""
        blocks = []
        for shp, dtype_name in out_meta:
            dtype = transport.DTYPES[dtype_name]
            for _ in range(2):
                t = torch.empty(shp, dtype=dtype, device=self.device)
                t.fill_(float("nan") if dtype.is_floating_point else -1)
                blocks.append(t)
        del blocks

    def contract_facts(self, out: Any, inputs: list[Any], model: Any) -> list[dict[str, str]]:
        """Outputs that alias an input, a parameter or an output held from an earlier call (the
        judge's own check of held outputs is the one that decides; this one names it early)."""
        outs = [t for _, t in _tensor_leaves(out)]
        owned = [*model.parameters(), *model.buffers()]
        theirs = [plain(x) for x in [*inputs, *owned] if isinstance(x, torch.Tensor)]
        earlier = [t for o in self.held for _, t in _tensor_leaves(o)]
        for o in outs:
            if any(storages_overlap(o, x) for x in theirs):
                return [
                    {
                        "rule": "alias",
                        "message": "an output shares memory with an input or a parameter: "
                        "return a freshly allocated tensor",
                    }
                ]
            if any(storages_overlap(o, p) for p in earlier):
                return [
                    {
                        "rule": "reuse",
                        "message": "the output reuses the memory of an output returned by an "
                        "earlier call: allocate a new output per call",
                    }
                ]
        return []

    def describe(self, out: Any, shape: str, k: int, buffers: list, copy: bool = True) -> Any:
        """The output's structure as JSON; each plain tensor where the judge reads it: on a GPU
        its place in the arena, on CPU the output slot of set k its values were copied into
        (a leaf unlike the expected one in a memfd of its own)."""
        counter = [0]
        outputs = self.regions[shape]["layout"].outputs if shape in self.regions else []
        slots = outputs[k] if k < len(outputs) else []
        return self._describe(out, shape, k, slots, counter, buffers, copy)

    def _describe(self, out, shape, k, slots, counter, buffers, copy) -> Any:
        if isinstance(out, (tuple, list)):
            items = [self._describe(v, shape, k, slots, counter, buffers, copy) for v in out]
            return {type(out).__name__: items}
        if isinstance(out, dict):
            return {
                "dict": [
                    [repr(key)[:200], self._describe(v, shape, k, slots, counter, buffers, copy)]
                    for key, v in out.items()
                ]
            }
        if type(out) is torch.Tensor and out.layout == torch.strided:
            refuse_shadowed_methods(out)
            j = counter[0]
            counter[0] += 1
            t = plain(out)
            if self.arena is not None:
                return {"arena": self.arena_place(t)}
            if (
                j < len(slots)
                and tuple(t.shape) == slots[j].shape
                and (str(t.dtype).removeprefix("torch.") == slots[j].dtype)
            ):
                if copy:
                    region = self.regions[shape]["region"]
                    slots[j].view(region.flat).copy_(t)
                return {"slot": [k, j]}
            return {"tensor": self.export_tensor(t, buffers, keep_layout=False)}
        if isinstance(out, torch.Tensor):
            counter[0] += 1
            return {
                "opaque": f"{type(out).__module__}.{type(out).__qualname__}"[:200],
                "subclass": type(out) is not torch.Tensor,
                "layout": str(out.layout),
            }
        if out is None or isinstance(out, (bool, int, float, str)):
            return {"value": out if not isinstance(out, str) else out[:200]}
        return {"opaque": f"{type(out).__module__}.{type(out).__qualname__}"[:200]}

    def arena_place(self, t: torch.Tensor) -> dict[str, Any]:
        """Where t's bytes lie in the arena; a tensor elsewhere (host memory, memory taken past
        the allocator) is first copied into a new arena tensor, kept until the next release."""
        base, size = self.arena.ptr, self.arena.size
        device = str(t.device)
        _, count = transport.span(t)
        nbytes = count * t.element_size()
        start = t.data_ptr()
        if not (t.is_cuda and base <= start and start + nbytes <= base + size):
            t = torch.empty(tuple(t.shape), dtype=t.dtype, device=self.device).copy_(t)
            self.copies.append(t)
            start, nbytes = t.data_ptr(), t.numel() * t.element_size()
        return {
            "offset": start - base,
            "nbytes": nbytes,
            "dtype": str(t.dtype).removeprefix("torch."),
            "shape": list(t.shape),
            "stride": list(t.stride()),
            "device": device,
        }

    def spans(self, out: Any, k: int, buffers: list) -> Any:
        """A timed output in as few bytes as the judge's clock needs: on a GPU [offset, nbytes]
        of each leaf in the arena (the rest after the clock, op_describe); on CPU the whole
        description (its values are copied into the slots of set k here)."""
        if self.arena is None:
            return self.describe(out, "main", k, buffers)
        return [[p["offset"], p["nbytes"]] for p in self._places(out)]

    def _places(self, out: Any) -> list[dict[str, Any]]:
        places = []
        for _, t in flatten_outputs(out):
            if type(t) is torch.Tensor and t.layout == torch.strided:
                places.append(self.arena_place(plain(t)))
        return places

    def export_tensor(self, t: torch.Tensor, buffers: list, *, keep_layout: bool) -> dict:
        t = plain(t)
        buffers.append(transport.export_sealed(t, keep_layout=keep_layout))
        desc = transport.describe(t, len(buffers) - 1, contiguous=not keep_layout)
        return desc


# -- small pure helpers ----------------------------------------------------------------------------


def set_precision(policy: str) -> None:
    """TF32 off under "strict", on under "tf32-ok": the same flags as the judge's reference, so
    torch ops the candidate keeps (a cuDNN conv whose epilogue it fuses) compute as eager's."""
    tf32 = policy == "tf32-ok"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def _tensor_leaves(out: Any) -> list[tuple[str, torch.Tensor]]:
    """The output's tensors, as plain views (see `plain`)."""
    return [(n, plain(v)) for n, v in flatten_outputs(out) if isinstance(v, torch.Tensor)]


def plain(t: torch.Tensor) -> torch.Tensor:
    """`t` as a new tensor object over the same memory, without t's instance attributes.

    The evaluator's code here never calls a method through a candidate's tensor: attributes set
    on the instance (`y.detach = ...`) shadow torch.Tensor's methods, and a candidate could hide
    its work in them, to run when the evaluator reads the output after the timer stopped.
    `torch.Tensor.detach` is looked up on the class, so nothing of the candidate's runs.
    """
    return torch.Tensor.detach(t)


def refuse_shadowed_methods(t: torch.Tensor) -> None:
    """Refuse an output whose instance attributes replace attributes of torch.Tensor."""
    names = sorted(k for k in vars(t) if hasattr(torch.Tensor, k))
    if names:
        raise Refusal(
            "rejected",
            "an output tensor carries instance attributes that replace torch.Tensor's "
            f"{', '.join(names[:5])}: work placed there would run when the evaluator reads the "
            "output, after the timer stopped. Return a plain tensor the kernel has written",
            "output-type",
        )


def install_guard(
    home: Path, private: Path | None = None, also_trusted: list[str] | tuple[str, ...] = ()
) -> Guard:
    """The candidate process's audit-hook guard: candidate code writes only under `home` and
    reads only there and in the installation. A layer of advice inside the candidate's own
    interpreter (its denials name the candidate's line); the walls are the process boundary
    and the operating-system sandbox. private: a directory of evaluator-generated code (as
    torch.compile writes) that counts as trusted; also_trusted: more such directories (tests)."""
    guard = Guard()
    guard.install(
        writable_roots=[str(home)],
        readable_roots=_readable_roots(home),
        trusted_code=[*([str(private)] if private else []), *also_trusted],
    )
    return guard


def _readable_roots(home: Path) -> list[str]:
    roots = {
        str(home),
        *view.interpreter_prefixes(),
        *view.SYSTEM_DIRS,
        "/proc/self",
        f"/proc/{os.getpid()}",
        *view.ETC,
    }
    roots.update(view.import_path())
    roots.add(view.PACKAGE_DIR)  # this package (installed editable)
    return sorted(roots)
