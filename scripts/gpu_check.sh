#!/usr/bin/env bash
# One-shot check of the GPU path, for a machine with a GPU (a few minutes):
#   1. the ordering probes on CUDA streams, plain and with the side stream delayed (torch.cuda._sleep);
#   2. every gallery scenario and $PROGRAMS random programs give the CPU's report and pool contents on the GPU;
#   3. the GPU tests (tests/test_gpu.py, and the stream tests with the emulation);
#   4. the bandwidth benchmark (benchmarks/bench_gpu.py, 256 MiB copies against a raw pinned<->device copy).
# Everything is logged to $OUT/gpu_check.log (OUT defaults to build/gpu_check). Without CUDA each step says it
# skipped and the script exits 0; it exits 1 when a check fails, 2 when no Python with torch is found.
#   usage: scripts/gpu_check.sh            env: PYTHON (default .venv/bin/python, else python3), PROGRAMS (300)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3 || true)
if [ -z "$PY" ] || ! "$PY" -c "import torch" 2>/dev/null; then
    echo "gpu_check.sh: no Python with torch found; set PYTHON=/path/to/python (with torch installed)" >&2
    exit 2
fi
OUT_DIR=${OUT:-build/gpu_check}
mkdir -p "$OUT_DIR"
LOG=$OUT_DIR/gpu_check.log
: > "$LOG"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
status=0

step() {  # step TITLE CMD...: run, log, remember a failure
    local title=$1
    shift
    echo "== $title: $*" | tee -a "$LOG"
    local t0=$SECONDS
    "$@" 2>&1 | tee -a "$LOG"
    local rc=${PIPESTATUS[0]}
    echo "== $title: exit $rc after $((SECONDS - t0)) s" | tee -a "$LOG"
    [ "$rc" -eq 0 ] || status=1
}

if command -v nvidia-smi >/dev/null; then
    step "GPU" nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
fi
step "torch" "$PY" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'available', torch.cuda.is_available())"
step "ordering probes and equality with the CPU" "$PY" -m simcache.gpu_check --programs "${PROGRAMS:-300}"
step "GPU and stream tests" "$PY" -m pytest tests/test_gpu.py tests/test_streams.py -q -p no:cacheprovider -rs \
    -k "${PYTEST_K:-not gallery_scenario}"
step "bandwidth" "$PY" benchmarks/bench_gpu.py
echo "gpu_check.sh: $([ $status -eq 0 ] && echo all steps passed || echo SOME STEP FAILED); log in $LOG" | tee -a "$LOG"
exit $status
