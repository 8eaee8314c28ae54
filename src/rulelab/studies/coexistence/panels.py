"""Study M's figures with their captions, one function per figure, shared by the generic
``rulelab report`` (:mod:`.views`) and the reproduction's page (:mod:`.report`) so the two draw
the same figures (issue 10). Each returns ``(figure, caption)``, or None when the lab holds no
table for it (an analysis not run yet: ``rulelab analyze ff|swap|neurons|order``)."""

from __future__ import annotations

import pandas as pd

from rulelab.studies.coexistence.figures import (
    double_descent_figure,
    early_lead_figure,
    ff_bars,
    learning_order_figure,
    pruning_figure,
    swap_bars,
)

Panel = tuple[object, str] | None


def _has(table: pd.DataFrame | None) -> bool:
    return table is not None and not table.empty


def double_descent(runs: pd.DataFrame, ff: pd.DataFrame | None = None) -> Panel:
    if "final_test_acc" not in runs.columns or "width" not in runs.columns:
        return None
    caption = "Test accuracy vs width per noise level (M.4.1)" + (
        ": the raw network (left) and FF's G network (right)" if _has(ff) else "")
    return double_descent_figure(runs, ff if _has(ff) else None), caption


def learning_order(runs: pd.DataFrame, metrics: pd.DataFrame, order=None) -> Panel:
    if "noise" not in runs.columns:
        return None
    window = None
    if _has(order) and "window" in order and order["window"].notna().any():
        window = order["window"].dropna().iloc[0]
    return (learning_order_figure(runs, metrics, window=window),
            "Learning order (M.4.2): clean-train, noisy-train (against the corrupted labels) "
            "and test accuracy over steps, largest width; dashed: the end of the early-lead "
            "window")


def early_lead(order: pd.DataFrame | None) -> Panel:
    if not _has(order) or "lead_area" not in order:
        return None
    return (early_lead_figure(order), "Early lead of noisy over clean train accuracy per run: "
            "the mean over the window and at the first evaluation")


def frequency_filtering(ff: pd.DataFrame | None) -> Panel:
    if not _has(ff):
        return None
    return (ff_bars(ff), "Frequency filtering (M.4.3): the original network, G (each neuron's "
            "dominant frequency, with and without μ, and with its DC term) and R (the "
            "residual) on the three subsets")


def activation_swap(swap: pd.DataFrame | None) -> Panel:
    if not _has(swap):
        return None
    return (swap_bars(swap),
            "Activation swap (M.4.4): the trained weights scored with each activation, at every "
            "width and noise level held")


def pruning(neurons: pd.DataFrame | None) -> Panel:
    if not _has(neurons) or "kind" not in neurons or not (neurons["kind"] == "prune").any():
        return None
    return (pruning_figure(neurons), "Neuron partition (M.4.5): accuracy vs share of neurons "
            "kept, by IPR and strength, with a random-order control")


def analysis_panels(runs: pd.DataFrame, metrics: pd.DataFrame,
                    tables: dict[str, pd.DataFrame]) -> list[tuple[object, str]]:
    """The M.4 analysis figures the stored ``tables`` (ff, swap, neurons, order) allow."""
    made = [early_lead(tables.get("order")), frequency_filtering(tables.get("ff")),
            activation_swap(tables.get("swap")), pruning(tables.get("neurons"))]
    return [p for p in made if p is not None]
