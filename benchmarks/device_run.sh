#!/usr/bin/env bash
# The GPU checks of the separated evaluator (issue 12), as one device call runs them on the H200.
#
# Here, once, in the project root (the GPU image lacks these; pyseccomp is pure Python and
# libseccomp2 is in the image's Ubuntu; bubblewrap travels as a .deb):
#   bash ../shared/device/wheels.sh pyseccomp einops   (einops: tasks that import it, level3 Mamba2)
#   mkdir -p .deb && (cd .deb && apt-get download bubblewrap)
#   grep -qxF '/.deb/' .git/info/exclude || echo '/.deb/' >> .git/info/exclude
# Then the device call carries [".whl", ".deb", "shared"] (shared/kernelbench copied into the
# checkout's ignored shared/ for the suite step) and runs:
#   bash benchmarks/device_run.sh [STEP ...]
# with STEP among: gpu (pytest -m gpu; gpu-a and gpu-b are its two halves), zoo, harness, runtime (the runtime guard's overhead), memory, suite1/suite2/suite3 (KernelBench
# level 1/2/3, full size), ray (benchmarks/ray_bench.py: the Ray path's overhead, verdicts and
# times against the local pool; needs Ray's wheels: `bash ../shared/device/wheels.sh ray`).
# Everything it prints also lands in $OUT/device_run.log.
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
ln -sfn "$PWD" /tmp/site/kernelwright
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
if ! command -v bwrap >/dev/null 2>&1 && ls .deb/bubblewrap*.deb >/dev/null 2>&1; then
    dpkg -x .deb/bubblewrap*.deb /tmp/bwrap && export PATH=/tmp/bwrap/usr/bin:$PATH
fi
log=${OUT:-/tmp}/device_run.log
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(gpu zoo harness)
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
    python3 -c 'from kernelwright.sandbox import bwrap; print(bwrap.probe())'
    for step in "${steps[@]}"; do
        echo "== $step $(date -u +%H:%M:%S)"
        case $step in
            gpu) python3 -m pytest -q -p no:cacheprovider -m gpu ;;
            # The same in two halves, each within one 600 s device call now that kernels run
            # (the whole took ~600 s on the H200 on 2026-12-02).
            gpu-a) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_codegen_gpu.py \
                tests/test_compare.py tests/test_examples.py tests/test_roofline.py \
                tests/test_timing.py tests/test_runtime_candidates.py tests/test_codegen_attention.py ;;
            gpu-b) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_nightly.py \
                tests/test_optimize_gpu.py tests/test_suite.py tests/test_zoo.py ;;
            zoo) python3 -m pytest -q -p no:cacheprovider tests/test_zoo.py tests/test_remote.py ;;
            # The runtime guard's unsampled-call overhead (issue 18: < 2% on the H200).
            runtime) python3 benchmarks/runtime_bench.py ;;
            harness) python3 benchmarks/harness_bench.py --results "${OUT:-/tmp}/RESULTS-harness.md" ;;
            ray) python3 benchmarks/ray_bench.py --results "${OUT:-/tmp}/RESULTS-ray.md" ;;
            memory)
                # The largest level-1 tasks by bytes moved (the judge's bound is checked there).
                python3 benchmarks/memory_bench.py shared/kernelbench/level1/*.py \
                    --results "${OUT:-/tmp}/RESULTS-memory.md" ;;
            suite1 | suite2 | suite3)
                # Run directories stay in /tmp (too many files to come back); the three reports
                # are copied to $OUT. SUITE_ARGS adds options (--stop-after, --rounds, ...).
                level=${step#suite}
                python3 -m kernelwright.cli suite "shared/kernelbench/level$level" --model offline \
                    --out "/tmp/$step" --db "/tmp/$step.sqlite" ${SUITE_ARGS:---stop-after 8m}
                # Every crashed or evaluator-error result, whole, into the log.
                python3 - "/tmp/$step" <<'PY'
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("*/round_*/cand_*/result.json")):
    r = json.loads(f.read_text())
    if r.get("status") == "crashed" or r.get("rule") == "evaluator":
        print("##", f.parent.relative_to(sys.argv[1]), r.get("status"), r.get("rule"))
        print(r.get("message", "")[:4000])
PY
                for f in /tmp/$step/suite*.md /tmp/$step/suite*.json; do
                    [ -f "$f" ] && cp "$f" "${OUT:-/tmp}/$step-$(basename "$f")"
                done ;;
            *) echo "unknown step $step" ;;
        esac
    done
} 2>&1 | tee "$log"
