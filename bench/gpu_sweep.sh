#!/usr/bin/env bash
# On a lent GPU: run a slice of the paper-scale study-S sweep and project the full sweep.
#
#   bash bench/gpu_sweep.sh                 # cuda, ~3–5 min
#   DEVICE=cpu SMOKE=0 MEMBERS=2 EPOCHS=1 SHAPES=1,1 MICRO=512 PRECISIONS=fp32 \
#     bash bench/gpu_sweep.sh               # a quick check of the script itself on a CPU
#
# 1. Smoke: `rulelab sweep` end to end on the device (bf16 autocast) over a 20-epoch slice of
#    experiments/shortcut_saturation/paper.yaml (paper data sizes), then `rulelab status`.
# 2. Throughput: for each shape, precision, micro-batch and ensemble size E, time EPOCHS
#    full-batch epochs (16,384 examples) of E paper-config members plus one evaluation, and
#    print seed-epochs/s, achieved TFLOP/s (3 × forward matmul FLOPs, as the planner counts),
#    peak memory per member, and the planner's memory estimate beside it.
# 3. Projection: the full paper.yaml sweep (2,400 runs × 15,000 epochs, evaluation every 10)
#    at the best measured rate of each shape.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
export DEVICE=${DEVICE:-cuda} EPOCHS=${EPOCHS:-20} MEMBERS=${MEMBERS:-"64 256 512"}
export MICRO=${MICRO:-"512 2048"} PRECISIONS=${PRECISIONS:-"fp32 bf16"} SHAPES=${SHAPES:-"1,1 2,2"}
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
      torch.cuda.get_device_name() if torch.cuda.is_available() else '')"

# --- 1. smoke: the CLI on the device ---------------------------------------------------------
LAB=$(mktemp -d)/lab
SLICE=$(mktemp --suffix .yaml)
"$PY" - "$SLICE" <<'PYEOF'
import sys, yaml
r = yaml.safe_load(open("experiments/shortcut_saturation/paper.yaml"))
r["experiment"] = "paper-slice"
r["base"]["epochs"] = 20
r["grid"] = {"layers": [2], "heads": [2], "ratio": [0.5, 0.9], "weight_decay": [0.1]}
r["seeds"] = {"count": 16}
yaml.safe_dump(r, open(sys.argv[1], "w"))
PYEOF
"$PY" -m rulelab.cli sweep "$SLICE" --lab "$LAB" --dry-run --device "$DEVICE" | sed -n 1,8p
if [ "${SMOKE:-1}" = 1 ]; then
  time "$PY" -m rulelab.cli sweep "$SLICE" --lab "$LAB" --device "$DEVICE" --precision bf16 --quiet
  "$PY" -m rulelab.cli status --lab "$LAB"
fi

# --- 2–3. throughput and projection -------------------------------------------------------------
"$PY" - <<'PYEOF'
import os, time
import torch
from rulelab.config import MPSPRunConfig
from rulelab.sweep.chunk import trainer_for
from rulelab.sweep.estimate import human_seconds, run_cost
from rulelab.sweep.recipe import load_recipe
from rulelab.train.base import TrainOptions

device, epochs = os.environ["DEVICE"], int(os.environ["EPOCHS"])
cuda = device.startswith("cuda")
shapes = [tuple(map(int, s.split(","))) for s in os.environ["SHAPES"].split()]
paper = load_recipe("experiments/shortcut_saturation/paper.yaml").configs()

def sync():
    if cuda:
        torch.cuda.synchronize()

best = {}
print(f"\n{'shape':>6} {'prec':>5} {'micro':>6} {'E':>5} {'s/epoch':>8} {'seed-ep/s':>10} "
      f"{'TFLOP/s':>8} {'MiB/member':>11} {'est MiB':>8} {'eval s':>7}")
for layers, heads in shapes:
    cfgs = [c for c in paper if c.layers == layers and c.heads == heads]
    cost = run_cost(cfgs[0])
    for precision in os.environ["PRECISIONS"].split():
        for micro in map(int, os.environ["MICRO"].split()):
            for E in map(int, os.environ["MEMBERS"].split()):
                members = [c.model_copy(update={"epochs": epochs + 2}) for c in cfgs[:E]]
                members += [members[i % len(members)].model_copy(update={"seed": 10_000 + i})
                            for i in range(E - len(members))]
                try:
                    if cuda:
                        torch.cuda.empty_cache()
                        torch.cuda.reset_peak_memory_stats()
                    base_mem = torch.cuda.memory_allocated() if cuda else 0
                    tr = trainer_for("mpsp", precision)(members, TrainOptions(
                        device=device, micro_batch=micro))
                    tr.train_epoch()  # warm-up (kernels, allocator)
                    sync(); t = time.perf_counter()
                    for _ in range(epochs):
                        tr.train_epoch()
                    sync(); dt = (time.perf_counter() - t) / epochs
                    t = time.perf_counter(); tr.evaluate(); sync(); de = time.perf_counter() - t
                    peak = (torch.cuda.max_memory_allocated() - base_mem) / E if cuda else float("nan")
                except torch.OutOfMemoryError:
                    print(f"{layers}L{heads}H {precision:>5} {micro:>6} {E:>5}  out of memory")
                    continue
                finally:
                    tr = None
                rate = E / (dt + de / cfgs[0].eval_every)  # seed-epochs/s, evaluation amortized
                tflops = cost.flops_per_epoch * E / dt / 1e12
                print(f"{layers}L{heads}H {precision:>5} {micro:>6} {E:>5} {dt:8.3f} {rate:10.0f} "
                      f"{tflops:8.2f} {peak / 2**20:11.1f} {cost.member_bytes / 2**20:8.1f} "
                      f"{de:7.2f}", flush=True)
                key = (layers, heads, precision)
                best[key] = max(best.get(key, (0, None)), (rate, (micro, E)))

print("\nprojection: full experiments/shortcut_saturation/paper.yaml (2,400 runs × 15,000 "
      "epochs), one device, best measured rate per shape")
for precision in os.environ["PRECISIONS"].split():
    total, known = 0.0, True
    for layers, heads in {(c.layers, c.heads) for c in paper}:
        n = sum(c.layers == layers and c.heads == heads for c in paper)
        rate = best.get((layers, heads, precision), (0, None))[0]
        if not rate:
            known = False
            continue
        total += n * paper[0].epochs / rate
    note = "" if known else " (shapes not measured left out)"
    print(f"  {precision}: {human_seconds(total)}{note}")
PYEOF
