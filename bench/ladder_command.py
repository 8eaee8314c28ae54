"""The scale ladder's runs as whole commands: rulelab vs a plain per-seed script (issue 25
goal 4), rung by rung.

For each rung of study S's ladder (``recipes/ladder-*.yaml``: 2L, n = 10, V = 64, 2 heads, full
batch, lr 1e-3, wd 0.1, r 0.9, evaluations every 25 epochs as the recipes), whole processes
timed from start to exit, alternating:
(a) ``python bench/naive_train.py``: a plain nn.Module + torch.optim.AdamW script, seeds one
    after another, evaluating train / val / adv on the same schedule (what a user writes);
(b) ``rulelab train mpsp`` with the rung's flags into a fresh lab: everything it does (data,
    evaluations, metrics, checkpoints, registry), the default engine (12: the transformer's
    step depth first, :mod:`rulelab.models.tile_step`, evaluated through its own forward) —
    chunks side by side, one per core;
(c) the same with ``--engine compiled`` (engine 5); its first run fills inductor's on-disk
    cache, so it is timed once cold (printed) and then warm (as is (g));
(d) the same with ``--engine 7`` (the transformer's eager engine before 8);
(e) the same with ``--engine 4`` (before 7); (h) with ``--engine 8`` (before 9); (i) with
    ``--engine 9`` (before 10: engine 10's kernels in passes of 512); (j) with ``--engine 10``
    (before 11: op by op, in passes sized to the model);
(f) the default engine with ``--precision bf16`` (engine 12's bf16 matmuls, VDPBF16PS; allowed
    where the CPU multiplies bf16 natively: AMX or AVX-512-BF16; refused elsewhere); (g) the
    compiled engine with ``--precision bf16``.
Prints wall seconds, seed-epochs per second and the ratio to (a). Run on an idle machine.

    python bench/ladder_command.py [--rungs 2k,4k,8k] [--seeds 8] [--epochs 150] [--reps 1]
    python bench/ladder_command.py --rungs paper --seeds 4 --epochs 10 --paths abd
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# N, d_model, d_mlp: the rungs, and the paper's own size (issue 25 goal 2, the same comparison)
COMPILED = "cg"  # the paths whose first run compiles (timed apart, once)
RUNGS = {"2k": (2048, 24, 48), "4k": (4096, 32, 64), "8k": (8192, 48, 96),
         "paper": (16384, 64, 128)}


def timed(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"error: {' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - t


def commands(rung: str, seeds: int, epochs: int, lab: str) -> dict[str, list[str]]:
    n, d, f = RUNGS[rung]
    shape = ["--d-model", str(d), "--d-mlp", str(f), "--n-train", str(n), "--ratio", "0.9",
             "--eval-every", "25"]
    rulelab = [sys.executable, "-m", "rulelab.cli", "train", "mpsp", "--layers", "2",
               "--heads", "2", "--seeds", str(seeds), "--epochs", str(epochs), "--quiet",
               "--lab", lab, *shape]
    return {"a": [sys.executable, str(ROOT / "bench" / "naive_train.py"), "--seeds", str(seeds),
                  "--epochs", str(epochs), *shape],
            "b": rulelab, "c": [*rulelab, "--engine", "compiled"], "d": [*rulelab, "--engine", "7"],
            "e": [*rulelab, "--engine", "4"], "f": [*rulelab, "--precision", "bf16"],
            "g": [*rulelab, "--engine", "compiled", "--precision", "bf16"],
            "h": [*rulelab, "--engine", "8"], "i": [*rulelab, "--engine", "9"],
            "j": [*rulelab, "--engine", "10"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rungs", default="2k,4k,8k")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=150)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--paths", default="abhc", help="which of a–j to time")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "bench"),
                                                         os.environ.get("PYTHONPATH", "")])}
    print(f"{args.seeds} seeds × {args.epochs} epochs per rung, {os.cpu_count()} CPUs, "
          f"load avg {os.getloadavg()[0]:.2f}")
    print(f"{'rung':<5} {'path':<28} {'wall s':>7} {'seed-ep/s':>9} {'vs plain':>8}")
    for rung in args.rungs.split(","):
        walls: dict[str, list[float]] = {p: [] for p in args.paths}
        cold: dict[str, float] = {}
        for path in (p for p in args.paths if p in COMPILED):  # fill inductor's on-disk cache
            with tempfile.TemporaryDirectory() as tmp:
                cold[path] = timed(commands(rung, args.seeds, args.epochs, f"{tmp}/lab")[path], env)
        for _ in range(args.reps):
            for path in args.paths:
                with tempfile.TemporaryDirectory() as tmp:
                    cmd = commands(rung, args.seeds, args.epochs, f"{tmp}/lab")[path]
                    walls[path].append(timed(cmd, env))
        med = {p: statistics.median(w) for p, w in walls.items() if w}
        names = {"a": "(a) plain per-seed script", "b": "(b) rulelab train (engine 12)",
                 "c": "(c) rulelab --engine compiled", "d": "(d) rulelab --engine 7",
                 "e": "(e) rulelab --engine 4", "f": "(f) rulelab bf16 (engine 12)",
                 "g": "(g) rulelab compiled bf16", "h": "(h) rulelab --engine 8",
                 "i": "(i) rulelab --engine 9", "j": "(j) rulelab --engine 10"}
        for p, wall in med.items():
            ratio = f"{med['a'] / wall:7.2f}×" if "a" in med else ""
            print(f"{rung:<5} {names[p]:<28} {wall:7.1f} {args.seeds * args.epochs / wall:9.2f} "
                  f"{ratio:>8}")
        for path, wall in cold.items():
            print(f"{rung:<5} {f'({path}) first run, cold cache':<28} {wall:7.1f}")
    print(f"load avg {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
