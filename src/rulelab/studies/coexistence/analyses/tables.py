"""Study M analyses as tidy tables over one loaded ensemble (SPEC M.4.3–M.4.5).

Each ``*_table(tr)`` takes a loaded ensemble (:class:`rulelab.analysis.loading.LoadedEnsemble`,
or the live :class:`.trainer.ModularTrainer` when tracked; anything with ``model`` — an
:class:`~rulelab.studies.coexistence.mlp.EnsembleMLP` — ``data`` — a
:class:`.trainer.ModularEnsembleData` — and optionally ``configs``) and returns a
long frame with a ``member`` column, ready for :func:`rulelab.analysis.stored.analyze_stored`.
Every network is scored with the model's own activation (``model.act``) unless it is the swap.

Subsets (M.1, M.3): ``train_clean`` and ``train_noisy`` against the labels trained on (on the
noisy examples those are the corrupted labels: memorization), ``train_noisy_true`` (the same
noisy examples against their true labels) and ``test``. An empty subset (α = 0) scores NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import torch

from rulelab.studies.coexistence.analyses.fourier import (
    dominant_frequency,
    evaluate_ff,
    network_accuracy,
    phase_sum_error,
    phase_sum_residual,
)
from rulelab.studies.coexistence.analyses.neurons import (
    ff_subnetwork,
    ipr,
    partition,
    pruning_curve,
    strength,
    subnetwork,
)
from rulelab.studies.coexistence.analyses.order import order_summary, order_table  # noqa: F401 (re-exported)
from rulelab.studies.coexistence.analyses.swap import activation_swap

SUBSETS = ("train_clean", "train_noisy", "train_noisy_true", "test")
# evaluate_ff also has R_mu, kept out for brevity; G_dc is G with each neuron's DC term kept.
FF_NETWORKS = ("original", "G", "G_no_mu", "G_dc", "R")
FRACTIONS = tuple(i / 10 for i in range(11))
# Columns copied from each member's config so tables group without a join.
CONFIG_COLS = ("p", "op", "width", "activation", "noise", "optimizer")
# Strength Str_m = ‖w‖∞ φ(‖u‖∞ + ‖v‖∞) needs φ ≥ 0 growing on [0, ∞); reverse ReLU is 0 there,
# so it uses ReLU (the neuron's largest |pre-activation| is the same bound).
_STRENGTH_ACT = {"reverse_relu": "relu", "leaky_relu": "relu"}


def weights(model) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(U, V, W, μ)`` of an EnsembleMLP, detached (``V = U`` when tied)."""
    mu = None if model.mu is None else model.mu.detach()
    return model.U.detach(), model.V_eff.detach(), model.W.detach(), mu


def scored_rows(data) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Rows to score and their subset masks: ``x [E, 2N+T, 2]``, ``y [E, 2N+T]``, masks.

    The train rows appear twice, first with the labels trained on, then with the true labels,
    so one forward scores memorization and the rule on the noisy examples.
    """
    noisy, E, T = data.noisy, data.noisy.shape[0], data.test_y.shape[1]
    no_train, no_test = torch.zeros_like(noisy), torch.zeros(E, T, dtype=torch.bool,
                                                             device=noisy.device)
    x = torch.cat([data.train_x, data.train_x, data.test_x], 1)
    y = torch.cat([data.train_y, data.train_y_true, data.test_y], 1)
    masks = {
        "train_clean": torch.cat([~noisy, no_train, no_test], 1),
        "train_noisy": torch.cat([noisy, no_train, no_test], 1),
        "train_noisy_true": torch.cat([no_train, noisy, no_test], 1),
        "test": torch.cat([no_train, no_train, ~no_test], 1),
    }
    return x, y, masks


def _with_config(frame: pd.DataFrame, tr) -> pd.DataFrame:
    configs = getattr(tr, "configs", None)
    if configs:
        for col in CONFIG_COLS:
            frame[col] = [getattr(configs[int(m)], col) for m in frame["member"]]
    return frame


def _acc_rows(nested: dict, key: str, extra: dict | None = None) -> list[dict]:
    """``{name: {subset: [E]}}`` → rows ``{member, key: name, subset, acc, **extra}``."""
    return [{"member": e, key: name, "subset": subset, "acc": float(acc[e]), **(extra or {})}
            for name, by_subset in nested.items() for subset, acc in by_subset.items()
            for e in range(acc.shape[0])]


@torch.no_grad()
def ff_table(tr) -> pd.DataFrame:
    """Frequency filtering (SPEC M.4.3): accuracy of the original, G, G without μ, G with each
    neuron's DC term kept (``G_dc``) and R networks on each subset, plus each member's phase-sum
    error in radians (NaN for mul, where the Fourier structure is not additive): the mean
    |φ_a ± φ_b − φ_c| over neurons (``phase_error``), the same weighted by each neuron's power at
    its frequency so dead neurons count zero (``phase_error_weighted``), and the MSE."""
    U, V, W, mu = weights(tr.model)
    x, y, masks = scored_rows(tr.data)
    act = tr.model.act
    freq = dominant_frequency(U, V, W)
    ff = evaluate_ff(U, V, W, mu, x, y, masks, act, freq)
    ff["G_dc"] = evaluate_ff(U, V, W, mu, x, y, masks, act, freq, keep_dc=True)["G"]
    frame = pd.DataFrame(_acc_rows({n: ff[n] for n in FF_NETWORKS}, "network"))
    op = getattr(getattr(tr, "cfg", None), "op", "add")
    if op in ("add", "sub"):
        res = phase_sum_residual(U, V, W, freq, op=op)  # [E, M]
        err, mse = res.abs().mean(-1), res.square().mean(-1)
        weighted = phase_sum_error(U, V, W, freq, op=op, weighted=True)
    else:
        err = mse = weighted = torch.full((U.shape[0],), math.nan)
    frame["phase_error"] = [float(err[m]) for m in frame["member"]]
    frame["phase_error_weighted"] = [float(weighted[m]) for m in frame["member"]]
    frame["phase_mse"] = [float(mse[m]) for m in frame["member"]]
    return _with_config(frame, tr)


@torch.no_grad()
def swap_table(tr, acts: Sequence[str] | None = None) -> pd.DataFrame:
    """Activation swap (SPEC M.4.4): the trained weights scored with every activation."""
    U, V, W, mu = weights(tr.model)
    x, y, masks = scored_rows(tr.data)
    frame = pd.DataFrame(_acc_rows(activation_swap(U, V, W, mu, x, y, masks, acts),
                                   "activation_eval"))
    frame["trained"] = frame["activation_eval"] == tr.model.act
    return _with_config(frame, tr)


@torch.no_grad()
def neurons_table(tr, k_frac: float = 0.5, fractions: Sequence[float] = FRACTIONS,
                  seed: int = 0) -> pd.DataFrame:
    """Neuron scores and partition (SPEC M.4.5), one frame with a ``kind`` column.

    ``kind = "prune"``: accuracy vs ``fraction`` of neurons kept, for ``score`` ∈ {ipr,
    strength} and ``order`` ∈ {top (most important first), bottom, random (control)}.
    ``kind = "partition"``: ``network`` ∈ {top (the ⌊k_frac·M⌉ highest-scored neurons: the
    generalization subnetwork), bottom (the rest: the memorization subnetwork), top_ff (FF's G
    network of the top subnetwork), full_ff (FF's G network of the whole model)}.
    """
    if not 0.0 <= k_frac <= 1.0:
        raise ValueError(f"neurons_table: k_frac must lie in [0, 1], got {k_frac}")
    U, V, W, mu = weights(tr.model)
    act = tr.model.act
    x, y, masks = scored_rows(tr.data)
    M = U.shape[1]
    k = round(k_frac * M)
    full_ff = evaluate_ff(U, V, W, mu, x, y, masks, act)["G"]
    scores = {"ipr": ipr(U, V, W), "strength": strength(U, V, W, _STRENGTH_ACT.get(act, act))}
    rows: list[dict] = []
    for name, score in scores.items():
        curves = pruning_curve(U, V, W, mu, x, y, masks, score, fractions, act, seed=seed)
        for order, by_subset in curves.items():
            for subset, acc in by_subset.items():  # [F, E]
                rows += [{"member": e, "kind": "prune", "score": name, "order": order,
                          "network": "", "fraction": float(f), "subset": subset,
                          "acc": float(acc[i, e])}
                         for i, f in enumerate(fractions) for e in range(acc.shape[1])]
        top, bottom = partition(score, k, M - k)
        nets = {
            "top": _subnet_acc(U, V, W, mu, x, y, masks, act, top),
            "bottom": _subnet_acc(U, V, W, mu, x, y, masks, act, bottom),
            "top_ff": ff_subnetwork(U, V, W, mu, x, y, top, masks, act)["G"],
            "full_ff": full_ff,
        }
        fraction = {"top": k / M, "bottom": (M - k) / M, "top_ff": k / M, "full_ff": 1.0}
        for net, by_subset in nets.items():
            rows += [{**r, "kind": "partition", "score": name, "order": "",
                      "fraction": fraction[net]}
                     for r in _acc_rows({net: by_subset}, "network")]
    return _with_config(pd.DataFrame(rows), tr)


def _subnet_acc(U, V, W, mu, x, y, masks, act, keep):
    return network_accuracy(*subnetwork(U, V, W, keep), mu, x, y, masks, act)


# --- summaries over stored tables (mean over seeds), for the CLI and the report ----------------
def _mean(frame: pd.DataFrame, by: list[str], columns: str, value: str = "acc") -> pd.DataFrame:
    by = [c for c in by if c in frame.columns]
    return frame.pivot_table(index=by, columns=columns, values=value, aggfunc="mean",
                             dropna=False).reset_index().rename_axis(columns=None)


def ff_summary(ff: pd.DataFrame, subset: str = "test") -> pd.DataFrame:
    """Mean ``subset`` accuracy of original / G / G_no_mu / G_dc / R by noise and width."""
    table = _mean(ff[ff["subset"] == subset], ["noise", "width", "epoch"], "network")
    return table[[c for c in table.columns if c not in FF_NETWORKS]
                 + [n for n in FF_NETWORKS if n in table.columns]]


def swap_summary(swap: pd.DataFrame, subset: str = "test") -> pd.DataFrame:
    """Mean ``subset`` accuracy under each evaluation activation, by noise and width."""
    return _mean(swap[swap["subset"] == subset], ["activation", "noise", "width", "epoch"],
                 "activation_eval")


def partition_summary(neurons: pd.DataFrame, subset: str = "test") -> pd.DataFrame:
    """Mean ``subset`` accuracy of the partition networks by score, noise and width."""
    part = neurons[(neurons["kind"] == "partition") & (neurons["subset"] == subset)]
    return _mean(part, ["score", "noise", "width", "epoch"], "network")


def best_pruned(neurons: pd.DataFrame, subset: str = "test") -> pd.DataFrame:
    """Per run and score: the best ``subset`` accuracy of any top-first pruned subnetwork
    (max over fractions kept, excluding the full network) — partition at its best."""
    rows = neurons[(neurons["kind"] == "prune") & (neurons["order"] == "top")
                   & (neurons["subset"] == subset) & (neurons["fraction"] < 1.0)]
    keys = [c for c in ("run_id", "member", "score", "noise", "width", "seed") if c in rows]
    return rows.groupby(keys, dropna=False)["acc"].max().reset_index()


# --- tables over stored runs and curves (SPEC M.4.1–M.4.2) --------------------------------------
def _varying(runs: pd.DataFrame, cols: Sequence[str]) -> list[str]:
    return [c for c in cols if c in runs.columns and runs[c].nunique(dropna=False) > 1]


def dd_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Double descent (SPEC M.4.1): final test accuracy vs width over seeds (mean, std, min, max,
    n), with the mean final clean- and noisy-train accuracy to locate interpolation."""
    from rulelab.studies.coexistence.analyses.modular_summary import (
        DEFAULT_DD_BY,
        double_descent_table,
    )

    by = ["noise", *(c for c in _varying(runs, DEFAULT_DD_BY) if c != "noise")]
    table = double_descent_table(runs, by=by)
    done = runs[runs["status"].astype(str) == "done"] if "status" in runs else runs
    cols = [c for c in ("final_clean_acc", "final_noisy_acc") if c in done.columns]
    if not cols:
        return table
    fit = done[[*by, "width"]].assign(**{c: pd.to_numeric(done[c], errors="coerce")
                                         for c in cols})
    fit = fit.groupby([*by, "width"], dropna=False)[cols].mean().reset_index()
    return _with_test_noise(table.merge(fit, on=[*by, "width"], how="left"), done, by)


def _with_test_noise(table: pd.DataFrame, done: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Add ``n_test`` (test examples: the pairs not in training, SPEC M.1) and ``chance`` (1/P)
    per curve point, so the dip reading can tell a dip from the test set's sampling noise."""
    if not {"p", "train_frac"} <= set(done.columns) or done.empty:
        return table
    p = pd.to_numeric(done["p"], errors="coerce")
    drop = done["drop_zero"].astype(bool) if "drop_zero" in done else False
    pairs = (p - drop) ** 2  # values 1..P−1 with drop_zero (mul)
    n_train = (pd.to_numeric(done["train_frac"], errors="coerce") * pairs + 0.5).apply(
        lambda v: float("nan") if pd.isna(v) else max(1, int(v)))
    extra = done[[*by, "width"]].assign(n_test=(pairs - n_train), chance=1.0 / p)
    extra = extra.groupby([*by, "width"], dropna=False)[["n_test", "chance"]].min().reset_index()
    return table.merge(extra, on=[*by, "width"], how="left")
