"""How sparse-parity runs read in ``rulelab runs``, ``status`` and the report
(:class:`rulelab.report.views.RunsView`): the rate is the share of runs that *learned* (eval
accuracy ≥ 99% at an evaluation, with its 95% Wilson interval), beside the median
steps-to-learn with its range and the median hidden-progress step; the report adds
steps-to-learn vs n and the hidden-progress curves (:mod:`.figures`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rulelab.analysis.stats import rate_table
from rulelab.report.views import RunsView


def _cells(runs: pd.DataFrame, by: list[str], table: pd.DataFrame, column: str,
           with_range: bool) -> list[str]:
    out = []
    for _, row in table.iterrows():
        sel = runs[runs["status"] == "done"] if "status" in runs.columns else runs
        for c in by:
            sel = sel[sel[c] == row[c]]
        v = pd.to_numeric(sel.get(column, pd.Series(dtype=float)), errors="coerce").dropna()
        if not len(v):
            out.append("–")
            continue
        cell = f"{np.median(v):,.0f}"
        out.append(f"{cell} [{v.min():,.0f}–{v.max():,.0f}]" if with_range else cell)
    return out


class SparseParityView(RunsView):
    title = "learned: eval accuracy ≥ 99% at an evaluation"
    rate_head = "learned [95% CI] (k/n)"
    word = "learned"
    replaces_rate_table = True  # the steps table (:mod:`.reproduce`) holds the same cells
    curves = (("eval", "acc", "C2", "eval"), ("train", "acc", "C0", "train (fixed set)"))
    losses = (("eval", "loss", "C3", "eval"),)
    short = {"n_bits": "n={}", "k": "k={}", "width": "M={}", "batch_size": "B={}"}

    def table(self, runs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
        return rate_table(runs, by, flag="learned")

    def columns(self, runs, by, table):
        return [("steps to learn, median [range]",
                 _cells(runs, by, table, "steps_to_learn", True)),
                ("hidden progress step, median",
                 _cells(runs, by, table, "hidden_progress_step", False))]

    def notes(self, runs: pd.DataFrame, table: pd.DataFrame) -> list[str]:
        from rulelab.studies.sparse_parity.scaling import scaling_lines
        from rulelab.studies.sparse_parity.steps_tables import fit_slope

        if "n_bits" not in runs.columns or runs["n_bits"].nunique() < 2:
            return []
        return [] if math.isnan(fit_slope(runs)["slope"]) else scaling_lines(runs)

    def figures(self, runs, metrics, analyses):
        from rulelab.studies.sparse_parity.figures import hidden_progress_figure, steps_vs_n_figure

        return [(steps_vs_n_figure(runs), "Steps to learn vs n (log–log): every seed, the "
                 "median and the fitted power law"),
                (hidden_progress_figure(runs, metrics), "Support mass and Fourier gap rise "
                 "before the loss drops (one line per seed)")]

    def scale(self, runs):
        """``scale: n = 6, 8; k = 2; width 32; batch 32; lr 0.1; 200 epochs`` — the values
        run, beside the paper's headline setting (n = 50, k = 3, width 1000, batch 32)."""
        parts = []
        for col, name in (("n_bits", "n = {}"), ("k", "k = {}"), ("width", "width {}"),
                          ("batch_size", "batch {}"), ("lr", "lr {}"), ("epochs", "{} epochs")):
            if col in runs.columns and runs[col].notna().any():
                held = sorted(runs[col].dropna().unique())
                parts.append(name.format(", ".join(f"{v:g}" for v in held)))
        return ("scale: " + "; ".join(parts) + " — the paper's headline: n = 50, k = 3, width "
                "1000, batch 32, lr 0.1") if parts else None

    def results(self, runs, metrics):
        from rulelab.studies.sparse_parity.reproduce import readings_html

        return readings_html(runs, metrics) if "n_bits" in runs.columns else ""

    def chance(self, runs: pd.DataFrame):
        return 0.5, "chance"

    def generalized_of(self, summary: dict) -> bool | None:
        return bool(summary.get("learned"))


VIEW = SparseParityView()
