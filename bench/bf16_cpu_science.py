"""bf16 vs fp32 on study S's science, on this CPU (issue 13, goal 3).

Trains one recipe twice into two labs, once per precision, one after the other, then compares
the runs' outcomes with ``bench/bf16_outcomes.py``. ``rulelab`` refuses ``--precision bf16`` on
a CPU without native bf16 matmul (AMX or AVX-512-BF16) because emulated bf16 is slower than
fp32; this bench goes around that refusal on purpose: autocast rounds the matmul inputs to bf16
and accumulates in fp32 whether the hardware is native or emulated, so the *readings* it
produces are those a bf16 run would give on AMX hardware — only the speed is not.

    python bench/bf16_cpu_science.py OUT [--recipe shortcut-saturation/quick]
    python bench/bf16_cpu_science.py OUT --recipe coexistence/quick   # then order and ff

Study S's quick preset: ≈ 3 min in fp32 and ≈ 2× that in emulated bf16 on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

import rulelab
from bf16_outcomes import main as compare
from rulelab.cli.execute import execute
from rulelab.cli.sweep import recipe_path
from rulelab.store.lab_dir import LabDir
from rulelab.sweep import load_recipe

STUDY_M_ANALYSES = ("order", "ff")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder for the two labs")
    ap.add_argument("--recipe", default="shortcut-saturation/quick")
    args = ap.parse_args()
    recipe = load_recipe(recipe_path(Path(args.recipe)))
    labs = {}
    for precision in ("fp32", "bf16"):
        settings = recipe.execution.merged(precision=precision, quiet=True)
        labs[precision] = args.out / f"{args.recipe.replace('/', '-')}-{precision}"
        start = time.perf_counter()
        _, result = execute(recipe, settings, LabDir.at(labs[precision]), command="sweep")
        print(f"{precision}: {result.done} runs done, {result.failed} failed in "
              f"{time.perf_counter() - start:.0f} s ({torch.get_num_threads()} threads) → "
              f"{labs[precision]}", flush=True)
        for name in STUDY_M_ANALYSES if recipe.task == "modular" else ():
            rulelab.load(labs[precision]).analyze(name, save=True)  # bf16_outcomes.py reads them
    compare(str(labs["fp32"]), str(labs["bf16"]))


if __name__ == "__main__":
    main()
