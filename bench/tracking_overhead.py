"""Cost of analyses tracked during training (issue: "tracking must not slow training > 20%").

In one process, the same ensemble is trained twice through the runner — once plain, once with
``--track gradients,fingerprints --track-every log`` — alternating A, B, A, B, and the wall
times are compared. Prints each time and the overhead of tracking as a percentage.

    python bench/tracking_overhead.py [--epochs 400] [--seeds 8] [--reps 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch

from rulelab.settings import Settings
from rulelab.store import Lab
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.sweep.driver import run_configs
from rulelab.train.tracking import track_epochs


def timed_run(configs, track: tuple[str, ...]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(tmp, create=True)
        opts = Settings(track=track, checkpoint_every=10**7, quiet=True)
        t0 = time.perf_counter()
        run_configs(configs, lab, experiment="bench", settings=opts)
        return time.perf_counter() - t0


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
        tracked.append(timed_run(configs, ("gradients", "fingerprints")))
    a, b = min(plain), min(tracked)
    print(f"{len(configs)} members × {args.epochs} epochs (2L, n_train 2048); "
          f"tracking at {n_points} log-spaced epochs")
    print(f"plain   {a:7.1f} s   (runs: {', '.join(f'{t:.1f}' for t in plain)})")
    print(f"tracked {b:7.1f} s   (runs: {', '.join(f'{t:.1f}' for t in tracked)})")
    print(f"tracking overhead: {100 * (b / a - 1):+.1f}%  (target ≤ +20%)")


if __name__ == "__main__":
    main()
