"""Neuron scores, partition and pruning curves (SPEC M.4.5)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rulelab.studies.coexistence.analyses.analytic import all_pairs, analytic_solution
from rulelab.studies.coexistence.analyses.fourier import network_accuracy
from rulelab.studies.coexistence.analyses.neurons import (
    curve_frame,
    ff_subnetwork,
    ipr,
    partition,
    pruning_curve,
    strength,
    subnetwork,
)
from rulelab.studies.coexistence.mlp import mlp_logits


def _random(E=2, M=16, P=13, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    U, V = (torch.randn(E, M, P, generator=g, dtype=dtype) for _ in range(2))
    W = torch.randn(E, P, M, generator=g, dtype=dtype)
    return U, V, W, torch.randn(E, P, generator=g, dtype=dtype)


def _np_ipr(v, include_dc=True):  # Doshi et al.'s calculate_ipr, r = 2
    a = np.abs(np.fft.rfft(v))
    a = a if include_dc else a[1:]
    return np.sum((a / np.linalg.norm(a)) ** 4)


def test_ipr_is_one_for_every_analytic_neuron():
    U, V, W, _ = analytic_solution(23, 64, n_members=2, dtype=torch.float64)
    for dc in (True, False):
        s = ipr(U, V, W, include_dc=dc)
        assert s.shape == (2, 64)
        torch.testing.assert_close(s, torch.ones_like(s), atol=1e-6, rtol=0)


def test_ipr_matches_numpy_and_noise_is_small():
    U, V, W, _ = _random(P=97, M=8)
    got = ipr(U, V, W).numpy()
    want = np.mean(
        [
            [[_np_ipr(t[e, m]) for m in range(8)] for e in range(2)]
            for t in (U.numpy(), V.numpy(), W.transpose(1, 2).numpy())
        ],
        axis=0,
    )
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert (ipr(U, V, W) < 0.15).all()  # white noise: ≈ 2/49 ≪ 1


def test_ipr_of_zero_neuron_is_zero():
    U, V, W, _ = _random()
    U[:, 0], V[:, 0], W[:, :, 0] = 0.0, 0.0, 0.0
    s = ipr(U, V, W)
    assert torch.isfinite(s).all() and (s[:, 0] == 0).all()


def test_strength_by_hand():
    U = torch.tensor([[[1.0, -3.0, 0.5], [0.0, 0.2, -0.1]]])  # [1, 2, 3]: ‖u‖∞ = 3, 0.2
    V = torch.tensor([[[0.5, 0.0, -1.0], [-2.0, 0.0, 0.0]]])  # ‖v‖∞ = 1, 2
    W = torch.tensor([[[2.0, 0.1], [-4.0, 0.0], [1.0, -0.5]]])  # [1, P, M]: ‖w_m‖∞ = 4, 0.5
    torch.testing.assert_close(strength(U, V, W), torch.tensor([[4.0 * 4.0, 0.5 * 2.2]]))
    torch.testing.assert_close(
        strength(U, V, W, act="quadratic"), torch.tensor([[4.0 * 16.0, 0.5 * 2.2**2]])
    )


def test_partition_top_and_bottom():
    scores = torch.tensor([[0.1, 0.9, 0.5, 0.5, 0.0], [3.0, 2.0, 1.0, 0.0, -1.0]])
    top, bottom = partition(scores, 2, 1)
    assert top.tolist() == [[False, True, True, False, False], [True, True, False, False, False]]
    assert bottom.tolist() == [
        [False, False, False, False, True],
        [False, False, False, False, True],
    ]
    with pytest.raises(ValueError, match="k_prime"):
        partition(scores, 2, 6)


def test_subnetwork_zeroes_unselected_neurons():
    U, V, W, _ = _random(E=1, M=3, P=5)
    keep = torch.tensor([[True, False, True]])
    Us, Vs, Ws = subnetwork(U, V, W, keep)
    assert (Us[:, 1] == 0).all() and (Vs[:, 1] == 0).all() and (Ws[:, :, 1] == 0).all()
    assert torch.equal(Us[:, [0, 2]], U[:, [0, 2]]) and torch.equal(Ws[..., 2], W[..., 2])


def _mixed_network(P=23, n_rule=256, n_junk=64, E=2):
    """Analytic (IPR 1) neurons followed by weak random (low-IPR) neurons, with a bias."""
    U, V, W, _ = analytic_solution(P, n_rule, n_members=E)
    g = torch.Generator().manual_seed(3)
    Uj, Vj = (0.05 * torch.randn(E, n_junk, P, generator=g) for _ in range(2))
    Wj = 0.05 * torch.randn(E, P, n_junk, generator=g)
    mu = 0.05 * torch.randn(E, P, generator=g)  # weak enough not to mask the rule
    return torch.cat((U, Uj), 1), torch.cat((V, Vj), 1), torch.cat((W, Wj), 2), mu


def test_pruning_curve_endpoints_and_ipr_order():
    P = 23
    U, V, W, mu = _mixed_network(P)
    x, y = all_pairs(P)
    masks = {"all": torch.ones(2, P * P, dtype=torch.bool), "zero": (y == 0).expand(2, -1)}
    M = U.shape[1]
    fractions = [0.0, 64 / M, 256 / M, 1.0]
    curves = pruning_curve(U, V, W, mu, x, y, masks, ipr(U, V, W), fractions, act="quadratic")
    assert set(curves) == {"top", "bottom", "random"}
    full = network_accuracy(U, V, W, mu, x, y, masks, "quadratic")
    bias_only = (mu.argmax(-1)[:, None] == y).float().mean(1)  # [E]
    for order in curves.values():
        assert order["all"].shape == (4, 2)
        torch.testing.assert_close(order["all"][-1], full["all"])
        torch.testing.assert_close(order["all"][0], bias_only)
    assert torch.equal(curves["top"]["all"][2], torch.ones(2))  # the analytic neurons alone
    assert (curves["bottom"]["all"][1] < 0.5).all()  # the random junk neurons alone
    again = pruning_curve(U, V, W, mu, x, y, masks, ipr(U, V, W), fractions, act="quadratic")
    assert torch.equal(again["random"]["all"], curves["random"]["all"])  # seeded control
    frame = curve_frame(curves, fractions)
    assert len(frame) == 3 * 2 * 4 * 2 and set(frame.columns) == {
        "order",
        "fraction",
        "subset",
        "member",
        "acc",
    }


def _padded(P=23, n_rule=256, n_junk=256, E=2, junk=0.3):
    """Analytic neurons followed by as many *strong* random neurons: the full network is wrong
    (≈ 13% on all pairs), the analytic half alone is 100% accurate."""
    U, V, W, _ = analytic_solution(P, n_rule, n_members=E, dtype=torch.float64)
    g = torch.Generator().manual_seed(3)
    Uj, Vj = (junk * torch.randn(E, n_junk, P, generator=g, dtype=torch.float64) for _ in range(2))
    Wj = junk * torch.randn(E, P, n_junk, generator=g, dtype=torch.float64)
    return torch.cat((U, Uj), 1), torch.cat((V, Vj), 1), torch.cat((W, Wj), 2)


def test_keeping_exactly_the_analytic_neurons_recovers_the_rule():
    # An oracle for subnetwork / ff_subnetwork / pruning (the old test kept every neuron with an
    # all-ones mask, which cannot fail): the padded network is wrong, its analytic half alone is
    # perfect — directly, after FF, and as the IPR top-first half — and a random half is not.
    P, E, n = 23, 2, 256
    U, V, W = _padded(P, n, n, E)
    x, y = all_pairs(P)
    rule = torch.zeros(E, 2 * n, dtype=torch.bool)
    rule[:, :n] = True
    assert (network_accuracy(U, V, W, None, x, y, None, "quadratic")["all"] < 0.3).all()
    sub = network_accuracy(*subnetwork(U, V, W, rule), None, x, y, None, "quadratic")["all"]
    assert torch.equal(sub, torch.ones(E))
    ff = ff_subnetwork(U, V, W, None, x, y, rule, None, "quadratic")
    assert torch.equal(ff["G"]["all"], torch.ones(E))
    curves = pruning_curve(U, V, W, None, x, y, None, ipr(U, V, W), [0.5], act="quadratic")
    assert torch.equal(curves["top"]["all"][0], torch.ones(E))
    assert (curves["random"]["all"][0] < 0.3).all()
    assert (curves["bottom"]["all"][0] < 0.3).all()


def test_subnetwork_equals_a_forward_without_the_removed_neurons():
    # Zeroing rows of U, V and columns of W must equal a network that never had those neurons:
    # a hand-written forward over the kept indices only (relu and a bias, so nothing cancels).
    E, M, P = 2, 12, 11
    U, V, W, mu = _random(E=E, M=M, P=P)
    keep = torch.rand(E, M, generator=torch.Generator().manual_seed(4)) < 0.5
    x, _ = all_pairs(P)
    got = mlp_logits(*subnetwork(U, V, W, keep), mu, x.expand(E, -1, -1), "relu")
    for e in range(E):
        idx = keep[e].nonzero().squeeze(-1)
        h = torch.relu(U[e, idx][:, x[:, 0]] + V[e, idx][:, x[:, 1]])  # [k, N]
        want = (W[e][:, idx] @ h).T + mu[e]  # [N, P]
        torch.testing.assert_close(got[e], want)


def test_vectorized_matches_per_member_loop():
    E, P = 3, 13
    U, V, W, mu = _random(E=E, M=20, P=P, dtype=torch.float32)
    x, y = all_pairs(P)
    scores_i, scores_s = ipr(U, V, W), strength(U, V, W)
    fr = [0.0, 0.25, 0.5, 1.0]
    curves = pruning_curve(U, V, W, mu, x, y, None, scores_s, fr, descending=False)
    for e in range(E):
        s = slice(e, e + 1)
        torch.testing.assert_close(ipr(U[s], V[s], W[s]), scores_i[s])
        torch.testing.assert_close(strength(U[s], V[s], W[s]), scores_s[s])
        one = pruning_curve(U[s], V[s], W[s], mu[s], x, y, None, scores_s[s], fr, descending=False)
        for order in ("top", "bottom"):  # random draws [E, M] at once, so it differs per E
            torch.testing.assert_close(one[order]["all"], curves[order]["all"][:, s])
