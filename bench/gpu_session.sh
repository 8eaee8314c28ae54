#!/usr/bin/env bash
# The one device call of a session lent a GPU (15 minutes of device time, start included), in
# the order of what its minutes buy: the GPU check (bench/gpu_check.sh, issue 13: member ≡ solo
# on CUDA, engine 13's included; the eager engine's, engine 13's and the compiled engine's
# throughput in fp32 and tf32; each paper
# recipe projected from those rates, issue 25 goal 5), then the compile probe
# (bench/gpu_compile_probe.py: the compiled engine's traced layout against the model's own) and
# study S's paper slice (bench/gpu_paper_slice.sh, issue 11, resumed from results/gpu/), each
# only with the time BUDGET_SECONDS leaves it. Logs and the slice's lab (a tar.gz) go to $OUT, which the device tool brings back.
#
#   OUT=/tmp/gpu BUDGET_SECONDS=540 bash bench/gpu_session.sh
#   DEVICE=cpu OUT=/tmp/gpu BUDGET_SECONDS=240 bash bench/gpu_session.sh   # smoke, < 4 min
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder for logs and the lab}"
mkdir -p "$OUT"
budget=${BUDGET_SECONDS:-540}
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) - ${1:-0} )); }
export LABS=${LABS:-$(mktemp -d)}
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
# The device image may lack a dependency (pydantic): its wheels, downloaded here into .whl (an
# ignored folder named in the call's carry; README "Benchmark"), go on there first.
if ! "$PY" -c "import pydantic" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
# The sizes whose rates the projections need (E = 1024 ran as E = 256 did on 2026-11-30; E = 2
# and bf16 were measured on 2026-11-30 and 12-04): the eager engine in fp32 and tf32 is the
# baseline engine 13 (the fused Triton step, issue 25 goal 5; fp32 and tf32 only) is read against
# in the same session.
if [ "${DEVICE:-cuda}" != cpu ]; then  # the smoke run keeps gpu_check.sh's tiny sizes
  export S_MEMBERS=${S_MEMBERS:-"64 256"} M_MEMBERS=${M_MEMBERS:-"8 64"}
  # TF32 first: engine 13's TF32 build spills 0.4x as much as its fp32 one (3.3 against 8.0 KB
  # a thread) and compiles in half the time, so a time limit cuts the weaker candidate
  export PRECISIONS=${PRECISIONS:-"tf32 fp32"}
  # engine 13's shipped kernel, then the same with its weight gradients held in registers
  # (twice the spills, ≈ 2 MB less scratch traffic a tile: only a GPU can weigh them); each
  # variant and precision compiles its kernel (20–60 s on one core here). TILE_SHAPES="16:16
  # 16:8 4:16" times other tiles and warps
  export TILE_SHAPES=${TILE_SHAPES:-"16:16 16:16:held"}
fi
# The check takes the budget less 150 s; the probe and the slice get what it leaves. Its device
# tests compile engine 13's kernel once (≈ 2 minutes on this repo's CPU: bench/gpu_tile_compile.py).
EQUIV_SECONDS=${EQUIV_SECONDS:-240} BENCH_SECONDS=${BENCH_SECONDS:-$(left 150)} \
  bash bench/gpu_check.sh 2>&1 | tee "$OUT/gpu_check.log"
probe=$(left 90); [ "$probe" -gt "${COMPILE_SECONDS:-240}" ] && probe=${COMPILE_SECONDS:-240}
if [ "$probe" -ge 60 ]; then
  PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} timeout "$probe" "$PY" \
    bench/gpu_compile_probe.py 2>&1 | tee "$OUT/compile_probe.log"
else
  echo "== compile probe skipped: ${probe} s left"
fi
slice=$(left 30)
if [ "$slice" -ge 60 ]; then
  SLICE_SECONDS=$slice bash bench/gpu_paper_slice.sh 2>&1 | tee "$OUT/paper_slice.log"
  tar czf "$OUT/paper-headline-lab.tar.gz" -C "$LABS" shortcut-saturation-paper-headline
else
  echo "== paper slice skipped: ${slice} s left"
fi
echo "== gpu_session: $(( $(date +%s) - start )) s of $budget"
