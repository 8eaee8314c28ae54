"""Study M throughput: a width-512 ensemble of 8 members vs 8 single runs, and its roofline
(issue 13 goal 4; DESIGN §6).

Same work both ways (P = 97, train fraction 0.5 → N = 4,704 pairs, full batch, AdamW, micro-batch
512 examples per member): 8 runs trained as one ensemble, and the same 8 runs trained one after
another. Prints seed-steps/s for each and the ratio, alternating the two (A, B, A, B) in one
process, then the roofline that bounds the ratio:

- per member-step the work is the same both ways: 6·N·M·P matmul FLOPs executed (forward
  ``h Wᵀ``, backward ``dW`` and ``dh``; ``U e_a + V e_b`` is a gather, not a matmul) and about
  12 passes of 4·M bytes per example over the elementwise work (gather, add, φ, their backward,
  the embedding scatter-add) — ≈ 48·N·M bytes;
- the floors on this machine: FLOPs / measured fp32 matmul peak, bytes / measured copy
  bandwidth (rulelab.hardware);
- the step time as a line in the ensemble size, t(E) = a + b·E, through the single run (E = 1)
  and the ensemble: ``a`` is the part that does not grow with members (Python, dispatch, the
  optimizer's per-tensor calls) — all an ensemble can save on a CPU, where nothing else is
  amortized (no kernel launches; the same FLOPs and bytes per member) — so ensemble / single
  ≤ t(1) / b for any E; and ≤ t(1) / floor for any code running at the peaks;
- a GPU is different: a single run's step is a few hundred kernels (counted here) of a few µs
  each around ~1.4 GFLOP that an H200 does in tens of µs, so single runs are launch-bound and
  an ensemble of E members amortizes the launches (bench/gpu_check.sh measures it).

    python bench/modular_throughput.py [--steps 40] [--members 8] [--width 512]
"""

from __future__ import annotations

import argparse
import math
import os
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from rulelab import hardware
from rulelab.settings import DEFAULT_MICRO_BATCH
from rulelab.studies.coexistence.config import ModularRunConfig
from rulelab.studies.coexistence.trainer import ModularTrainer


def seconds_per_step(configs, steps: int) -> float:
    trainer = ModularTrainer(configs)
    trainer.train_epoch()  # warm-up
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.train_epoch()
    return (time.perf_counter() - t0) / steps


class CountOps(TorchDispatchMode):
    """Counts the aten operators dispatched (≈ kernels a GPU would launch)."""

    n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def ops_per_step(config) -> int:
    trainer = ModularTrainer([config])
    trainer.train_epoch()
    with CountOps() as count:
        trainer.train_epoch()
    return count.n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--members", type=int, default=8)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    configs = [ModularRunConfig(p=97, width=args.width, noise=0.5, seed=s, epochs=10**6)
               for s in range(args.members)]
    ens, single = [], []
    for _ in range(2):
        ens.append(args.members / seconds_per_step(configs, args.steps))
        times = [seconds_per_step([c], args.steps) for c in configs]
        single.append(len(times) / sum(times))  # 8 runs back to back
    e, s = max(ens), max(single)
    print(f"P=97, width {args.width}, {args.members} members, {args.threads} threads, "
          f"load avg {os.getloadavg()[0]:.2f}")
    shown = lambda xs: ", ".join(f"{x:.1f}" for x in xs)  # noqa: E731
    print(f"ensemble of {args.members}: {e:8.1f} seed-steps/s  ({shown(ens)})")
    print(f"{args.members} single runs: {s:8.1f} seed-steps/s  ({shown(single)})")
    print(f"ensemble / single = {e / s:.2f}")

    # --- roofline -----------------------------------------------------------------------------
    c = configs[0]
    N, M, P = ModularTrainer([c]).data.train_x.shape[1], c.width, c.p
    mb = DEFAULT_MICRO_BATCH
    passes = math.ceil(N / mb)
    flops, nbytes = 6 * N * M * P, 48 * N * M
    peak, bw = hardware.matmul_peak(), hardware.memory_bandwidth()
    t_single, t_ens = 1 / s, 1 / e  # seconds per member-step
    E = args.members  # step time t(E) = a + b·E through (1, t_single) and (E, E·t_ens)
    b = max((E * t_ens - t_single) / max(E - 1, 1), 1e-9)
    a = t_single - b
    t_floor = max(flops / peak / 1e9, nbytes / bw / 1e9)
    kernels = ops_per_step(c)
    print(f"\nroofline per member-step (N = {N:,} pairs, {passes} micro-batches of {mb}):")
    print(f"  floors: matmul {flops / 1e9:.2f} GFLOP at the fp32 peak {peak:.0f} GFLOP/s ≥ "
          f"{1e3 * flops / peak / 1e9:.1f} ms; elementwise ≈ {nbytes / 1e6:.0f} MB at copy "
          f"bandwidth {bw:.1f} GB/s ≥ {1e3 * nbytes / bw / 1e9:.1f} ms")
    print(f"  measured: single run {1e3 * t_single:.1f} ms ({flops / t_single / 1e9:.0f} "
          f"GFLOP/s, {100 * flops / t_single / 1e9 / peak:.0f}% of peak); ensemble of {E} "
          f"{1e3 * t_ens:.1f} ms per member")
    print(f"  step time t(E) = a + b·E: a = {1e3 * a:.1f} ms shared (Python, dispatch, "
          f"optimizer calls: all an ensemble can amortize on a CPU), b = {1e3 * b:.1f} ms per "
          f"member (the same FLOPs and bytes as a single run)")
    print(f"  → ensemble / single ≤ {t_single / b:.2f} for any E on this CPU. Faster kernels "
          f"(a single run is {t_single / t_floor:.1f}× above its floors) would speed single runs "
          f"and ensembles alike: per member they do the same work, so the ratio stays bounded by "
          f"the shared part")
    print(f"  a GPU: {kernels} kernels per single-run step (≈ {kernels * 5e-3:.1f} ms of launches "
          f"at an assumed ~5 µs each) vs {flops / 1e9:.2f} GFLOP (≈ {1e3 * flops / 50e12:.3f} ms "
          f"at an assumed 50 TFLOP/s): single runs are launch-bound there, so an ensemble of E "
          f"members amortizes the launches up to E-fold until it is compute-bound (measured by "
          f"bench/gpu_check.sh)")


if __name__ == "__main__":
    main()
