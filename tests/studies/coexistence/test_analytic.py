"""Gromov's analytic solution (SPEC M.4.6), activation swap (M.4.4) and run summaries (M.4.1–2)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from rulelab.studies.coexistence.analyses.analytic import all_pairs, analytic_solution
from rulelab.studies.coexistence.analyses.fourier import network_accuracy
from rulelab.studies.coexistence.analyses.modular_summary import (
    double_descent_table,
    learning_order,
)
from rulelab.studies.coexistence.analyses.swap import activation_swap
from rulelab.studies.coexistence.mlp import ACTIVATIONS


@pytest.mark.parametrize("op", ["add", "sub"])
def test_analytic_solution_is_perfect_with_quadratic(op):
    P, M = 23, 512
    U, V, W, mu = analytic_solution(P, M, n_members=2, op=op, seed=1)
    assert U.shape == V.shape == (2, M, P) and W.shape == (2, P, M) and mu is None
    x, y = all_pairs(P, op)
    assert torch.equal(network_accuracy(U, V, W, mu, x, y, None, "quadratic")["all"], torch.ones(2))
    other = "sub" if op == "add" else "add"  # the op matters: wrong-op labels are not learned
    _, y_other = all_pairs(P, other)
    assert (network_accuracy(U, V, W, mu, x, y_other, None, "quadratic")["all"] < 0.2).all()


def test_analytic_solution_form_and_seed():
    P, M, A = 11, 10, 2.0
    U, V, W, _ = analytic_solution(P, M, n_members=2, seed=5, amplitude=A, dtype=torch.float64)
    i = torch.arange(P, dtype=torch.float64)
    for m in range(M):
        sigma = 1 + m % 5  # frequencies cycle through 1..(P−1)/2
        theta = 2 * math.pi * sigma * i / P
        c_u, c_v = torch.fft.rfft(U[0, m])[sigma], torch.fft.rfft(V[0, m])[sigma]
        assert c_u.abs().item() == pytest.approx(A * P / 2)  # a single cosine of amplitude A
        phi1, phi2 = torch.angle(c_u), torch.angle(c_v)
        torch.testing.assert_close(U[0, m], A * torch.cos(theta + phi1))
        torch.testing.assert_close(V[0, m], A * torch.cos(theta + phi2))
        torch.testing.assert_close(W[0, :, m], A * torch.cos(-theta - phi1 - phi2))
    U2, _, _, _ = analytic_solution(P, M, n_members=2, seed=5, amplitude=A, dtype=torch.float64)
    U3, _, _, _ = analytic_solution(P, M, n_members=2, seed=6, amplitude=A, dtype=torch.float64)
    assert torch.equal(U, U2) and not torch.allclose(U, U3)
    assert not torch.allclose(U[0], U[1])  # members get their own phases


def test_analytic_solution_rejects_mul_and_bad_sizes():
    with pytest.raises(ValueError, match="mul"):
        analytic_solution(23, 64, op="mul")
    with pytest.raises(ValueError, match="width"):
        analytic_solution(23, 0)


def test_activation_swap_matches_direct_evaluation():
    P = 13
    U, V, W, _ = analytic_solution(P, 128, n_members=2)
    mu = torch.zeros(2, P)
    x, y = all_pairs(P)
    masks = {"first": (torch.arange(P * P) < 80).expand(2, -1)}
    res = activation_swap(U, V, W, mu, x, y, masks)
    assert list(res) == list(ACTIVATIONS)
    for act, by_subset in res.items():
        torch.testing.assert_close(
            by_subset["first"], network_accuracy(U, V, W, mu, x, y, masks, act)["first"]
        )
    assert torch.equal(res["quadratic"]["first"], torch.ones(2))
    assert list(activation_swap(U, V, W, mu, x, y, None, ["abs"])) == ["abs"]
    with pytest.raises(ValueError, match="tanh"):
        activation_swap(U, V, W, mu, x, y, None, ["tanh"])


def _metrics(rows):
    return pd.DataFrame(rows, columns=["run_id", "epoch", "split", "metric", "value"])


def test_learning_order_first_crossings():
    m = _metrics(
        [
            ("r1", 1, "train_clean", "acc", 0.1),
            ("r1", 1, "train_noisy", "acc", 0.6),
            ("r1", 2, "train_clean", "acc", 0.55),
            ("r1", 2, "train_noisy", "acc", 0.95),
            ("r1", 3, "train_clean", "acc", 0.92),
            ("r1", 3, "train_noisy", "acc", 0.4),
            ("r1", 3, "train_clean", "loss", 9.0),
            ("r1", 3, "test", "acc", 1.0),
            ("r2", 1, "train_clean", "acc", 0.7),
            ("r2", 5, "train_noisy", "acc", 0.5),
        ]
    )
    out = learning_order(m).set_index("run_id")
    r1, r2 = out.loc["r1"], out.loc["r2"]
    assert (r1.first_train_clean_50, r1.first_train_noisy_50) == (2, 1)
    assert (r1.first_train_clean_90, r1.first_train_noisy_90) == (3, 2)
    assert r1.noisy_first_50 and r1.noisy_first_90 and r1.noisy_lead_90 == 1
    assert (r2.first_train_clean_50, r2.first_train_noisy_50) == (1, 5)
    assert not r2.noisy_first_50 and r2.noisy_lead_50 == -4
    assert math.isnan(r2.first_train_clean_90) and not r2.noisy_first_90


def test_double_descent_table_over_seeds():
    runs = pd.DataFrame(
        {
            "run_id": list("abcdef"),
            "seed": [0, 1, 0, 1, 0, 1],
            "width": [17, 17, 33, 33, 17, 17],
            "noise": [0.2, 0.2, 0.2, 0.2, 0.5, 0.5],
            "activation": "relu",
            "status": ["done"] * 5 + ["failed"],
            "final_test_acc": [0.4, 0.6, 0.9, 1.0, 0.3, None],
        }
    )
    t = double_descent_table(runs)
    assert list(t.columns) == ["noise", "activation", "width", "mean", "std", "min", "max", "n"]
    row = t[(t.noise == 0.2) & (t.width == 17)].iloc[0]
    assert row["mean"] == pytest.approx(0.5) and row["n"] == 2
    assert row["std"] == pytest.approx(math.sqrt(0.02)) and (row["min"], row["max"]) == (0.4, 0.6)
    assert t[t.noise == 0.5].iloc[0]["n"] == 1  # the failed seed is left out
    # Without the summary column, the final test accuracy comes from the metrics frame.
    m = _metrics(
        [
            (r, e, "test", "acc", v)
            for r, e, v in [
                ("a", 5, 0.4),
                ("a", 1, 0.0),
                ("b", 5, 0.6),
                ("c", 5, 0.9),
                ("d", 9, 1.0),
                ("e", 2, 0.3),
            ]
        ]
    )
    t2 = double_descent_table(runs.drop(columns="final_test_acc"), m)
    pd.testing.assert_frame_equal(t2, t)
    with pytest.raises(KeyError, match="metrics"):
        double_descent_table(runs.drop(columns="final_test_acc"))
