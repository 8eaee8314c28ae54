#!/usr/bin/env bash
# The GPU check (issue 13 goal 6), sized for a lent H200 in ≤ 8 minutes; replaces gpu_sweep.sh.
#
#   bash bench/gpu_check.sh                  # cuda: ~4–6 min
#   DEVICE=cpu bash bench/gpu_check.sh       # smoke run of the script itself: tiny sizes, < 2 min
#
# 1. Member ≡ solo on the device: tests/engine/train/test_device_equivalence.py and
#    tests/studies/*/test_*_device_equivalence.py with RULELAB_TEST_DEVICE=$DEVICE (the toy,
#    study S and study M ensembles vs each member alone; a NaN member fails alone).
# 2–4. bench/gpu_check.py: the machine and its measured peaks; seed-epochs/s, TFLOP/s and memory
#    per member of the study-S paper config at E ∈ {2, 64, 256, 1024} and of study M (E ∈ {1, 8, 64, 256}) at P = 113,
#    width 4097, in fp32 and bf16 (bf16 only where native); the projected time of each paper
#    recipe, for the eager engine, engine 13 (the fused Triton step, study S at S_TILE_MEMBERS)
#    and the compiled one (study S at S_COMPILED_MEMBERS). Sizes can
#    be overridden: EPOCHS, PRECISIONS, S_MEMBERS, S_COMPILED_MEMBERS, S_N_TRAIN, S_N_EVAL,
#    M_MEMBERS, M_P, M_WIDTH, MICRO_BATCH, FORCE_BF16 (see bench/gpu_check.py); the two parts'
#    time limits by EQUIV_SECONDS (150) and BENCH_SECONDS (420).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
export DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cpu ]; then  # smoke sizes: the same code paths, seconds each
  export EPOCHS=${EPOCHS:-1} S_MEMBERS=${S_MEMBERS:-"2 4"} S_COMPILED_MEMBERS=${S_COMPILED_MEMBERS-2}
  export S_TILE_MEMBERS=${S_TILE_MEMBERS-}  # engine 13 runs on CUDA only
  export S_N_TRAIN=${S_N_TRAIN:-1024}
  export S_N_EVAL=${S_N_EVAL:-256} M_MEMBERS=${M_MEMBERS:-"1 2"} M_P=${M_P:-31}
  export M_WIDTH=${M_WIDTH:-65} PRECISIONS=${PRECISIONS:-"fp32 bf16 tf32"} FORCE_BF16=${FORCE_BF16:-1}
fi
if ! "$PY" -c "import torch, rulelab.engine.base" 2>/dev/null; then
  echo "error: $PY cannot import torch and rulelab (install the project: pip install -e .)"
  exit 2
fi
start=$(date +%s)
status=0
echo "== 1. member ≡ solo on $DEVICE"
RULELAB_TEST_DEVICE=$DEVICE timeout "${EQUIV_SECONDS:-150}" "$PY" -m pytest -q -p no:cacheprovider \
  tests/engine/train/test_device_equivalence.py tests/studies/*/test_*_device_equivalence.py \
  || status=1
echo "== 2–4. throughput, memory, projections on $DEVICE"
timeout "${BENCH_SECONDS:-420}" "$PY" bench/gpu_check.py || status=1
echo "== gpu_check: $(( $(date +%s) - start )) s, $([ $status = 0 ] && echo ok || echo FAILED)"
exit $status
