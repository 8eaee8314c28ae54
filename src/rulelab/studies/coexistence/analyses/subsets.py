"""How many clean and noisy training examples a study-M run has, from its config (SPEC M.1,
M.4.7) — the sizes the early lead's sampling noise depends on (:mod:`.analyses.early_lead`).

The arithmetic is the data builders' own, without building the data:

- modular (:func:`rulelab.studies.coexistence.modular_task.make_modular`):
  ``K² = (P − drop_zero)²`` pairs,
  ``n_train = min(K², max(1, ⌊f·K² + ½⌋))``;
- digits (:func:`rulelab.studies.coexistence.digits_task.make_digits`): scikit-learn's 1,797
  images less
  ``round(test_frac·1797)`` held out, or MNIST's 60,000; the first ``n_train`` when it is > 0;

and in both ``n_noisy = ⌊α·n_train + ½⌋``. A config column the runs frame lacks takes the
config's default (a frame without ``train_frac`` was run at the default).
"""

from __future__ import annotations

import math

import pandas as pd

SKLEARN_DIGITS = 1797  # scikit-learn's bundled 8×8 digits
MNIST_TRAIN = 60_000


def _noisy(noise: float, n_train: int) -> int:
    return int(math.floor(noise * n_train + 0.5))


def modular_sizes(p: int, train_frac: float, noise: float, drop_zero: bool = False
                  ) -> tuple[int, int]:
    """``(n_clean, n_noisy)`` of a modular run."""
    k2 = (int(p) - bool(drop_zero)) ** 2
    n_train = min(k2, max(1, int(math.floor(train_frac * k2 + 0.5))))
    n_noisy = _noisy(noise, n_train)
    return n_train - n_noisy, n_noisy


def digits_sizes(noise: float, source: str = "sklearn", n_train: int = 0,
                 test_frac: float = 0.2) -> tuple[int, int]:
    """``(n_clean, n_noisy)`` of a digits run."""
    if source == "mnist":
        total = MNIST_TRAIN
    else:
        total = SKLEARN_DIGITS - int(round(test_frac * SKLEARN_DIGITS))
    n = int(n_train) if n_train else total
    n_noisy = _noisy(noise, n)
    return n - n_noisy, n_noisy


def _defaults(task: str) -> dict:
    from rulelab.study_registry import tasks

    known = tasks()
    if task not in known:
        return {}
    return {k: f.default for k, f in known[task].config.model_fields.items()}


def subset_sizes(runs: pd.DataFrame) -> pd.DataFrame:
    """``run_id, n_clean, n_noisy`` per run of ``runs`` (modular or digits, by its ``task``
    column; without one, modular when the frame has ``p``); NaN for other tasks."""
    rows = []
    for rec in runs.to_dict("records"):
        task = rec.get("task") or ("modular" if "p" in rec else "")
        cfg = _defaults(task)
        cfg.update({k: v for k, v in rec.items() if k in cfg and not _missing(v)})
        if task == "modular":
            sizes = modular_sizes(cfg["p"], cfg["train_frac"], cfg["noise"], cfg["drop_zero"])
        elif task == "digits":
            sizes = digits_sizes(cfg["noise"], cfg["source"], cfg["n_train"], cfg["test_frac"])
        else:
            sizes = (math.nan, math.nan)
        rows.append({"run_id": rec["run_id"], "n_clean": sizes[0], "n_noisy": sizes[1]})
    return pd.DataFrame(rows, columns=["run_id", "n_clean", "n_noisy"])


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))
