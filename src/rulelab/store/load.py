"""``rulelab.load(lab)``: a lab's runs and metrics as DataFrames for notebooks (DESIGN §3)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pandas as pd

from rulelab.store.lab import Lab


class LabFrames(NamedTuple):
    runs: pd.DataFrame  # one row per run, see Lab.runs()
    metrics: pd.DataFrame  # long format: run_id, epoch, split, metric, value


def load(lab: str | Path | Lab | None = None) -> LabFrames:
    """Read an existing lab (path, ``$RULELAB_HOME`` or ``./rulelab-runs``); never creates one."""
    lab = lab if isinstance(lab, Lab) else Lab(lab, create=False)
    return LabFrames(runs=lab.runs(), metrics=lab.read_metrics())
