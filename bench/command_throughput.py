"""The whole command vs a plain script, as whole processes (DESIGN §6, issue 13 goals 1–2).

(a) ``python bench/naive_train.py --seeds S --epochs N``: a plain nn.Module +
    torch.optim.AdamW script, seeds one after another (bench/naive_model.py);
(b) ``python -m rulelab.cli train mpsp --seeds S --epochs N --lab <tmp> --quiet``: the command,
    with everything it does (imports, data, evaluations at 0 / every 10 / the end, metrics,
    checkpoints, registry).
Both at the paper's config (2L, d_model 64, 2 heads, d_mlp 128, n = 10, V = 64, full batch
16,384, AdamW), same seeds and epochs, same thread count; wall time from process start to exit.
(c) In-process reference: rulelab's MPSPTrainer over the same seeds, timed epochs only
    (no start-up, data or evaluation), in a fresh process of its own like (a) and (b) (rates
    here differ by up to ±15% from one process to the next): goal 2 asks (b) to be within 10%
    of it at the paper's size.
(d) The command again with ``--long`` epochs (default 3 × --epochs). The two command lengths
    split its wall time into a fixed part (start-up: imports, data, the first evaluation, the
    store) and a marginal cost per epoch (training, one evaluation every 10 epochs, metrics,
    checkpoints): wall(N) = fixed + N · marginal. The paper's runs are 15,000 epochs, so there
    the command's rate is the in-process rate × in-process epoch time / marginal epoch time,
    with the fixed part spread over 15,000 epochs; the bench prints that ratio too.

Prints wall seconds, seed-examples/s (training examples × epochs × seeds / wall), GFLOP/s
executed (3 × forward matmul FLOPs) and its share of the measured fp32 matmul peak, and the
ratios b/a and b/c. Runs alternate a, b, a, b when --reps 2.

    python bench/command_throughput.py [--seeds 2] [--epochs 10] [--long 30] [--reps 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from naive_model import flops_per_example
from rulelab import hardware
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t
    if done.returncode:
        raise SystemExit(f"error: {' '.join(cmd)} failed:\n{done.stderr}")
    return wall


def in_process_rate(cfgs, epochs: int) -> float:
    """Seed-examples/s of train_epoch() alone (one untimed warm-up epoch first)."""
    from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

    tr = MPSPTrainer(cfgs, None)
    tr.train_epoch()
    t = time.perf_counter()
    for _ in range(epochs):
        tr.train_epoch()
    return len(cfgs) * cfgs[0].n_train * epochs / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--long", type=int, default=0, help="epochs of (d); default 3 × --epochs")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--in-process", action="store_true", help="(c) only: print its rate")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    cfgs = [MPSPRunConfig(layers=2, seed=s, epochs=args.epochs) for s in range(args.seeds)]
    if args.in_process:
        print(in_process_rate(cfgs, min(args.epochs, 4)))
        return
    f_naive, f_rulelab = flops_per_example(cfgs[0], False), flops_per_example(cfgs[0], True)
    peak = hardware.matmul_peak()
    print(f"paper 2L config, {args.seeds} seeds × {args.epochs} epochs × {cfgs[0].n_train:,} "
          f"examples, {args.threads} threads, load avg {os.getloadavg()[0]:.2f}")
    naive = [sys.executable, str(ROOT / "bench" / "naive_train.py"), "--seeds", str(args.seeds),
             "--epochs", str(args.epochs)]
    long = args.long or 3 * args.epochs
    walls: dict[str, list[float]] = {"(a) plain script": [], "(b) rulelab train mpsp": [],
                                     f"(d) the same, {long} epochs": []}

    def command(epochs: int) -> float:
        with tempfile.TemporaryDirectory() as tmp:
            return timed([sys.executable, "-m", "rulelab.cli", "train", "mpsp", "--seeds",
                          str(args.seeds), "--epochs", str(epochs), "--lab", f"{tmp}/lab",
                          "--quiet"], env)

    for _ in range(args.reps):
        walls["(a) plain script"].append(timed(naive, env))
        walls["(b) rulelab train mpsp"].append(command(args.epochs))
        walls[f"(d) the same, {long} epochs"].append(command(long))
    inproc = float(subprocess.run(
        [sys.executable, __file__, "--in-process", "--seeds", str(args.seeds), "--epochs",
         str(args.epochs), "--threads", str(args.threads)], env=env, capture_output=True,
        text=True, check=True, cwd=ROOT).stdout.split()[-1])
    rows = [(name, args.seeds * cfgs[0].n_train * (long if name.startswith("(d)") else args.epochs)
             / min(w), f_naive if name.startswith("(a)") else f_rulelab, min(w))
            for name, w in walls.items()]
    rows.append(("(c) rulelab in-process epochs", inproc, f_rulelab, float("nan")))
    print(f"{'row':<32} {'wall s':>7} {'seed-ex/s':>10} {'exec GF/s':>9} {'% peak':>7}")
    for name, rate, f, wall in rows:
        print(f"{name:<32} {wall:7.1f} {rate:10,.0f} {rate * f / 1e9:9.1f} "
              f"{100 * rate * f / 1e9 / peak:6.1f}%")
    a, b = rows[0][1], rows[1][1]
    # wall(N) = fixed + N · marginal, from the two command lengths (b) and (d).
    short_wall, long_wall = rows[1][3], rows[2][3]
    marginal = (long_wall - short_wall) / (long - args.epochs)
    fixed = short_wall - args.epochs * marginal
    epoch_in_process = args.seeds * cfgs[0].n_train / inproc
    paper_epochs = 15_000
    at_paper = paper_epochs * epoch_in_process / (fixed + paper_epochs * marginal)
    print(f"command / plain script (b/a) = {b / a:.2f} (target ≥ 3); command / in-process "
          f"(b/c) = {b / inproc:.2f} at {args.epochs} epochs")
    print(f"the command's wall time = {fixed:.1f} s fixed + {marginal:.3f} s per epoch "
          f"(in-process {epoch_in_process:.3f} s: ×{marginal / epoch_in_process:.3f}, with an "
          f"evaluation every 10 epochs); at the paper's {paper_epochs:,} epochs, command / "
          f"in-process = {at_paper:.2f} (target ≥ 0.90)")
    print(f"fp32 peak {peak:.0f} GFLOP/s; load avg {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
