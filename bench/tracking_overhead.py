"""Cost of analyses tracked during training (issue: "tracking must not slow training > 20%").

In one process, the same ensemble is trained twice through the runner — once plain, once with
``--track gradients,fingerprints --track-every log`` — alternating A, B, A, B, and the wall
times are compared. Prints each time and the overhead of tracking as a percentage, then what
one tracking point costs per analysis, in seconds and in training epochs, measured side by side
on one trainer (so a loaded machine slows both alike), and the share of training time that
cost projects to at longer runs (the log schedule's points thin out: ~8 per decade).

    python bench/tracking_overhead.py [--epochs 400] [--seeds 8] [--reps 2] [--threads 1]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch

from rulelab.engine.runner import trainer_class
from rulelab.engine.tracking import track_epochs
from rulelab.settings import Settings
from rulelab.store import Lab
from rulelab.studies import task
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.sweep.driver import run_configs

TRACKED = ("gradients", "fingerprints")


def timed_run(configs, track: tuple[str, ...]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(tmp, create=True)
        opts = Settings(track=track, checkpoint_every=10**7, quiet=True)
        t0 = time.perf_counter()
        run_configs(configs, lab, experiment="bench", settings=opts)
        return time.perf_counter() - t0


def point_costs(configs, reps: int = 3) -> dict[str, float]:
    """Seconds of one training epoch and of each tracked analysis at one point (best of
    ``reps``, alternating), on one trainer a few epochs in."""
    trainer = trainer_class(configs[0].task)([c.model_copy(update={"epochs": 3})
                                             for c in configs], Settings(quiet=True))
    trainer.fit()
    fns = {n: task(configs[0].task).tracker(n) for n in TRACKED}
    best: dict[str, float] = {}
    for _ in range(reps):
        trainer.model.train()
        t0 = time.perf_counter()
        trainer.train_epoch()
        best["epoch"] = min(best.get("epoch", float("inf")), time.perf_counter() - t0)
        trainer.model.eval()  # as the tracker runs them
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn(trainer)
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=400)
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    configs = [MPSPRunConfig(layers=2, heads=2, seq_len=6, vocab=16, n_train=2048, n_eval=1024,
                             epochs=args.epochs, eval_every=10, ratio=r, seed=s)
               for r in (0.5, 0.9) for s in range(args.seeds // 2)]
    n_points = len(track_epochs(args.epochs, "log"))
    plain, tracked = [], []
    for _ in range(args.reps):
        plain.append(timed_run(configs, ()))
        tracked.append(timed_run(configs, TRACKED))
    a, b = min(plain), min(tracked)
    print(f"{len(configs)} members × {args.epochs} epochs (2L, n_train 2048); "
          f"tracking at {n_points} log-spaced epochs")
    print(f"plain   {a:7.1f} s   (runs: {', '.join(f'{t:.1f}' for t in plain)})")
    print(f"tracked {b:7.1f} s   (runs: {', '.join(f'{t:.1f}' for t in tracked)})")
    print(f"tracking overhead: {100 * (b / a - 1):+.1f}%  (target ≤ +20%)")
    cost = point_costs(configs)
    parts = ", ".join(f"{n} {cost[n]:.2f} s ({cost[n] / cost['epoch']:.1f} epochs)"
                      for n in TRACKED)
    print(f"one tracking point: {parts}; one epoch {cost['epoch']:.2f} s")
    # A log schedule has ~8 points per decade, so the share falls as runs get longer: project
    # it from the per-point cost (an upper bound at larger n_train, where the per-example
    # norms and fingerprints, on fixed-size samples, cost fewer epochs).
    point = sum(cost[n] for n in TRACKED) / cost["epoch"]  # epochs per tracking point
    shares = ", ".join(f"{t} epochs {100 * len(track_epochs(t, 'log')) * point / t:+.1f}%"
                       for t in (args.epochs, 400, 15000))
    print(f"tracking share of training time, projected from that cost: {shares}")


if __name__ == "__main__":
    main()
