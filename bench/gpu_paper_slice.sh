#!/usr/bin/env bash
# Study S at the paper's setting on a lent GPU (issue 11, item 4): the four headline cells of
# shortcut-saturation/paper-headline (1L/2L × r 0.5/0.9; n = 10, V = 64, N = 16,384, full batch,
# 15,000 epochs, lr 1e-3, wd 0.1), for as long as SLICE_SECONDS allows. Seeds come in stages so
# that every finished stage leaves balanced cells: seed 0 of each cell first (4 runs: a 1L and
# a 2L ensemble of 2), then seeds 0…SEEDS−1 (8: the headline test README "The regime" sizes, 73%
# power for the 2L rise; one ensemble of 16 per layer count, where the first stage's pairs leave
# the GPU idle: 2L at 36 seed-epochs/s for 2 members, 164 for 64, on the H200). A stage cut by
# the time limit leaves its runs at their last checkpoint (every 500 epochs), and `rulelab sweep`
# resumes them exactly later.
# The runs have paper.yaml's run ids, so they count for the full recipe too. The lab comes back
# as $OUT/paper-headline-lab.tar.gz (bench/gpu_session.sh): unpack it over results/gpu/.
#
#   SLICE_SECONDS=300 bash bench/gpu_paper_slice.sh   # → $LABS/shortcut-saturation-paper-headline
#   DEVICE=cpu SLICE_SECONDS=60 bash bench/gpu_paper_slice.sh   # smoke: starts, is cut, resumable
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
DEVICE=${DEVICE:-cuda}
LAB=${LABS:-rulelab-runs}/shortcut-saturation-paper-headline
# The slice so far, committed between sessions (results/gpu/README.md): a fresh $LAB starts as a
# copy of it, so each GPU session goes on where the last one stopped (not the CPU's smoke run:
# its runs were trained on CUDA by engine 4, which a CPU run would refuse to resume).
carried=results/gpu/shortcut-saturation-paper-headline
if [ "$DEVICE" != cpu ] && [ ! -e "$LAB" ] && [ -d "$carried" ]; then
  mkdir -p "$(dirname "$LAB")" && cp -r "$carried" "$LAB" && echo "== resuming $carried"
fi
deadline=$(( $(date +%s) + ${SLICE_SECONDS:-300} ))
recipe=src/rulelab/studies/shortcut_saturation/recipes/paper-headline.yaml
tmp=$(mktemp -d)
for seeds in 1 "${SEEDS:-8}"; do
  left=$(( deadline - $(date +%s) ))
  if [ "$left" -lt 20 ]; then echo "== ${left} s left: no stage with $seeds seed(s)"; break; fi
  sed "s/^seeds: {count: 30, start: 0}/seeds: {count: $seeds, start: 0}/" "$recipe" \
    >"$tmp/paper-headline.yaml"
  grep -q "^seeds: {count: $seeds, start: 0}" "$tmp/paper-headline.yaml" \
    || { echo "error: $recipe has no 'seeds: {count: 30, start: 0}' line to narrow"; exit 2; }
  echo "== $seeds seed(s) per cell on $DEVICE, ${left} s left"
  timeout --signal=TERM --kill-after=30 "$left" "$PY" -m rulelab.cli sweep \
    "$tmp/paper-headline.yaml" --device "$DEVICE" --max-members 512 \
    --micro-batch "${MICRO_BATCH:-16384}" --lab "$LAB"
  rc=$?
  [ $rc = 124 ] && { echo "== cut by the time limit"; break; }
  [ $rc != 0 ] && { echo "== sweep failed (exit $rc)"; break; }
done
"$PY" -m rulelab.cli status --lab "$LAB"
"$PY" -m rulelab.cli runs --lab "$LAB"
