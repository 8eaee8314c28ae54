"""Study M tables (SPEC M.4.1–M.4.5): the analytic solution as an oracle, consistency with the
trainer's own metrics on a tiny trained ensemble, and the learning-order / double-descent
tables on hand-made frames."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from rulelab.studies.coexistence.analyses.analytic import all_pairs, analytic_solution
from rulelab.studies.coexistence.analyses.tables import (
    FRACTIONS,
    SUBSETS,
    best_pruned,
    dd_table,
    ff_summary,
    ff_table,
    neurons_table,
    order_summary,
    order_table,
    swap_table,
)
from rulelab.studies.coexistence.config import ModularRunConfig
from rulelab.studies.coexistence.mlp import ACTIVATIONS, EnsembleMLP
from rulelab.studies.coexistence.trainer import ModularEnsembleData, ModularTrainer

P, M, E = 23, 512, 2


@pytest.fixture(scope="module")
def analytic():
    """The quadratic analytic network (M.4.6) in an EnsembleMLP, on all P² pairs: the first
    half train with every 4th train label corrupted, the rest test."""
    U, V, W, _ = analytic_solution(P, M, n_members=E, seed=3)
    model = EnsembleMLP(E, P, M, act="quadratic", bias=False)
    with torch.no_grad():
        model.U.copy_(U), model.V.copy_(V), model.W.copy_(W)
    x, y = all_pairs(P)
    n = len(y) // 2
    noisy = torch.zeros(n, dtype=torch.bool)
    noisy[::4] = True
    wrong = torch.where(noisy, (y[:n] + 1) % P, y[:n])
    stack = lambda t: t.unsqueeze(0).expand(E, *t.shape).contiguous()  # noqa: E731
    data = ModularEnsembleData(stack(x[:n]), stack(wrong), stack(y[:n]), stack(noisy),
                               stack(x[n:]), stack(y[n:]))
    return SimpleNamespace(model=model, data=data, cfg=SimpleNamespace(op="add"))


@pytest.fixture(scope="module")
def tiny():
    cfgs = [ModularRunConfig(p=11, width=32, noise=a, seed=s, epochs=200, eval_every=100,
                             log_eval_steps=0, lr=1e-2, weight_decay=1.0, train_frac=0.8)
            for a, s in ((0.0, 0), (0.5, 1))]
    tr = ModularTrainer(cfgs)
    tr.fit()
    return tr


def _acc(frame, **where):
    for k, v in where.items():
        frame = frame[frame[k] == v]
    return frame.sort_values("member")["acc"].to_numpy()


def test_ff_keeps_the_analytic_solution_perfect(analytic):
    ff = ff_table(analytic)
    assert set(ff["network"]) == {"original", "G", "G_no_mu", "G_dc", "R"}
    assert set(ff["subset"]) == set(SUBSETS) and len(ff) == 5 * 4 * E
    for net in ("original", "G", "G_no_mu", "G_dc"):
        np.testing.assert_allclose(_acc(ff, network=net, subset="test"), 1.0)
        np.testing.assert_allclose(_acc(ff, network=net, subset="train_clean"), 1.0)
        np.testing.assert_allclose(_acc(ff, network=net, subset="train_noisy_true"), 1.0)
        np.testing.assert_allclose(_acc(ff, network=net, subset="train_noisy"), 0.0)
    assert (_acc(ff, network="R", subset="test") < 0.2).all()  # R ≈ 0: nothing left
    np.testing.assert_allclose(ff["phase_error"], 0.0, atol=1e-4)
    np.testing.assert_allclose(ff["phase_error_weighted"], 0.0, atol=1e-4)


def test_swap_scores_every_activation(analytic):
    swap = swap_table(analytic)
    assert set(swap["activation_eval"]) == set(ACTIVATIONS)
    assert set(swap.loc[swap["trained"], "activation_eval"]) == {"quadratic"}
    np.testing.assert_allclose(_acc(swap, activation_eval="quadratic", subset="test"), 1.0)


def test_neurons_table_shape_and_oracle(analytic):
    nt = neurons_table(analytic, k_frac=0.5)
    prune = nt[nt["kind"] == "prune"]
    assert len(prune) == 2 * 3 * len(FRACTIONS) * len(SUBSETS) * E
    assert set(prune["order"]) == {"top", "bottom", "random"}
    full = prune[(prune["fraction"] == 1.0) & (prune["subset"] == "test")]
    np.testing.assert_allclose(full["acc"], 1.0)  # every order keeps all neurons at f = 1
    part = nt[nt["kind"] == "partition"]
    assert set(part["network"]) == {"top", "bottom", "top_ff", "full_ff"}
    np.testing.assert_allclose(_acc(part, score="ipr", network="full_ff", subset="test"), 1.0)
    assert set(part.loc[part["network"] == "top", "fraction"]) == {0.5}
    best = best_pruned(nt)
    assert set(best["score"]) == {"ipr", "strength"} and (best["acc"] <= 1.0).all()
    with pytest.raises(ValueError, match="k_frac"):
        neurons_table(analytic, k_frac=1.5)


def test_original_network_matches_the_trainers_metrics(tiny):
    metrics = tiny.compute_metrics()
    ff, swap, nt = ff_table(tiny), swap_table(tiny), neurons_table(tiny, fractions=(0.0, 1.0))
    assert set(ff["noise"]) == {0.0, 0.5} and set(ff["width"]) == {32}
    for subset in SUBSETS:
        want = metrics[subset, "acc"].numpy()
        np.testing.assert_allclose(_acc(ff, network="original", subset=subset), want)
        np.testing.assert_allclose(_acc(swap, activation_eval="relu", subset=subset), want)
        for order in ("top", "bottom", "random"):
            got = _acc(nt, kind="prune", score="ipr", order=order, fraction=1.0, subset=subset)
            np.testing.assert_allclose(got, want)
    noisy0 = _acc(ff, network="G", subset="train_noisy")[0]
    assert math.isnan(noisy0)  # α = 0: no noisy examples
    summary = ff_summary(ff.assign(epoch=200))
    assert list(summary.columns[-5:]) == ["original", "G", "G_no_mu", "G_dc", "R"]
    assert len(summary) == 2


def _metrics(run, curve):
    rows = []
    for split, values in curve.items():
        rows += [(run, step, split, "acc", v) for step, v in enumerate(values)]
    return rows


def test_order_and_dd_tables_by_hand():
    runs = pd.DataFrame({
        "run_id": ["a", "b", "c", "d"], "status": ["done"] * 4, "task": ["modular"] * 4,
        "noise": [0.5, 0.5, 0.5, 0.0], "width": [8, 8, 16, 16], "seed": [0, 1, 0, 0],
        "p": [11] * 4, "final_test_acc": [0.1, 0.3, 0.5, 1.0],
        "final_clean_acc": [1.0] * 4, "final_noisy_acc": [1.0, 0.8, 1.0, None],
    })
    rows = (_metrics("a", {"train_clean": [0, 0.2, 0.6, 0.95], "train_noisy": [0, 0.6, 0.9, 1]})
            + _metrics("b", {"train_clean": [0, 0.6, 0.9, 1], "train_noisy": [0, 0.2, 0.6, 0.8]})
            + _metrics("c", {"train_clean": [0, 0.5, 1, 1], "train_noisy": [0, 0.5, 1, 1]}))
    metrics = pd.DataFrame(rows, columns=["run_id", "epoch", "split", "metric", "value"])
    order = order_table(runs, metrics).set_index("run_id")
    assert order.loc["a", "first_train_noisy_50"] == 1
    assert order.loc["a", "first_train_clean_50"] == 2
    assert bool(order.loc["a", "noisy_first_50"]) and not order.loc["b", "noisy_first_50"]
    assert not order.loc["c", "noisy_first_50"]  # a tie is not "first"
    assert math.isnan(order.loc["b", "first_train_noisy_90"])
    assert order.loc["a", "lead_area"] > 0 > order.loc["b", "lead_area"]  # over all 3 steps
    assert order.loc["c", "lead_area"] == 0  # a tie is no lead
    summary = order_summary(order.reset_index())
    assert list(summary["width"]) == [8, 16] and list(summary["n"]) == [2, 1]
    # a's 24-point mean lead is gained since init, but 61 training pairs (P = 11, f = 0.5)
    # bound its SE by 17 points: within the noise of subsets of 30 and 31 (issue 21)
    assert order.loc["a", "lead_gain"] == pytest.approx(0.725 / 3)
    assert order.loc["a", "lead_se"] == pytest.approx(0.171, abs=0.001)
    assert list(summary["k_noisy_leads"]) == [0, 0]
    assert (summary.loc[0, "k_50"], summary.loc[0, "n_50"]) == (1, 2)
    dd = dd_table(runs).set_index(["noise", "width"])
    assert dd.loc[(0.5, 8), "mean"] == pytest.approx(0.2) and dd.loc[(0.5, 8), "n"] == 2
    assert dd.loc[(0.5, 8), "final_noisy_acc"] == pytest.approx(0.9)
    assert dd.loc[(0.0, 16), "mean"] == 1.0
