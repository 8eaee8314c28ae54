"""``rulelab.load(lab)``: a lab's runs and metrics as DataFrames for notebooks (DESIGN §3)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from rulelab.store.lab import Lab


class LabFrames(NamedTuple):
    runs: pd.DataFrame  # one row per run, see Lab.runs()
    metrics: pd.DataFrame  # long format: run_id, epoch, split, metric, value


def load(lab: str | Path | Lab | None = None) -> LabFrames:
    """Read an existing lab (path, ``$RULELAB_HOME`` or ``./rulelab-runs``); never creates one.

    Runs whose registry row cannot be trusted are left out, each with a Python warning naming
    it (:attr:`Lab.warnings`); a damaged metrics file raises :class:`StoreError`."""
    lab = lab if isinstance(lab, Lab) else Lab(lab, create=False)
    frames = LabFrames(runs=lab.runs(), metrics=lab.read_metrics())
    for line in lab.warnings:
        warnings.warn(line, stacklevel=2)
    lab.warnings.clear()
    return frames
