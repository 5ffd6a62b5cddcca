"""The exploit zoo: every file in tests/adversarial/ must get the verdict (status and rule) below.

Each exploit runs with the static checks on, and, where the runtime layer matters, again with
`unsafe_skip_static_checks=True` to show that the audit hook, the allowlisted environment, the
rlimits, the watchdog and the output checks hold on their own. All cases are submitted to one
module-scoped pool at once, so warm workers share the work; each test waits for its own result.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from kernelwright.sandbox import EvalConfig, EvalPool

HERE = Path(__file__).resolve().parent
ZOO = HERE / "adversarial"
AFFINE = HERE / "tasks" / "zoo_affine.py"
MATMUL = HERE / "tasks" / "zoo_matmul.py"
CHAINED = HERE / "tasks" / "chained_sizes.py"
TUPLE = HERE / "tasks" / "tuple_sizes.py"
CUDA = torch.cuda.is_available()
# On CPU the interpreter bound-checks every load and store (tritoncompat) before the address is
# touched; on a GPU the device reports an illegal address.
WILD_POINTER = ("runtime_error", "cuda-fault") if CUDA else ("runtime_error", "out-of-bounds")

# A provider key in the evaluator's own environment: no candidate may ever see it.
SECRET_NAME, SECRET_VALUE = "OPENAI_API_KEY", "sk-kernelwright-zoo-0123456789abcdef"
ESCAPED_FILE = "kernelwright-zoo-escaped.txt"


@dataclass(frozen=True)
class Case:
    exploit: str  # tests/adversarial/<exploit>.py
    status: str | tuple[str, ...]  # a tuple: any of these statuses
    rule: str | tuple[str | None, ...] | None  # a tuple: any of these rules
    runtime_only: bool = False  # unsafe_skip_static_checks: the runtime layer on its own
    task: Path = AFFINE
    config: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        rules = self.rule if isinstance(self.rule, tuple) else (self.rule,)
        mode = "runtime" if self.runtime_only else "full"
        return f"{self.exploit}-{mode}-{'|'.join(str(r) for r in rules)}"


def runtime(exploit: str, status: str, rule, **kw) -> Case:
    return Case(exploit, status, rule, runtime_only=True, **kw)


CASES = [
    # Caught by the output and input checks (they pass the static rules).
    # On a GPU the caching allocator hands the poisoned (NaN) block back: "nan". On CPU, malloc
    # may hand an aligned chunk of other garbage instead (seen ~1 in 4 full runs): "mismatch".
    # Either way the unwritten output never passes.
    Case("allocator_reuse", "incorrect", "nan" if CUDA else ("nan", "mismatch")),
    Case("input_mutation", "rejected", "input-mutation"),
    # The candidate process maps each call's inputs afresh, and the kernel hands the same
    # addresses out again: the stale cached result is returned for new values (drift), unless
    # the same output buffer is caught first (reuse).
    Case("cached_by_data_ptr", ("rejected", "incorrect"), ("reuse", "drift", "mismatch")),
    Case("cached_by_id", "incorrect", "mismatch"),
    Case("partial_rows", "incorrect", "mismatch"),
    Case("hardcoded_sizes", "incorrect", "variant"),
    Case("hardcoded_chained_size", "incorrect", "variant", task=CHAINED),
    Case("hardcoded_tuple_size", "incorrect", "variant", task=TUPLE),
    Case("stateful_drift", "incorrect", "drift", config={"trials": 1}),
    Case("persistent_buffer_view", "rejected", "reuse"),
    Case("pingpong_buffers", "rejected", "reuse"),
    Case("output_in_buffer", "rejected", "alias"),
    Case("wrong_dtype", "incorrect", "dtype"),
    Case("nan_output", "incorrect", "nan"),
    Case("unlaunched_kernel", "rejected", "no-triton-launch"),
    # An fp16 GEMM fails the fp32 tolerance on most inputs; what slips through, the float64
    # precision check catches.
    Case("fp16_compute", "incorrect", ("mismatch", "precision"), task=MATMUL),
    # Crashes and hangs: the pool's watchdog and the worker's limits.
    Case("infinite_loop", "timeout", "wall-time", config={"timeout_s": 20.0}),
    Case("infinite_loop", "timeout", "cpu-time", config={"cpu_time_s": 3.0, "timeout_s": 300.0}),
    Case("wild_pointer_kernel", *WILD_POINTER),
    # The CPU allocator refuses 200 GB at once; a GPU raises OutOfMemoryError ("memory").
    Case("huge_allocation", "runtime_error", "memory"),
    # 3 GB held in forward: the candidate process's own RLIMIT_DATA refuses the allocation.
    Case("host_memory_hog", "runtime_error", "memory", config={"host_memory_gb": 1.5}),
    # Caught statically...
    Case("side_stream", "rejected", "stream"),
    Case("background_thread", "rejected", "import"),
    Case("lazy_subclass", "rejected", "tensor-subclass"),
    Case("patched_sync", "rejected", "monkeypatch"),
    Case("patched_event_timer", "rejected", "monkeypatch"),
    Case("tf32_flags", "rejected", "precision-flag", task=MATMUL),
    Case("try_fallback", "rejected", "try"),
    Case("inherit_model", "rejected", "reference"),
    Case("call_reference_gc", "rejected", "import"),
    Case("frame_introspection", "rejected", "import"),
    Case("sys_modules_patch", "rejected", "import"),
    Case("print_pass_exit", "rejected", "builtin"),
    Case("os_exit", "rejected", "import"),
    Case("segfault_ctypes", "rejected", "import"),
    Case("env_api_keys", "rejected", "import"),
    Case("parent_environ", "rejected", "import"),
    Case("network_socket", "rejected", "import"),
    Case("write_outside", "rejected", "import"),
    Case("no_triton_kernel", "rejected", "no-triton"),
    Case("fork_bomb", "rejected", "import"),
    Case("builtins_patch", "rejected", "introspection"),
    # Next to the loosenings of issue 20 (honest published code accepted): each still refused.
    Case("ctx_module_patch", "rejected", "monkeypatch"),
    Case("import_fallback_torch", "rejected", "try"),
    Case("logging_config_exec", "rejected", "import"),
    # ...and again by the runtime layer alone.
    runtime("background_thread", "rejected", "thread"),
    runtime("lazy_subclass", "rejected", "output-type"),
    runtime("patched_sync", "rejected", "monkeypatch"),
    runtime("patched_event_timer", "rejected", "monkeypatch"),
    runtime("tf32_flags", "rejected", "precision-flag", task=MATMUL),
    runtime("try_fallback", "rejected", "no-triton-launch"),
    runtime("inherit_model", "runtime_error", None),  # NameError: Model is not in scope
    runtime("call_reference_gc", "rejected", "sandbox-introspection"),
    runtime("frame_introspection", "rejected", "sandbox-introspection"),
    runtime("sys_modules_patch", "rejected", "monkeypatch"),
    runtime("print_pass_exit", "runtime_error", "exit"),
    runtime("os_exit", "crashed", "exit"),
    runtime("segfault_ctypes", "rejected", "sandbox-ctypes"),
    runtime("env_api_keys", "runtime_error", None),  # "no key found": the environment is clean
    runtime("parent_environ", "rejected", "sandbox-file"),
    runtime("network_socket", "rejected", "sandbox-net"),
    runtime("write_outside", "rejected", "sandbox-file"),
    runtime("no_triton_kernel", "rejected", "no-triton-launch"),
    runtime("fork_bomb", "rejected", "sandbox-process"),
    runtime("ctx_module_patch", "rejected", "monkeypatch"),
    runtime("logging_config_exec", "rejected", "sandbox-process"),
    # Patched builtins break the harness in the candidate's own process first (it dies without
    # a reply), or the integrity snapshot sees them: either way never the judge's isinstance.
    runtime("builtins_patch", ("rejected", "crashed"), ("monkeypatch", "exit", "harness")),
    # The judge out of the candidate's reach (wave 2): each holds with the static rules off, for
    # the reason the process boundary, the OS sandbox or the judge's clock gives.
    # The integrity snapshot of the candidate's own process may name the patch first.
    runtime("launder_tolerances", ("incorrect", "rejected"), ("mismatch", "monkeypatch")),
    runtime(
        "frame_reference", ("rejected", "incorrect"), ("sandbox-introspection", "mismatch", "nan")
    ),
    # Written to the candidate's own socket, the forgery is a reply that is not the evaluator's.
    runtime("forged_reply", ("crashed", "rejected"), ("exit", "protocol")),
    # Refused as its output comes back: the evaluator reads outputs through torch.Tensor's own
    # methods, never the instance's (on the H200 the clock check alone let it through: 20 tiny
    # hidden launches fit inside the GPU head start it allows per call).
    runtime("lazy_tensor_methods", "rejected", "output-type"),
    runtime("proc_secrets", "runtime_error", None),
    runtime("sigalrm_leftover", "ok", None),
    runtime("patch_reference_ops", ("incorrect", "rejected"), ("mismatch", "monkeypatch")),
    # The decoy storage fools no one: the evaluator reads tensors through torch.Tensor's own
    # methods and refuses an output whose instance attributes shadow them (output-type); the
    # harness would see the output is the input (alias), and the judge's own pristine copy the
    # write (input-mutation).
    runtime("hidden_inplace", "rejected", ("output-type", "alias", "input-mutation")),
    runtime("overwrite_pristine", ("incorrect", "rejected"), ("mismatch", "sandbox-introspection")),
    # Its replies' memfds unsealed and resized under the judge's copy: refused before mapping.
    runtime("memfd_resize_race", "rejected", "protocol"),
    # Code that only a UTF-7 reading of the file sees: refused statically; with the static
    # checks off the candidate process runs the checked UTF-8 text, an honest kernel.
    Case("encoding_cookie_utf7", "rejected", "encoding"),
    runtime("encoding_cookie_utf7", "ok", None),
    # The judge v3 (issue 30, 29; tests/test_judge_clock.py times them): forged clocks and
    # work moved into the input draw change no verdict; a ring of output buffers is refused.
    runtime("forged_round_times", "ok", None),
    runtime("input_draw_work", "ok", None),
    runtime("ring_buffers", "rejected", "reuse"),
    Case("workspace_view_honest", "ok", None),
    # The judge version 3: the zygote out of its children's reach (tests/test_sandbox_wall.py
    # runs each before an honest candidate on one judge).
    runtime("zygote_mem_write", "runtime_error", None),  # "refused": not dumpable, no caps
    runtime("plant_import_module", "runtime_error", None),  # "planted nowhere but its home"
]

# Correctness only: timing would add nothing to these verdicts and minutes on a GPU.
BASE = EvalConfig(timing=False, compile_baseline=False, timeout_s=60.0)


def config_for(case: Case) -> EvalConfig:
    return BASE.replace(unsafe_skip_static_checks=case.runtime_only, **case.config)


@pytest.fixture(scope="module")
def pool():
    saved = os.environ.get(SECRET_NAME)
    os.environ[SECRET_NAME] = SECRET_VALUE  # workers start from this environment
    try:
        with EvalPool(workers=2) as p:
            yield p
    finally:
        if saved is None:
            os.environ.pop(SECRET_NAME, None)
        else:
            os.environ[SECRET_NAME] = saved


class _Verdicts(dict):
    """{case id: Future[EvalResult]}; a case not submitted yet is submitted when asked for."""

    def __init__(self, pool):
        super().__init__()
        self.pool = pool

    def __missing__(self, key: str):
        case = next(c for c in CASES if c.id == key)
        source = (ZOO / f"{case.exploit}.py").read_text()
        future = self[key] = self.pool.submit(case.task, source, config_for(case))
        return future


# The exploits that try to leave ESCAPED_FILE outside their home (no other file names it).
ESCAPE_ATTEMPTS = {
    case.id for case in CASES if ESCAPED_FILE in (ZOO / f"{case.exploit}.py").read_text()
}


# The cases the tests below read by id, submitted with the rest when those tests are selected.
NAMED_CASES = {
    "test_keys_are_not_in_the_worker_environment": {"env_api_keys-runtime-None"},
    "test_nothing_is_found_through_proc_with_the_guard_off": {"proc_secrets-runtime-None"},
    "test_a_forged_reply_never_becomes_a_verdict": {"forged_reply-runtime-exit|protocol"},
}


@pytest.fixture(scope="module")
def verdicts(pool, request):
    """The selected cases submitted at once, so warm workers share them and `-k` runs only what
    it selects: each selected case, and for the escape check the exploits that try to escape
    (all the cases run in the slow set, test_exploit_verdict; the fast set runs those alone)."""
    selected = [item for item in request.session.items if item.module is request.module]
    wanted = {
        item.callspec.params["case"].id
        for item in selected
        if hasattr(item, "callspec") and "case" in item.callspec.params
    }
    names = {item.originalname for item in selected}
    if "test_nothing_escaped_the_sandbox" in names:
        wanted |= ESCAPE_ATTEMPTS
    for name, ids in NAMED_CASES.items():
        if name in names:
            wanted |= ids
    found = _Verdicts(pool)
    for case in CASES:
        if case.id in wanted:
            found[case.id]  # submitted now
    return found


def test_every_exploit_file_is_in_the_table():
    files = {p.stem for p in ZOO.glob("*.py")}
    gpu_only = {"memo_after_checks", "huge_workspace", "hidden_memory_peak"}  # below and
    # tests/test_judge_clock.py
    assert files == {c.exploit for c in CASES} | gpu_only
    assert len(files) >= 22


@pytest.mark.parametrize("path", sorted(ZOO.glob("*.py")), ids=lambda p: p.stem)
def test_every_exploit_file_says_what_it_exploits(path):
    first = path.read_text().splitlines()[0]
    assert first.startswith(("# Exploit", "# Crash")), first


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
@pytest.mark.slow
def test_exploit_verdict(verdicts, case):
    result = verdicts[case.id].result(timeout=900)
    rules = case.rule if isinstance(case.rule, tuple) else (case.rule,)
    statuses = case.status if isinstance(case.status, tuple) else (case.status,)
    assert (result.status in statuses, result.rule in rules) == (True, True), result.summary()
    assert SECRET_VALUE not in result.message
    if (
        result.status == "rejected"
        and not case.runtime_only
        and result.rule
        in (
            "import",
            "builtin",
            "introspection",
            "monkeypatch",
            "stream",
            "precision-flag",
            "try",
            "reference",
            "tensor-subclass",
        )
    ):
        assert result.message.startswith("line "), result.message  # the static checker's format
    if result.rule and result.rule.startswith("sandbox-"):
        assert "candidate line" in result.message  # the denial points at the candidate's code


def test_nothing_escaped_the_sandbox(pool, verdicts):
    assert len(ESCAPE_ATTEMPTS) >= 4, ESCAPE_ATTEMPTS  # each writer, full and runtime-only
    for future in list(verdicts.values()):
        future.result(timeout=900)
    assert not (pool.root / ESCAPED_FILE).exists()
    assert not any(pool.root.glob(f"**/{ESCAPED_FILE}"))


def test_an_encoding_declaration_hides_nothing(pool, verdicts):
    full = verdicts["encoding_cookie_utf7-full-encoding"].result(timeout=900)
    assert "utf-7" in full.message and full.message.startswith("line 2: [encoding]"), full.message
    ran = verdicts["encoding_cookie_utf7-runtime-None"].result(timeout=900)
    assert ran.status == "ok", ran.summary()  # not the hidden write (sandbox-file), not zeroes
    assert not any(pool.root.glob(f"**/{ESCAPED_FILE}"))
    assert not (pool.root / ESCAPED_FILE).exists()


def test_keys_are_not_in_the_worker_environment(verdicts):
    result = verdicts["env_api_keys-runtime-None"].result(timeout=900)
    assert "no key found" in result.message


def test_nothing_is_found_through_proc_with_the_guard_off(verdicts):
    # The exploit turns the in-process guard off; the PID namespace, the cleared environment and
    # the filesystem view are what hold (without bubblewrap, the cleared environment alone).
    result = verdicts["proc_secrets-runtime-None"].result(timeout=900)
    assert "no key found" in result.message, result.message
    if "bubblewrap" in result.environment.isolation:
        assert "shadow" not in result.message


@pytest.mark.slow
def test_the_next_candidate_is_not_disturbed_by_a_leftover_signal_handler():
    # The saboteur arms SIGALRM; the honest candidate after it in the same judge gets a fresh
    # process forked from the zygote and passes.
    config = BASE.replace(unsafe_skip_static_checks=True)  # `import signal` is refused statically
    with EvalPool(workers=1) as pool:
        first = pool.submit(AFFINE, (ZOO / "sigalrm_leftover.py").read_text(), config)
        second = pool.submit(AFFINE, HONEST_AFFINE, config)
        assert first.result().status == "ok", first.result().summary()
        assert second.result().status == "ok", second.result().summary()


@pytest.mark.slow
def test_the_judge_survives_a_memfd_resized_under_its_copy():
    # The same judge process (started once, never replaced) gives the next candidate its
    # verdict: the racing candidate's memfds were refused, never mapped.
    config = BASE.replace(unsafe_skip_static_checks=True)
    with EvalPool(workers=1) as pool:
        raced = pool.submit(AFFINE, (ZOO / "memfd_resize_race.py").read_text(), config)
        second = pool.submit(AFFINE, HONEST_AFFINE, config)
        first = raced.result()
        assert (first.status, first.rule) == ("rejected", "protocol"), first.summary()
        assert "not sealed" in first.message
        assert second.result().status == "ok", second.result().summary()
        assert (pool.stats["started"], pool.stats["replaced"]) == (1, 0), pool.stats


def test_a_forged_reply_never_becomes_a_verdict(verdicts):
    result = verdicts["forged_reply-runtime-exit|protocol"].result(timeout=900)
    assert result.speedup_eager is None and result.status in ("crashed", "rejected")


@pytest.mark.gpu
def test_a_workspace_far_beyond_the_task_is_rejected():
    config = EvalConfig(
        shapes={"M": 64, "K": 64, "N": 64}, check_variant=False, compile_baseline=False
    )
    with EvalPool(workers=1) as pool:
        source = (ZOO / "huge_workspace.py").read_text()
        result = pool.submit(MATMUL, source, config).result()
        assert (result.status, result.rule) == ("rejected", "memory"), result.summary()
        # Allowed, the arena (its limit) holds the 50 GB; the judge counts the pages the
        # candidate wrote, and it writes one byte of them.
        allowed = pool.submit(MATMUL, source, config.replace(max_memory_gb=80.0)).result()
        assert allowed.status == "ok", allowed.summary()
        assert allowed.memory.candidate_peak_bytes < 2**30, allowed.memory


@pytest.mark.gpu
def test_outputs_memoised_for_the_timed_calls_are_caught():
    # Timed rounds draw fresh inputs: an output replayed from an earlier call is wrong there.
    config = EvalConfig(shapes={"rows": 8192, "cols": 8192}, compile_baseline=False)
    with EvalPool(workers=1) as pool:
        result = pool.submit(AFFINE, (ZOO / "memo_after_checks.py").read_text(), config).result()
    assert (result.status, result.rule) == ("incorrect", "drift"), result.summary()


HONEST_AFFINE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
"""


@pytest.mark.gpu
def test_a_time_under_the_roofline_is_rejected(tmp_path, monkeypatch):
    # The rule's wiring end to end: ceilings cached slower than the device make an honest
    # kernel's time 'impossible', as a kernel hiding its work from the timer would be. Eager
    # (two kernels, four passes over memory) must stay possible: an impossible baseline is an
    # evaluator error (on the H100 ceilings at 1/100 gave `crashed [evaluator]`, eager 0.37 ms
    # under a 18.1 ms bound). So the slowed bound is put between the two, as timed here.
    import json
    import math

    import triton.testing
    from test_codegen_harness import candidate_module

    from kernelwright.sandbox.judge.roofline import CACHE_FILE, IMPOSSIBLE_FACTOR, measure_ceilings

    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path))
    real = measure_ceilings("cuda")  # measured into tmp_path, then slowed down
    n = 8192 * 8192
    x = torch.randn(n, device="cuda")
    fused = candidate_module(HONEST_AFFINE, tmp_path).ModelNew()
    eager_ms = triton.testing.do_bench(lambda: x * 3.0 + 1.0)
    fused_ms = triton.testing.do_bench(lambda: fused(x))
    assert eager_ms > 1.4 * fused_ms, (eager_ms, fused_ms)  # room between them
    # A time under bound / IMPOSSIBLE_FACTOR is impossible: put that line at their geomean.
    bound_ms = IMPOSSIBLE_FACTOR * math.sqrt(eager_ms * fused_ms)
    bandwidth = 2 * n * 4 / (bound_ms * 1e-3) / 1e9
    slow = dict(real.to_dict(), bandwidth_gbps=min(bandwidth, real.bandwidth_gbps))
    (tmp_path / CACHE_FILE).write_text(json.dumps({real.key: slow}))
    config = EvalConfig(shapes={"rows": 8192, "cols": 8192}, compile_baseline=False)
    with EvalPool(workers=1) as pool:
        result = pool.submit(AFFINE, HONEST_AFFINE, config).result()
    assert (result.status, result.rule) == ("rejected", "roofline"), (
        result.summary(),
        eager_ms,
        fused_ms,
    )
    assert "under the physical lower bound" in result.message
