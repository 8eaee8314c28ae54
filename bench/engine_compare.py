"""Engines 4, 7, 8 and 9 (the transformer's eager engine) vs engine 5 (compiled) vs a naive
per-seed loop, one training step, paired in one process (issue 25).

Sizes: ``ladder`` (study S 2L, d_model 24 / d_mlp 48, 2 heads, n = 10, V = 64, full batch
2,048, the scale ladder's first rung) or ``paper`` (d_model 64 / d_mlp 128, full batch 16,384).
Each repetition times, back to back: (a) the naive loop (bench/naive_model.py + AdamW, one seed
after another, full batch at once, on this process's threads); (b) rulelab's trainer, engine 4
(engine 1's computation — q, k, v copied to ``[E·B, H, T, d_head]``, tiny batched matmuls, the
TransformerLens-layout path every hooked forward takes — on one thread, as every CPU training
step now runs, :mod:`rulelab.engine.threads`; ``--engine 4``); (c) engine 7
(:mod:`rulelab.models.attention_core`, its sums native: :mod:`rulelab.models.attention_sums`;
``RULELAB_NATIVE=0`` times their PyTorch chains); engine 8 (engine 7's attention with the batch
innermost everywhere, :mod:`rulelab.models.lane_forward`); engine 9, the default (engine 8 with
the attention core fused); (d) the compiled engine,
``Settings(engine="compiled")`` (:mod:`rulelab.engine.compiled`), whose first step compiles
(its time is printed first).
Machines shared with other work are timed by CPU time of this process (``time.process_time``)
as well as wall time; ratios are medians of the per-repetition ratios. Then one step of each
engine under the profiler: the share of matmul kernels in the step's self CPU time (the
compiled graph's own kernels count as the rest).

    OMP_NUM_THREADS=1 python bench/engine_compare.py ladder --seeds 8 --reps 5
    OMP_NUM_THREADS=1 python bench/engine_compare.py paper --seeds 4 --engines 8,9
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from naive_model import NaiveModel
from rulelab.settings import Settings
from rulelab.store.version import COMPILED_ENGINE
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

SIZES = {"ladder": dict(d_model=24, d_mlp=48, n_train=2048),
         "paper": dict(d_model=64, d_mlp=128, n_train=16384)}
MATMULS = ("aten::bmm", "aten::baddbmm", "aten::mm", "aten::addmm")


def trainer(cfgs, engine: int) -> MPSPTrainer:
    """rulelab's trainer computing engine ``engine``'s numerics: 9 (eager, the default), 8, 7, 4
    (engine 1's computation on one thread) or 5 (compiled; 3 also reads as compiled)."""
    if engine in (3, COMPILED_ENGINE):
        return MPSPTrainer(cfgs, Settings(engine="compiled"))
    return MPSPTrainer(cfgs, Settings(engine=str(engine)))


def naive_step(cfgs, ref):
    """One closure per seed: a plain model + AdamW on that seed's data, full batch."""
    steps = []
    for e, c in enumerate(cfgs):
        model = NaiveModel(c).load_member(ref.model, e)
        opt = torch.optim.AdamW(model.parameters(), lr=c.lr, betas=(c.beta1, c.beta2),
                                eps=c.eps, weight_decay=c.weight_decay)
        x, y = ref.data.train_x[e], ref.data.train_y[e]

        def step(model=model, opt=opt, x=x, y=y) -> None:
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        steps.append(step)
    return lambda: [s() for s in steps]


def timed(f) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    f()
    return time.perf_counter() - w, time.process_time() - c


def matmul_share(trainer) -> tuple[float, float]:
    """(share of matmul kernels in one step's self CPU time, the step's profiled ms)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.train_epoch()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    mm = sum(e.self_cpu_time_total for e in events if e.key in MATMULS)
    return mm / total, total / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("size", choices=sorted(SIZES))
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--engines", default="4,8,9,5", help="engine versions to time besides naive")
    ap.add_argument("--n-train", type=int, default=None, help="override the full batch (the "
                    "trainer's micro-batches stay 512 examples, so a step's profile is kept)")
    args = ap.parse_args()
    size = {**SIZES[args.size], **({"n_train": args.n_train} if args.n_train else {})}
    cfgs = [MPSPRunConfig(layers=2, heads=2, seq_len=10, vocab=64, n_eval=512, ratio=0.9,
                          seed=s, **size) for s in range(args.seeds)]
    engines = [f"engine {v}" for v in args.engines.split(",")]
    runs = {"naive": None, **{k: trainer(cfgs, int(k.split()[1])) for k in engines}}
    runs["naive"] = naive_step(cfgs, runs[engines[0]])
    steps = {k: (v if k == "naive" else v.train_epoch) for k, v in runs.items()}
    first = {k: timed(f)[0] for k, f in steps.items()}  # warm-up; the compiled one compiles
    for k in ("engine 3", "engine 5"):
        if k in first:
            print(f"{k}: first step (compiling) {first[k]:.1f} s wall", flush=True)
    wall: dict[str, list[float]] = {k: [] for k in steps}
    cpu: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(args.reps):
        for k, f in steps.items():
            w, c = timed(f)
            wall[k].append(w)
            cpu[k].append(c)
    n = args.seeds
    print(f"{args.size}: {n} seeds, full batch {cfgs[0].n_train}, "
          f"{torch.get_num_threads()} thread(s), {args.reps} paired repetitions")
    print(f"{'':<10} {'step CPU s':>10} {'step wall s':>11} {'seed-epochs/s':>14}")
    for k in steps:
        c, w = statistics.median(cpu[k]), statistics.median(wall[k])
        print(f"{k:<10} {c:10.3f} {w:11.3f} {n / c:14.2f}")

    def ratio(a: str, b: str, t: dict) -> float:
        return statistics.median(x / y for x, y in zip(t[a], t[b], strict=True))
    for a, b in [("naive", k) for k in engines] + [(engines[0], k) for k in engines[1:]]:
        print(f"{a} / {b}: CPU {ratio(a, b, cpu):.2f}×, wall {ratio(a, b, wall):.2f}×")
    for k in engines:
        share, ms = matmul_share(runs[k])
        print(f"{k}: matmul kernels {100 * share:.0f}% of a profiled step ({ms:.0f} ms), "
              f"the rest {100 * (1 - share):.0f}%")


if __name__ == "__main__":
    main()
