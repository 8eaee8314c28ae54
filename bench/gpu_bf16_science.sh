#!/usr/bin/env bash
# bf16 vs fp32 on the science (issue 13, goal 3), on a device with native bf16: study M's quick
# preset (42 runs, P = 31, 1,500 full-batch steps) trained twice, once per precision, the two
# sweeps side by side on one GPU. The labs come back as $OUT/m-quick-{fp32,bf16}.tar.gz; the
# comparison (same outcome per run: final accuracies, the noisy-first lead, FF's G) is read
# off them with bench/bf16_outcomes.py where the analyses can run.
#
#   OUT=/tmp/bf16 bash bench/gpu_bf16_science.sh            # cuda, ≈ 1–2 min on an H200
#   DEVICE=cpu PRECISIONS=fp32 OUT=/tmp/bf16 bash bench/gpu_bf16_science.sh   # smoke
#   PRECISIONS='fp32 tf32' OUT=/tmp/tf32 bash bench/gpu_bf16_science.sh     # TF32's outcome table
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder for the labs}"
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
DEVICE=${DEVICE:-cuda}
labs=$(mktemp -d)
start=$(date +%s)
for prec in ${PRECISIONS:-fp32 bf16}; do
  timeout "${SWEEP_SECONDS:-150}" "$PY" -m rulelab.cli sweep coexistence/quick --device "$DEVICE" \
    --precision "$prec" --micro-batch 1024 --max-members 64 --lab "$labs/m-quick-$prec" \
    >"$OUT/m-quick-$prec.log" 2>&1 &
done
wait
for prec in ${PRECISIONS:-fp32 bf16}; do
  tail -n 2 "$OUT/m-quick-$prec.log"
  tar czf "$OUT/m-quick-$prec.tar.gz" -C "$labs" "m-quick-$prec"
done
echo "== gpu_bf16_science: $(( $(date +%s) - start )) s"
