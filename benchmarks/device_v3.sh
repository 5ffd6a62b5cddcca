#!/usr/bin/env bash
# One device call for the judge v3 (issue 30): setup as device_run.sh, then the named steps, each
# under its own time limit so one stuck step leaves time for the rest. Logs land in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
ln -sfn "$PWD" /tmp/site/kernelwright
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
if ! command -v bwrap >/dev/null 2>&1 && ls .deb/bubblewrap*.deb >/dev/null 2>&1; then
    dpkg -x .deb/bubblewrap*.deb /tmp/bwrap && export PATH=/tmp/bwrap/usr/bin:$PATH
fi
out=${OUT:-/tmp}
L1=shared/kernelbench/level1
L2=shared/kernelbench/level2
for step in "$@"; do
    name=${step%%:*}; limit=${step#*:}; [ "$limit" = "$step" ] && limit=300
    echo "== $name (limit ${limit}s) $(date -u +%H:%M:%S)"
    case $name in
        bench1) timeout "$limit" python3 benchmarks/judge_bench.py ${BENCH_TASKS:-$L1/20_LeakyReLU.py \
            $L1/25_Swish.py $L1/100_HingeLoss.py $L1/37_FrobeniusNorm_.py \
            $L1/2_Standard_matrix_multiplication_.py $L1/34_InstanceNorm.py \
            $L2/32_Conv2d_Scaling_Min.py $L2/14_Gemm_Divide_Sum_Scaling.py} \
            --results "$out/RESULTS-judge.md" ;;
        switch) timeout "$limit" python3 benchmarks/switch_probe.py ;;
        launch) timeout "$limit" python3 benchmarks/launch_probe.py ;;
        runtime) timeout "$limit" python3 benchmarks/runtime_bench.py ;;
        harnessT) for w in ${WORKERS:-1}; do timeout "$limit" python3 benchmarks/harness_bench.py \
            --small "${SMALL:-30}" --workers "$w" --throughput-only --deadline-s $((limit - 10)) \
            --results "$out/RESULTS-harness.md"; done ;;
        gateprobe) timeout "$limit" python3 benchmarks/gate_probe.py ;;
        gate) timeout "$limit" python3 -m pytest -q -p no:cacheprovider tests/test_gpugate.py ;;
        tma) timeout "$limit" python3 -m pytest -x -q --tb=short -p no:cacheprovider -m gpu \
            tests/test_runtime_candidates.py -k tma ;;
        zoogpu) timeout "$limit" python3 -m pytest -q --tb=short -p no:cacheprovider -m gpu tests/test_zoo.py ;;
        zoo) timeout "$limit" python3 -m pytest -q -p no:cacheprovider tests/test_zoo.py \
            tests/test_remote.py ;;
        # One pytest per file: a file's failures print when it ends, not only at the very end,
        # so a step cut by its limit still shows why the files before the cut failed.
        gpuf) timeout "$limit" bash -c 'for f in "$@"; do python3 -m pytest -v --tb=short \
            --durations=5 -p no:cacheprovider -m gpu "$f"; done' _ ${GPU_FILES:-tests} ;;
        gpu) timeout "$limit" python3 -m pytest -v --tb=line -p no:cacheprovider -m gpu ;;
        harness) timeout "$limit" python3 benchmarks/harness_bench.py --small "${SMALL:-30}" \
            --results "$out/RESULTS-harness.md" ;;
        clock) timeout "$limit" python3 -m pytest -q -p no:cacheprovider tests/test_judge_clock.py ;;
        memory) timeout "$limit" python3 benchmarks/memory_bench.py ${MEM_TASKS:-$L1/*.py} \
            --results "$out/RESULTS-memory.md" ;;
        # A level's suite resumes across device calls: the finished rows (suite_state.json) come
        # back in $OUT and travel again as shared/suite-state/suiteN.json (shared/ is carried).
        suite*) lvl=${name#suite}; mkdir -p "/tmp/$name"
            [ -f "shared/suite-state/$name.json" ] && cp "shared/suite-state/$name.json" "/tmp/$name/suite_state.json"
            timeout "$limit" python3 -m kernelwright.cli suite \
            "shared/kernelbench/level$lvl" --model offline --out "/tmp/$name" --db "/tmp/$name.sqlite" \
            ${SUITE_ARGS:-}; for f in /tmp/$name/suite*.md /tmp/$name/suite*.json; do
                [ -f "$f" ] && cp "$f" "$out/$name-$(basename "$f")"; done
            python3 - "/tmp/$name" <<'PY'
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("*/round_*/cand_*/result.json")):
    r = json.loads(f.read_text())
    if r.get("status") == "crashed" or r.get("rule") == "evaluator":
        print("##", f.parent.relative_to(sys.argv[1]), r.get("status"), r.get("rule"))
        print(r.get("message", "")[:3000])
PY
            ;;
        *) echo "unknown step $name" ;;
    esac
done 2>&1 | tee "$out/device_v3.log"
