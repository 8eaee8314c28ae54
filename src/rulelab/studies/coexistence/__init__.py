"""Study M, "memorization–generalization coexistence" (SPEC M): two-layer networks on modular
arithmetic with label noise — the rule and the memorized noise in one network — and its
learning-order experiment on digits / MNIST (SPEC M.4.7), a second task of the study.

Everything particular to study M is in this package:

- ``config.py`` (modular × MLP × full batch, SPEC M.1–M.3, with the log-spaced evaluation
  schedule), ``trainer.py`` (data, losses, the summary and the ensemble trainer), ``dataset.py``
  (data checks and ``rulelab data modular``);
- ``digits_config.py`` / ``digits.py``: the digits / MNIST task (SPEC M.4.7);
- ``cost.py`` (the planner's estimates); ``analysis/`` (FF, neurons, swap, analytic solution,
  learning order, double descent, findings, scale: SPEC M.4) and ``commands.py``
  (``rulelab analyze …``);
- ``views.py`` (tables and curves), ``figures.py`` and ``report.py`` (the study's report page),
  ``reproduce.py``; ``recipes/`` (tiny, quick, paper, variants).
"""

from pathlib import Path

from rulelab.studies.coexistence.analyses import ANALYSES
from rulelab.studies.coexistence.config import ModularRunConfig
from rulelab.studies.coexistence.cost import digits_cost, modular_cost
from rulelab.studies.coexistence.dataset import (
    DIGITS_AXES,
    MODULAR_DATA_FIELDS,
    check_digits,
    digits_flags,
)
from rulelab.studies.coexistence.digits_config import DigitsRunConfig
from rulelab.study import Calibration, Claim, DataCommand, Study, Task

_HERE = "rulelab.studies.coexistence"

MODULAR = Task(
    name="modular",
    config=ModularRunConfig,
    trainer=f"{_HERE}.trainer:ModularTrainer",
    data_builder=f"{_HERE}.trainer:build_data",
    model_builder=f"{_HERE}.trainer:build_model",
    cost=modular_cost,
    # bench/gpu_check.sh on one H200 (docs/performance.md, "On a GPU"): P = 113, width 4097,
    # E = 8–64, the fits' sustained rate and cost a pass
    gpu_flops={"fp32": 20.5e12, "bf16": 23.9e12, "tf32": 22.2e12},
    gpu_pass_s=1.7e-3,
    gpu_measured="one H200, 2026-12-04",
    views=f"{_HERE}.views:MODULAR",
    help="Train modular-arithmetic MLPs over a grid of values × seeds (docs/methods.md § "
         "M.2–M.3). Runs that share every shape field (P, width, activation, optimizer, …) "
         "train as one ensemble.",
    axes=("width", "activation", "optimizer", "noise", "weight_decay", "lr", "data_seed"),
    defaults={"momentum": None, "nesterov": None},  # by optimizer (ModularRunConfig)
    shape_flags="--width/--p",
    checkpoint_every=1000,
    # analyses of the live ensemble (the same functions `rulelab analyze` runs on stored runs)
    trackers={n: f"{_HERE}.analyses.tables:{n}_table" for n in ("ff", "swap", "neurons")},
    data=DataCommand(MODULAR_DATA_FIELDS, make=f"{_HERE}.dataset:modular_data",
                     write=f"{_HERE}.dataset:write_modular"),
)

DIGITS = Task(
    name="digits",
    config=DigitsRunConfig,
    trainer=f"{_HERE}.digits_trainer:DigitsTrainer",
    data_builder=f"{_HERE}.digits_trainer:stack_digits",
    model_builder=f"{_HERE}.digits_trainer:build_model",
    cost=digits_cost,
    views=f"{_HERE}.views:DIGITS",
    help="Digits / MNIST learning order: a 3-layer MLP, full batch, label noise "
         "(docs/methods.md § M.4.7).",
    axes=DIGITS_AXES,
    defaults={"noise": [0.05, 0.2]},
    hidden=("source",),
    prepare=digits_flags,
    check=check_digits,
    shape_flags="--hidden/--n-train",
    checkpoint_every=100,
    path_fields=("mnist_dir",),
)

STUDY = Study(
    name="coexistence",
    title="Memorization–generalization coexistence",
    tasks=(MODULAR, DIGITS),
    recipes=Path(__file__).parent / "recipes",
    reproduce=f"{_HERE}.reproduce:reproduce",
    analyses=ANALYSES,
    claims=(  # read at every scale by `rulelab scale-map coexistence` (claims.py)
        Claim("M1", "coexistence: the trained network memorizes the noisy labels and still "
              "generalizes, better with width, even at α = 0.8", f"{_HERE}.claims:coexistence"),
        Claim("M2", "frequency filtering: FF's G network is near-perfect on test at α = 0.8",
              f"{_HERE}.claims:frequency_filtering"),
    ),
    calibrations=(  # `rulelab calibrate coexistence`: each detector against its null
        Calibration("double-descent dip", "`analyze dd`: test accuracy dips at an interior "
                    "width", f"{_HERE}.analyses.calibrations:dip_check"),
        Calibration("M1 verdict", "the scale map's 'shows': the widest interpolating width's "
                    "seed range above the narrowest's, mean test ≥ 50%",
                    f"{_HERE}.analyses.claim_null:m1_check"),
        Calibration("noisy-first lead", "`analyze order`: noisy-train accuracy leads clean-train "
                    "early, beyond its lead at init", f"{_HERE}.analyses.calibrations:lead_check"),
    ),
)
