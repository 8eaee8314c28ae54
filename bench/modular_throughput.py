"""Study M throughput: a width-512 ensemble of 8 members vs 8 single runs (issue 3 note).

Same work both ways (P=97, train fraction 0.5, full batch, AdamW): 8 runs trained as one
ensemble, and the same 8 runs trained one after another. Prints seed-steps/s for each and the
ratio, alternating the two (A, B, A, B) in one process.

    python bench/modular_throughput.py [--steps 40] [--members 8] [--width 512]
"""

from __future__ import annotations

import argparse
import time

import torch

from rulelab.config import ModularRunConfig
from rulelab.train.modular import ModularTrainer


def seed_steps_per_s(configs, steps: int) -> float:
    trainer = ModularTrainer(configs)
    trainer.train_epoch()  # warm-up
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.train_epoch()
    return len(configs) * steps / (time.perf_counter() - t0)


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
        ens.append(seed_steps_per_s(configs, args.steps))
        rates = [seed_steps_per_s([c], args.steps) for c in configs]
        single.append(len(rates) / sum(1 / r for r in rates))  # 8 runs back to back
    e, s = max(ens), max(single)
    print(f"P=97, width {args.width}, {args.members} members, {args.threads} threads")
    shown = lambda xs: ", ".join(f"{x:.1f}" for x in xs)  # noqa: E731
    print(f"ensemble of {args.members}: {e:8.1f} seed-steps/s  ({shown(ens)})")
    print(f"{args.members} single runs: {s:8.1f} seed-steps/s  ({shown(single)})")
    print(f"ensemble / single = {e / s:.2f}")


if __name__ == "__main__":
    main()
