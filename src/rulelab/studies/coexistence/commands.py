"""Study M's ``rulelab analyze`` commands (declared in :mod:`.analyses`): each analysis is
stored under ``<lab>/analyses/<name>/`` and summarized (mean over seeds) in a table
(SPEC M.4)."""

from __future__ import annotations

import pandas as pd

from rulelab.analysis.stored import analyze_stored
from rulelab.errors import UserError
from rulelab.report.terminal import print_frame, progress_line

COLUMNS = ("weight_decay", "seed")  # config columns stored beside each analysis row


def show(title: str, frame: pd.DataFrame) -> None:
    """:func:`print_frame` with integer-valued columns (width, epoch, …) shown as integers."""
    frame = frame.copy()
    for col in ("width", "hidden", "epoch", "p", "n"):
        if col in frame.columns:
            frame[col] = frame[col].map(lambda v: v if v != v else int(v))  # NaN stays
    print_frame(title, frame)


def _stored(lab, name: str, analysis, epochs: str) -> pd.DataFrame:
    return analyze_stored(lab, name, analysis, task="modular", columns=COLUMNS, epochs=epochs,
                          on_step=progress_line)


def ff(lab, *, epochs: str = "final") -> None:
    from rulelab.studies.coexistence.analyses.tables import ff_summary, ff_table

    frame = _stored(lab, "ff", ff_table, epochs)
    show("FF: test accuracy (mean over seeds)", ff_summary(frame, "test"))
    if (frame["noise"] > 0).any():
        show("FF: noisy-train accuracy vs the corrupted labels (memorization)",
             ff_summary(frame[frame["noise"] > 0], "train_noisy"))
    cols = [c for c in ("phase_error", "phase_error_weighted") if c in frame.columns]
    phase = frame.groupby(["noise", "width"])[cols].mean().reset_index()
    show("phase-sum error |φa ± φb − φc| (radians, mean over seeds; over neurons: plain, and "
         "weighted by each neuron's power at its frequency)", phase)


def swap(lab, *, epochs: str = "final") -> None:
    from rulelab.studies.coexistence.analyses.tables import swap_summary, swap_table

    frame = _stored(lab, "swap", swap_table, epochs)
    show("swap: test accuracy (mean over seeds)", swap_summary(frame, "test"))
    if (frame["noise"] > 0).any():
        show("swap: noisy-train accuracy vs the corrupted labels",
             swap_summary(frame[frame["noise"] > 0], "train_noisy"))


def neurons(lab, *, epochs: str = "final", k_frac: float = 0.5) -> None:
    from rulelab.studies.coexistence.analyses.tables import (
        best_pruned,
        neurons_table,
        partition_summary,
    )

    frame = _stored(lab, "neurons", lambda tr: neurons_table(tr, k_frac), epochs)
    show(f"partition (k = {k_frac:g}·M): test accuracy (mean over seeds)",
         partition_summary(frame, "test"))
    best = best_pruned(frame).groupby(["score", "noise", "width"])["acc"].mean().reset_index()
    show("best top-first pruned subnetwork: test accuracy", best)


def order(lab, *, window: float = 100.0) -> None:
    from rulelab.studies.coexistence.analyses.order import (
        order_display,
        order_summary,
        order_table,
    )

    runs = lab.runs()
    runs = runs[runs["task"].isin(["modular", "digits"])] if "task" in runs else runs
    if runs.empty:
        raise UserError(f"--lab: {lab.root} has no modular or digits runs to analyze")
    runs = finished(lab, runs, "modular or digits")
    table = order_table(runs, lab.read_metrics(list(runs["run_id"])), window=window)
    lab.write_table("order", "all", table)
    new, old = order_display(order_summary(table))
    show(f"learning order: early lead over the first {window:g} steps (runs with α > 0; "
         "points = noisy-train acc vs corrupted labels − clean-train acc)", new)
    show("learning order, old reading: first step at 50% (its own n)", old)


def dd(lab) -> None:
    from rulelab.studies.coexistence.analyses.dd_dip import DIP_COLUMNS, dip_reading
    from rulelab.studies.coexistence.analyses.tables import dd_table

    runs = lab.runs()
    runs = runs[runs["task"] == "modular"] if "task" in runs else runs
    if runs.empty:
        raise UserError(f"--lab: {lab.root} has no modular runs to analyze")
    runs = finished(lab, runs, "modular")
    table = dd_table(runs.dropna(axis=1, how="all"))
    lab.write_table("dd", "all", table)
    show("double descent: final test accuracy vs width (over seeds)", table)
    dips = dip_reading(table)
    show("double descent: the dip (max-statistic test over seeds at 2.5%; ≤ 5% of flat "
         "curves called)",
         dips[[c for c in dips.columns if c not in DIP_COLUMNS or c == "reading"]])


def finished(lab, runs: pd.DataFrame, what: str) -> pd.DataFrame:
    """The finished (done or failed) rows of ``runs``; unfinished ones are named in one
    warning (printed by the command line), and none finished is one error line."""
    unfinished = runs[~runs["status"].isin(["done", "failed"])]
    ids = ", ".join(unfinished["run_id"].head(5)) + (
        f" and {len(unfinished) - 5} more" if len(unfinished) > 5 else "")
    if len(unfinished) == len(runs):
        raise UserError(f"--lab: {lab.root} has no finished {what} runs to analyze "
                        f"({len(runs)} unfinished: {ids}); finish them first")
    if len(unfinished):
        lab.warn(f"{len(unfinished)} unfinished {what} run(s) left out: {ids}")
    return runs[runs["status"].isin(["done", "failed"])]
