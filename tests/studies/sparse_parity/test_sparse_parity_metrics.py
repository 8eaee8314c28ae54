"""Sparse-parity measures against hand-built networks and constructed weights (oracles)."""

import itertools
import math

import numpy as np
import pytest
import torch

from rulelab.studies.sparse_parity.metrics import (
    characters,
    correct,
    correlations,
    per_example_loss,
    relative_change,
    support_mass,
)
from rulelab.studies.sparse_parity.model import EnsembleParityMLP
from rulelab.studies.sparse_parity.task import other_subsets, parity


def cube(n: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product([-1.0, 1.0], repeat=n)))


def parity_network(n: int, support, width: int) -> EnsembleParityMLP:
    """A ReLU network that computes χ_S exactly: neuron j reads s = Σ_{i∈S} x_i through
    ReLU(s − t_j) with knots t_j = −k−1, −k+1, …, k−1 (just below each value s can take);
    the output weights interpolate χ at s = −k, −k+2, …, k (a lower-triangular system with a
    unit diagonal, so the solve is exact). Neurons beyond k+1 are zero."""
    k = len(support)
    net = EnsembleParityMLP(1, n, width, bias=True)
    knots = [-k - 1 + 2 * j for j in range(k + 1)]
    s_values = [-k + 2 * j for j in range(k + 1)]
    chi = [(-1.0) ** ((k - s) // 2) for s in s_values]  # (k − s)/2 bits are −1
    A = np.array([[max(0.0, s - t) for t in knots] for s in s_values])
    a = np.linalg.solve(A, chi)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        for j, t in enumerate(knots):
            net.W1[0, j, list(support)] = 1.0
            net.b1[0, j] = -t
            net.w2[0, j] = float(a[j])
    return net


def xor_network(n: int, support) -> EnsembleParityMLP:
    """k = 2 by hand: χ = x_a x_b = |x_a + x_b| − 1 = ReLU(s) + ReLU(−s) − 1."""
    net = EnsembleParityMLP(1, n, 2, bias=True)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        net.W1[0, 0, list(support)] = 1.0
        net.W1[0, 1, list(support)] = -1.0
        net.w2[0] = 1.0
        net.b2[0] = -1.0
    return net


@pytest.mark.parametrize("net, n, support", [
    (xor_network(6, (1, 4)), 6, (1, 4)),
    (parity_network(7, (0, 3, 5), 8), 7, (0, 3, 5)),
    (parity_network(8, (1, 2, 6, 7), 6), 8, (1, 2, 6, 7)),
])
def test_a_hand_built_parity_network_scores_100_percent_on_the_support_alone(net, n, support):
    x = cube(n).unsqueeze(0)  # every input: [1, 2^n, n]
    y = parity(x, support)
    f = net(x)
    torch.testing.assert_close(f, y, atol=1e-5, rtol=0)  # computes χ_S exactly
    assert correct(f, y).all()
    assert per_example_loss("hinge", f, y).max() < 1e-5
    S = torch.tensor([list(support)])
    assert support_mass(net.W1, S).item() == 1.0  # all weight mass on the support
    others = other_subsets(n, len(support), support)
    corr_s, gap = correlations(f, y, [characters(x[0], others)])
    assert corr_s.item() == pytest.approx(1.0, abs=1e-5)
    assert gap.item() == pytest.approx(1.0, abs=1e-5)  # χ_T ⊥ χ_S on the full cube


def test_support_mass_of_constructed_weights():
    M, n = 5, 6
    W1 = torch.arange(1.0, n + 1).repeat(2, M, 1)  # column i holds i+1 in every neuron
    W1[1] *= torch.tensor([1.0, 0.0, 2.0, 0.0, 1.0, 0.0])  # member 1: other columns
    support = torch.tensor([[1, 3], [0, 2]])
    total0 = sum((i + 1) ** 2 for i in range(n))
    expected0 = (2**2 + 4**2) / total0
    expected1 = (1 + (3 * 2) ** 2) / (1 + 36 + 25)
    got = support_mass(W1, support)
    assert got.dtype == torch.float64
    assert got.tolist() == pytest.approx([expected0, expected1], rel=1e-12)
    # per-neuron layout: a column on the support counts whichever neuron carries it
    W = torch.zeros(1, 3, 4)
    W[0, 2, 1] = 3.0
    W[0, 0, 0] = 4.0
    assert support_mass(W, torch.tensor([[1]])).item() == pytest.approx(9 / 25)
    assert math.isnan(support_mass(torch.zeros(1, 2, 3), torch.tensor([[0]])).item())


def test_support_mass_is_k_over_n_at_init():
    net = EnsembleParityMLP(3, 40, 2000).init_weights([0, 1, 2])
    m = support_mass(net.W1, torch.tensor([[0, 1, 2], [5, 9, 30], [37, 38, 39]]))
    assert m.tolist() == pytest.approx([3 / 40] * 3, rel=0.05)


def test_correlations_for_the_parity_another_parity_and_zero():
    x = cube(5)
    S, T = (0, 2, 4), (1, 2, 3)
    chi_s, chi_t = parity(x, S), parity(x, T)
    others = characters(x, other_subsets(5, 3, S))
    f = torch.stack([2.5 * chi_s, chi_t, torch.zeros_like(chi_s), chi_s + 0.5 * chi_t])
    corr, gap = correlations(f, chi_s.expand(4, -1), [others] * 4)
    assert corr.tolist() == pytest.approx([1.0, 0.0, 0.0, 1 / math.sqrt(1.25)], abs=1e-6)
    assert gap.tolist() == pytest.approx(
        [1.0, -1.0, 0.0, (1 - 0.5) / math.sqrt(1.25)], abs=1e-6)


def test_losses_and_accuracy_at_known_margins():
    f = torch.tensor([[2.0, 0.5, 0.0, -1.0]])
    y = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    torch.testing.assert_close(per_example_loss("hinge", f, y), torch.tensor([[0.0, 0.5, 1, 2]]))
    torch.testing.assert_close(per_example_loss("logistic", f, -y),
                               torch.log1p(torch.exp(f)))
    assert correct(f, y).tolist() == [[True, True, False, False]]  # f = 0 is not a prediction
    with pytest.raises(ValueError, match="unknown loss"):
        per_example_loss("mse", f, y)


def test_relative_change():
    W0 = torch.ones(2, 3, 4)
    W = W0.clone()
    W[1] *= 1.5
    assert relative_change(W, W0).tolist() == pytest.approx([0.0, 0.5])
