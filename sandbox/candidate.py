"""The candidate process: import one candidate, run forward on what the judge sends, return bytes.

A fresh process per candidate, forked from the zygote (zygote.py) inside the operating-system
sandbox. It holds nothing that judges the candidate: no reference model or outputs, no pristine
copies, no tolerances, no roofline, no result channel, no secret. It receives the candidate's
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

import collections
import contextlib
import dataclasses
import inspect
import io
import os
import socket
import sys
import traceback
import types
from pathlib import Path
from typing import Any

import torch

from . import integrity, launches, sourcetext, transport, tritoncompat
from .compare import flatten_outputs, storages_overlap
from .guard import Guard
from .task import Task, build_inputs, load_parameters, seeded, task_namespace

# Earlier outputs kept to catch one reused or written again by a later call.
_KEEP_OUTPUTS = 2
# Salt modulus of the digest (a prime below 2^31: weights times int32 values stay within int64).
_DIGEST_PRIME = 2_147_483_629
_DIGEST_CHUNK = 1 << 22


class Refusal(Exception):
    """A failure of the candidate: becomes {"error": ...} in the reply."""

    def __init__(self, status: str, message: str, rule: str | None = None):
        super().__init__(message)
        self.status, self.message, self.rule = status, message, rule


class CandidateServer:
    """Answers the judge's requests for one candidate until the judge says bye or kills it."""

    def __init__(
        self, sock: socket.socket, device: str, home: Path, dtype: torch.dtype, precision: str
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
        self.shapes: dict[str, dict[str, Any]] = {}  # "main"/"variant" -> model, ns, out_meta
        self.previous: collections.deque = collections.deque(maxlen=_KEEP_OUTPUTS)
        self.last_inputs: list[Any] = []
        self.block: list[Any] = []
        self.block_outputs: list[Any] = []
        self.graph_runner: Any = None  # a timing._GraphRunner once CUDA graphs time a round
        self.graph_inputs: list[Any] = []
        self.flush: torch.Tensor | None = None
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
        """Import the candidate (once), build ModelNew at one shape, load the judge's parameters."""
        if self.task is None:
            self.task = Task(**m["task"])
        ns = task_namespace(self.task, m["overrides"])
        if self.module is None:
            self.load_module()
        cls = getattr(self.module, "ModelNew", None)
        if not isinstance(cls, type) or not issubclass(cls, torch.nn.Module):
            raise Refusal(
                "rejected", "the candidate defines no `class ModelNew(nn.Module)`", "model-new"
            )
        check_signature(cls, ns["Model"])
        with seeded(m["seed"], self.device):
            init_inputs = list(ns["get_init_inputs"]())
        with self.candidate_code("constructing ModelNew"), torch.device(self.device):
            torch.manual_seed(0)
            model = cls(*init_inputs)
            model = model.to(device=self.device)
            model = model.to(self.dtype)
        if not isinstance(model, torch.nn.Module):
            raise Refusal(
                "rejected", "ModelNew(...).to(...) did not return an nn.Module", "model-new"
            )
        model.train(bool(m["training"]))
        params = []
        for entry in m["params"]:
            _, host = transport.rebuild(entry["tensor"], fds, max_bytes=1 << 40)
            params.append((entry["name"], host.to(self.device)))
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
        self.shapes[m["shape"]] = {"model": model, "ns": ns, "out_meta": m["out_meta"]}
        return {"ok": True, "state": self.state()}

    def op_call(self, m: dict[str, Any], fds: list[int], buffers: list) -> dict[str, Any]:
        """One checked forward call on the judge's inputs; outputs and facts back."""
        shape = self.shapes[m["shape"]]
        host_inputs, keep = [], []
        for desc in m["inputs"]:
            if "tensor" in desc:
                # Shared: forward may write its inputs in place, and on the host the judge
                # reads what it left through its own view of the buffer.
                buffer, host = transport.rebuild(
                    desc["tensor"], fds, max_bytes=1 << 40, shared=True
                )
                keep.append(buffer)
                host_inputs.append(host)
            else:
                host_inputs.append(desc["value"])
        inputs = [_to_device(x, self.device) for x in host_inputs]
        refill = bool(m.get("same_tensors")) and len(self.last_inputs) == len(inputs)
        if refill:  # the previous call's tensors (same data_ptr, same id), new values
            for old, new in zip(self.last_inputs, inputs):
                if isinstance(old, torch.Tensor):
                    old.copy_(new)
            inputs = self.last_inputs
        self.last_inputs = inputs
        self.poison(shape["out_meta"])
        launches.reset()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        with self.candidate_code(m["what"]), torch.no_grad():
            out = shape["model"](*inputs)
        peak = None
        if self.cuda:
            held = sum(_nbytes(o) for o, _ in self.previous)
            peak = max(0, torch.cuda.max_memory_allocated() - held)
        if not launches.launches(self.module_name):
            raise Refusal(
                "rejected",
                f"{m['what']}: ModelNew.forward launched no @triton.jit kernel defined in the "
                "candidate file",
                "no-triton-launch",
            )
        facts = self.contract_facts(out, inputs, shape["model"])
        reply: dict[str, Any] = {"output": self.export_output(out, buffers), "facts": facts}
        if self.cuda or refill:  # not the judge's shared buffers: hand back what forward left
            reply["inputs_after"] = [
                self.export_tensor(x, buffers, keep_layout=True)
                if isinstance(x, torch.Tensor)
                else None
                for x in inputs
            ]
        reply.update(peak_bytes=peak, state=self.state())
        return reply

    def op_time(self, m: dict[str, Any], fds: list[int], buffers: list) -> dict[str, Any]:
        """One timed call on inputs drawn here from the judge's seed (a draw of get_inputs)."""
        from . import timing

        shape = self.shapes["main"]
        model = shape["model"]
        inputs = build_inputs(shape["ns"], self.dtype, self.device, m["seed"])
        with self.candidate_code("a timed call"), torch.no_grad():
            if m.get("host_clock"):
                ms, out = timing.time_on_host(lambda: model(*inputs))
            elif m.get("cuda_graphs"):
                self.graph_inputs = inputs  # this round's draw, copied into the captured ones
                if self.graph_runner is None:
                    self.graph_runner = timing._GraphRunner(lambda i: self.graph_inputs, model)
                ms, out, _ = self.graph_runner.timed(m["round"], self.flush_buffer(m), m["spin"])
                out = _clone_output(out)
            else:
                ms, out = timing.time_one(lambda: model(*inputs), self.flush_buffer(m), m["spin"])
        return {"ms": ms, "output": self.export_output(out, buffers), "state": self.state()}

    def op_block_prepare(self, m: dict[str, Any], fds: list[int], buffers: list) -> dict:
        """Draw the block's inputs (outside the judge's clock)."""
        shape = self.shapes["main"]
        self.block = [build_inputs(shape["ns"], self.dtype, self.device, s) for s in m["seeds"]]
        self.block_outputs = []
        if self.cuda:
            torch.cuda.synchronize()
        return {"ready": len(self.block)}

    def op_block_run(self, m: dict[str, Any], fds: list[int], buffers: list) -> dict[str, Any]:
        """N calls back to back, then digests of every output (salted by the judge): the judge's
        clock runs from its request to this reply, so the work cannot be left for later."""
        model = self.shapes["main"]["model"]
        with self.candidate_code("a call of the clock check"), torch.no_grad():
            self.block_outputs = [model(*args) for args in self.block]
            if self.cuda:
                torch.cuda.synchronize()
            for out in self.block_outputs:
                for _, t in flatten_outputs(out):
                    if type(t) is torch.Tensor:
                        refuse_shadowed_methods(t)
            digests = [
                [digest(t, m["salt"]) for _, t in _tensor_leaves(out)] for out in self.block_outputs
            ]
        return {"digests": digests, "state": self.state()}

    def op_block_fetch(self, m: dict[str, Any], fds: list[int], buffers: list) -> dict[str, Any]:
        out = self.block_outputs[m["index"]]
        reply = {"output": self.export_output(out, buffers)}
        self.block, self.block_outputs = [], []
        return reply

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
            code = compile(text, filename, "exec", dont_inherit=True)
            exec(code, module.__dict__)

    @contextlib.contextmanager
    def candidate_code(self, what: str):
        """Run candidate code under the guard, turning its failures into refusals."""
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
        """Outputs that alias an input, a parameter or an earlier output, or an earlier output
        written after it was returned."""
        facts = []
        outs = [t for _, t in _tensor_leaves(out)]
        owned = [*model.parameters(), *model.buffers()]
        theirs = [plain(x) for x in [*inputs, *owned] if isinstance(x, torch.Tensor)]
        for o in outs:
            if any(storages_overlap(o, x) for x in theirs):
                facts.append(
                    {
                        "rule": "alias",
                        "message": "an output shares memory with an input or a parameter: "
                        "return a freshly allocated tensor",
                    }
                )
                break
            if any(storages_overlap(o, p) for p, _ in self.previous):
                facts.append(
                    {
                        "rule": "reuse",
                        "message": "the output reuses the memory of an output returned by an "
                        "earlier call: allocate a new output per call",
                    }
                )
                break
        for prev, fingerprint in self.previous:
            if _fingerprint(prev) != fingerprint:
                facts.append(
                    {
                        "rule": "reuse",
                        "message": "an output returned by an earlier call changed afterwards: "
                        "the candidate writes into memory it already returned",
                    }
                )
                break
        for o in outs:
            self.previous.append((o, _fingerprint(o)))
        return facts

    def export_output(self, out: Any, buffers: list) -> Any:
        """The output's structure as JSON; each plain tensor's values in a memfd of its own."""
        if isinstance(out, (tuple, list)):
            return {type(out).__name__: [self.export_output(v, buffers) for v in out]}
        if isinstance(out, dict):
            return {
                "dict": [[repr(k)[:200], self.export_output(v, buffers)] for k, v in out.items()]
            }
        if type(out) is torch.Tensor and out.layout == torch.strided:
            refuse_shadowed_methods(out)
            return {"tensor": self.export_tensor(out, buffers, keep_layout=False)}
        if isinstance(out, torch.Tensor):
            return {
                "opaque": f"{type(out).__module__}.{type(out).__qualname__}"[:200],
                "subclass": type(out) is not torch.Tensor,
                "layout": str(out.layout),
            }
        if out is None or isinstance(out, (bool, int, float, str)):
            return {"value": out if not isinstance(out, str) else out[:200]}
        return {"opaque": f"{type(out).__module__}.{type(out).__qualname__}"[:200]}

    def export_tensor(self, t: torch.Tensor, buffers: list, *, keep_layout: bool) -> dict:
        t = plain(t)
        buffers.append(transport.export_sealed(t, keep_layout=keep_layout))
        desc = transport.describe(t, len(buffers) - 1, contiguous=not keep_layout)
        return desc

    def flush_buffer(self, m: dict[str, Any]):
        from . import timing

        if not m.get("flush"):
            return None
        if self.flush is None:
            self.flush = timing.flush_buffer()
        return self.flush


# -- small pure helpers ----------------------------------------------------------------------------


def set_precision(policy: str) -> None:
    """TF32 off under "strict", on under "tf32-ok": the same flags as the judge's reference, so
    torch ops the candidate keeps (a cuDNN conv whose epilogue it fuses) compute as eager's."""
    tf32 = policy == "tf32-ok"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def digest(t: torch.Tensor, salt: int) -> int:
    """A salted, position-weighted checksum of t's values in row-major order (bits, not values:
    NaN payloads and -0.0 count). The judge computes the same on the output it fetches; a
    candidate cannot produce it without the output itself, and cannot know the salt in advance."""
    flat = plain(t).contiguous().reshape(-1)
    raw = flat.view(torch.uint8) if flat.numel() else flat.to(torch.uint8)
    if raw.numel() % 4 == 0 and raw.numel():
        words = raw.view(torch.int32)
    else:
        words = raw.to(torch.int32)
    total = 0
    a = (salt % _DIGEST_PRIME) | 1
    for start in range(0, words.numel(), _DIGEST_CHUNK):
        chunk = words[start : start + _DIGEST_CHUNK].to(torch.int64)
        index = torch.arange(start, start + chunk.numel(), device=chunk.device, dtype=torch.int64)
        weights = (index * a + salt) % _DIGEST_PRIME + 1
        total = (total + int((chunk * weights).sum().item())) % (1 << 61)
    return total


def _fingerprint(t: torch.Tensor) -> tuple[int, ...]:
    """A cheap checksum of an output's bits: enough to tell an output written again."""
    return (digest(t, 12345),) if t.numel() else ()


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


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _clone_output(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return torch.Tensor.clone(out)
    if isinstance(out, (tuple, list)):
        return type(out)(_clone_output(v) for v in out)
    return out


def _to_device(x: Any, device: torch.device) -> Any:
    """A host input on the candidate's device with its layout (strides, expansion) kept."""
    if not isinstance(x, torch.Tensor) or device.type == "cpu":
        return x
    first, count = transport.span(x)
    flat = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), first, (count,), (1,))
    placed = flat.to(device)
    return placed.as_strided(tuple(x.shape), tuple(x.stride()), x.storage_offset() - first)


def check_signature(cls: type, reference: type) -> None:
    ref_params, new_params = _init_params(reference), _init_params(cls)
    if ref_params != new_params:
        raise Refusal(
            "rejected",
            f"ModelNew.__init__({', '.join(new_params)}) must take the same arguments as "
            f"Model.__init__({', '.join(ref_params)})",
            "signature",
        )


def _init_params(cls) -> list[str]:
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return []
    return [
        p.name if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) else f"*{p.name}"
        for p in list(sig.parameters.values())[1:]
    ]


def classify(e: BaseException, what: str, path: str, cuda: bool) -> Refusal:
    """A candidate's exception as a refusal: exit, compile error, out of memory, CUDA fault."""
    text = _candidate_traceback(e, path)
    if isinstance(e, SystemExit):
        return Refusal(
            "runtime_error",
            f"the candidate called exit() while {what}: a result is judged by the evaluator, "
            "never reported by the candidate",
            "exit",
        )
    bounds = _out_of_bounds(e)
    if bounds is not None:  # the interpreter's bound check (tritoncompat), wrapped by Triton
        return Refusal(
            "runtime_error",
            f"a kernel accessed memory outside the tensors it was given while {what}: {bounds}. "
            "Mask every load and store to the tensor's extent.",
            "out-of-bounds",
        )
    if _is_compile_error(e):
        return Refusal("compile_error", f"Triton compilation failed while {what}:\n{text}")
    lower = str(e).lower()
    if isinstance(e, (getattr(torch.cuda, "OutOfMemoryError", MemoryError), MemoryError)) or (
        isinstance(e, RuntimeError) and ("out of memory" in lower or "can't allocate" in lower)
    ):
        return Refusal("runtime_error", f"out of memory while {what}:\n{text}", "memory")
    fault = cuda and any(
        s in lower
        for s in (
            "cuda error",
            "illegal memory access",
            "misaligned address",
            "device-side assert",
            "unspecified launch failure",
        )
    )
    return Refusal(
        "runtime_error",
        f"{type(e).__name__} while {what}:\n{text}",
        "cuda-fault" if fault else None,
    )


def _out_of_bounds(e: BaseException) -> str | None:
    """The message of an interpreter bound-check failure anywhere in e's chain, or None."""
    from .tritoncompat import OutOfBounds

    seen: set[int] = set()
    err: BaseException | None = e
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OutOfBounds):
            return str(err)[:500]
        err = err.__cause__ or err.__context__
    return None


def _candidate_traceback(e: BaseException, path: str) -> str:
    """The exception with the candidate's own frames (file line numbers and source lines)."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == path]
    lines = [f"  candidate.py line {f.lineno}, in {f.name}: {f.line}" for f in frames[-6:]]
    message = "".join(traceback.format_exception_only(type(e), e)).strip()
    if len(message) > 2500:
        message = message[:2000] + "\n...\n" + message[-400:]
    return "\n".join([*lines, message])


def _is_compile_error(e: BaseException) -> bool:
    """Triton rejected the kernel's source (on a GPU at compile time; under the interpreter, a
    language error raised from triton/language, which InterpreterError wraps)."""
    names = {c.__name__ for c in type(e).__mro__}
    if names & {
        "CompilationError",
        "CompileTimeAssertionFailure",
        "OutOfResources",
        "PTXASError",
        "UnsupportedLanguageConstruct",
    }:
        return True
    language = f"{os.sep}triton{os.sep}language{os.sep}"
    for err in (e, e.__cause__):
        if err is None:
            continue
        tb = traceback.extract_tb(err.__traceback__)
        if any(language in f.filename for f in tb[-3:]):
            return True
        if isinstance(err, AttributeError) and "triton.language" in str(err):
            return True  # tl.foo: no such function
    return False


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
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        "/usr",
        "/lib",
        "/lib64",
        "/opt",
        "/proc/self",
        f"/proc/{os.getpid()}",
        "/sys",
        "/dev",
        "/bin",
        "/sbin",
        "/run/nvidia-persistenced",
        # The dynamic loader's and the C compiler's configuration (Triton builds its launcher
        # stubs with cc); not the rest of /etc (shadow, ssh keys).
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d",
        "/etc/alternatives",
        "/etc/localtime",
        "/etc/nsswitch.conf",
        "/etc/passwd",
        "/etc/group",
    }
    roots.update(p for p in sys.path if p and os.path.isdir(p))
    roots.add(str(Path(__file__).resolve().parent.parent))  # this package (installed editable)
    return sorted(roots)
