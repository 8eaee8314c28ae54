#!/usr/bin/env bash
# The one device call of a session lent a GPU (15 minutes of device time, start included):
# the GPU check (bench/gpu_check.sh, issue 13), the compile probe (bench/gpu_compile_probe.py:
# does fusing the step pay on the GPU? COMPILE_SECONDS, default 180, 0 skips it), then study
# S's paper slice (bench/gpu_paper_slice.sh, issue 11) with the time left of BUDGET_SECONDS.
# Logs and the slice's lab (a tar.gz) go to $OUT, which the device tool brings back.
#
#   OUT=/tmp/gpu BUDGET_SECONDS=520 bash bench/gpu_session.sh
#   DEVICE=cpu OUT=/tmp/gpu BUDGET_SECONDS=150 bash bench/gpu_session.sh   # smoke, < 3 min
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder for logs and the lab}"
mkdir -p "$OUT"
budget=${BUDGET_SECONDS:-520}
start=$(date +%s)
export LABS=${LABS:-$(mktemp -d)}
EQUIV_SECONDS=${EQUIV_SECONDS:-120} BENCH_SECONDS=${BENCH_SECONDS:-240} \
  bash bench/gpu_check.sh 2>&1 | tee "$OUT/gpu_check.log"
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
if [ "${COMPILE_SECONDS:-180}" -gt 0 ]; then
  PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} timeout "${COMPILE_SECONDS:-180}" "$PY" \
    bench/gpu_compile_probe.py 2>&1 | tee "$OUT/compile_probe.log"
fi
left=$(( budget - ($(date +%s) - start) - 40 ))  # 40 s: the last status, runs and the tar
SLICE_SECONDS=$left bash bench/gpu_paper_slice.sh 2>&1 | tee "$OUT/paper_slice.log"
tar czf "$OUT/paper-headline-lab.tar.gz" -C "$LABS" shortcut-saturation-paper-headline
echo "== gpu_session: $(( $(date +%s) - start )) s of $budget"
