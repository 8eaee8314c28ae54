"""The whole command vs a plain script, and vs its own training alone (DESIGN §6, issue 13
goals 1–2).

Whole processes, wall time from process start to exit, same seeds, epochs and threads, at the
paper's config (2L, d_model 64, 2 heads, d_mlp 128, n = 10, V = 64, full batch 16,384, AdamW):
(a) ``python bench/naive_train.py --seeds S --epochs N``: a plain nn.Module +
    torch.optim.AdamW script, seeds one after another (bench/naive_model.py);
(b) ``python -m rulelab.cli train mpsp --seeds S --epochs N --lab <tmp> --quiet``: the command,
    with everything it does (imports, data, evaluations at 0 / every 10 / the end, metrics,
    checkpoints, registry).

Goal 2 (the command within 10% of its training alone at the paper's size) compares the command
with the same training alone: rulelab's MPSPTrainer over the same seeds, its epochs and nothing
else. Rates here differ by up to ±15% from one process to the next, more than the effect
measured, so both run in *this* process, alternating, each at two lengths — (c) the command
through its real entry point (:func:`rulelab.cli.main`), (d) the training alone — which
splits each wall time into a fixed part and a cost per epoch: wall(N) = fixed + N · marginal.
The command's fixed part is that plus its imports, timed as a process of their own. The paper's
runs are 15,000 epochs; the ratio printed there is (d)'s projected wall over (c)'s.

Prints wall seconds, seed-examples/s (training examples × epochs × seeds / wall), GFLOP/s
executed (3 × forward matmul FLOPs) and its share of the measured fp32 matmul peak, the ratio
b/a, and both splits with the projected ratio.

    python bench/command_throughput.py [--seeds 2] [--epochs 10] [--long 30] [--reps 1]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
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
PAPER_EPOCHS = 15_000
# What `rulelab train mpsp` imports before it trains: the CLI, torch, pandas (the store).
IMPORTS = "import rulelab.cli.app, rulelab.studies.shortcut_saturation.trainer, torch, pandas"


def timed(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t
    if done.returncode:
        raise SystemExit(f"error: {' '.join(cmd)} failed:\n{done.stderr}")
    return wall


def command_in_process(seeds: int, epochs: int) -> float:
    """(c): wall seconds of ``rulelab train mpsp`` run through its entry point here."""
    from rulelab.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        argv = ["rulelab", "train", "mpsp", "--seeds", str(seeds), "--epochs", str(epochs),
                "--lab", f"{tmp}/lab", "--quiet"]
        old, sys.argv = sys.argv, argv
        t = time.perf_counter()
        try:
            quiet = io.StringIO()
            with (contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet),
                  contextlib.suppress(SystemExit)):
                main()
        finally:
            sys.argv = old
        return time.perf_counter() - t


def training_alone(seeds: int, epochs: int) -> float:
    """(d): wall seconds of building the trainer (data, model) and its epochs, nothing else."""
    from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

    t = time.perf_counter()
    tr = MPSPTrainer([MPSPRunConfig(layers=2, seed=s, epochs=epochs) for s in range(seeds)],
                     None)
    for _ in range(epochs):
        tr.train_epoch()
    return time.perf_counter() - t


def split(short: int, long: int, walls: dict[int, float]) -> tuple[float, float]:
    """``(fixed, marginal)`` of wall(N) = fixed + N · marginal from two lengths."""
    marginal = (walls[long] - walls[short]) / (long - short)
    return walls[short] - short * marginal, marginal


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--long", type=int, default=0, help="the longer length; default 3 × --epochs")
    ap.add_argument("--reps", type=int, default=1, help="medians over this many alternations")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    S, N, long = args.seeds, args.epochs, args.long or 3 * args.epochs
    cfg = MPSPRunConfig(layers=2)
    f_naive, f_rulelab = flops_per_example(cfg, False), flops_per_example(cfg, True)
    peak = hardware.matmul_peak()
    print(f"paper 2L config, {S} seeds × {N} epochs × {cfg.n_train:,} examples, "
          f"{args.threads} threads, load avg {os.getloadavg()[0]:.2f}")

    naive = [sys.executable, str(ROOT / "bench" / "naive_train.py"), "--seeds", str(S),
             "--epochs", str(N)]
    whole: dict[str, list[float]] = {"(a) plain script": [], "(b) rulelab train mpsp": []}
    for _ in range(args.reps):
        whole["(a) plain script"].append(timed(naive, env))
        with tempfile.TemporaryDirectory() as tmp:  # a fresh lab: nothing to skip
            whole["(b) rulelab train mpsp"].append(timed(
                [sys.executable, "-m", "rulelab.cli", "train", "mpsp", "--seeds", str(S),
                 "--epochs", str(N), "--lab", f"{tmp}/lab", "--quiet"], env))
    imports = statistics.median(
        timed([sys.executable, "-c", IMPORTS], env) for _ in range(3))

    training_alone(S, 1)  # warm-up: this process's first trainer pays one-off costs
    inproc: dict[str, dict[int, list[float]]] = {"c": {N: [], long: []}, "d": {N: [], long: []}}
    for _ in range(args.reps):
        for epochs in (N, long):
            inproc["c"][epochs].append(command_in_process(S, epochs))
            inproc["d"][epochs].append(training_alone(S, epochs))
    walls = {k: {n: statistics.median(w) for n, w in v.items()} for k, v in inproc.items()}

    print(f"{'row':<46} {'wall s':>7} {'seed-ex/s':>10} {'exec GF/s':>9} {'% peak':>7}")
    rows = [(name, statistics.median(w), N, f_naive if name.startswith("(a)") else f_rulelab)
            for name, w in whole.items()]
    rows += [(f"({k}) {what}, in this process, {n} epochs", walls[k][n], n, f_rulelab)
             for k, what in (("c", "command"), ("d", "training alone")) for n in (N, long)]
    rate = {}
    for name, wall, n, f in rows:
        rate[name] = S * cfg.n_train * n / wall
        print(f"{name:<46} {wall:7.1f} {rate[name]:10,.0f} {rate[name] * f / 1e9:9.1f} "
              f"{100 * rate[name] * f / 1e9 / peak:6.1f}%")
    a, b = (rate[name] for name, *_ in rows[:2])
    print(f"command / plain script (b/a) = {b / a:.2f} (target ≥ 3)")

    fixed_c, per_c = split(N, long, walls["c"])
    fixed_d, per_d = split(N, long, walls["d"])
    fixed_c += imports
    print(f"command: {fixed_c:.1f} s fixed (imports {imports:.1f} s) + {per_c:.3f} s per epoch; "
          f"training alone: {fixed_d:.1f} s fixed + {per_d:.3f} s per epoch "
          f"(its per-epoch share: {per_d / per_c:.3f}; the command adds an evaluation every 10 "
          f"epochs, metrics and checkpoints)")
    at_paper = (fixed_d + PAPER_EPOCHS * per_d) / (fixed_c + PAPER_EPOCHS * per_c)
    print(f"at the paper's {PAPER_EPOCHS:,} epochs the command runs at {at_paper:.2f} × the "
          f"rate of its training alone (target ≥ 0.90)")
    print(f"fp32 peak {peak:.0f} GFLOP/s; load avg {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
