"""Sparse parity: labels, supports, example sets and per-member fresh batches (oracles)."""

import itertools
import math

import numpy as np
import pytest
import torch

from rulelab.studies.sparse_parity.data import fresh_batch, member_parity, random_bits
from rulelab.studies.sparse_parity.task import (
    EVAL_STREAM,
    TRAIN_STREAM,
    draw_support,
    fixed_bits,
    other_subsets,
    parity,
)


def cube(n: int) -> np.ndarray:
    return np.array(list(itertools.product([-1.0, 1.0], repeat=n)), dtype=np.float32)


@pytest.mark.parametrize("support", [(0,), (1, 4), (0, 2, 5), (1, 2, 3, 5)])
def test_parity_is_the_product_of_the_support_bits(support):
    x = cube(6)
    expected = []
    for row in x:  # brute force: a loop over the bits, and the XOR of the 0/1 bits
        prod = 1.0
        for i in support:
            prod *= row[i]
        xor = sum(int(row[i] < 0) for i in support) % 2
        assert prod == (-1.0 if xor else 1.0)
        expected.append(prod)
    np.testing.assert_array_equal(parity(x, support), np.array(expected, dtype=np.float32))
    t = torch.from_numpy(x)
    torch.testing.assert_close(parity(t, support), torch.tensor(expected))


def test_member_parity_reads_each_members_own_support():
    x = torch.from_numpy(np.stack([cube(5), -cube(5), cube(5)]))  # [3, 32, 5]
    support = torch.tensor([[0, 1, 2], [2, 3, 4], [0, 3, 4]])
    y = member_parity(x, support)
    for e in range(3):
        torch.testing.assert_close(y[e], parity(x[e], support[e].tolist()))


def test_support_is_a_sorted_k_subset_fixed_by_the_data_seed():
    draws = {draw_support(20, 3, s) for s in range(50)}
    assert len(draws) > 40  # a random subset, not always the same one
    for s in range(50):
        S = draw_support(20, 3, s)
        assert draw_support(20, 3, s) == S  # deterministic
        assert len(set(S)) == 3 and list(S) == sorted(S) and S[0] >= 0 and S[-1] < 20
    assert draw_support(20, 3, 7, "first") == (0, 1, 2)
    with pytest.raises(ValueError, match="k: 4"):
        draw_support(3, 4, 0)


def test_support_draws_are_uniform_over_coordinates():
    counts = np.zeros(10)
    for s in range(3000):
        counts[list(draw_support(10, 3, s))] += 1
    expected = 3000 * 3 / 10
    assert np.all(np.abs(counts - expected) < 5 * math.sqrt(expected))


def test_fixed_sets_are_deterministic_uniform_and_stream_separated():
    a = fixed_bits(12, 4096, 3, EVAL_STREAM)
    assert a.dtype == np.float32 and set(np.unique(a)) == {-1.0, 1.0}
    np.testing.assert_array_equal(a, fixed_bits(12, 4096, 3, EVAL_STREAM))
    assert not np.array_equal(a, fixed_bits(12, 4096, 3, TRAIN_STREAM))
    assert not np.array_equal(a, fixed_bits(12, 4096, 4, EVAL_STREAM))
    assert abs(a.mean()) < 0.02  # ±1 uniform: 49,152 bits, sd of the mean 0.0045
    assert not a.flags.writeable  # cached: a caller cannot corrupt it for the next one


def test_fresh_batches_of_a_member_do_not_depend_on_its_ensemble():
    """Member e's first batches in a 3-member ensemble equal its batches alone, bitwise."""
    torch.set_num_threads(1)
    seeds, support = [11, 22, 33], torch.tensor([[0, 1, 2], [3, 4, 5], [1, 6, 7]])
    ens = [torch.Generator().manual_seed(s) for s in seeds]
    alone = [torch.Generator().manual_seed(s) for s in seeds]
    for _ in range(3):
        x, y = fresh_batch(ens, support, 64, 8)
        assert x.shape == (3, 64, 8) and y.shape == (3, 64)
        for e in range(3):
            xe, ye = fresh_batch([alone[e]], support[e : e + 1], 64, 8)
            assert torch.equal(x[e], xe[0]) and torch.equal(y[e], ye[0])
    assert not torch.equal(x[0], x[1])  # members draw different examples


def test_random_bits_are_signs():
    b = random_bits(torch.Generator().manual_seed(0), 1000, 16)
    assert set(b.unique().tolist()) == {-1.0, 1.0} and abs(b.mean()) < 0.05


def test_other_subsets_exhaustive_and_sampled():
    S = (1, 3, 4)
    others = other_subsets(7, 3, S)
    assert len(others) == math.comb(7, 3) - 1
    assert S not in {tuple(r) for r in others}
    assert len({tuple(r) for r in others}) == len(others)
    sampled = other_subsets(50, 3, (0, 1, 2), seed=5, limit=300)
    assert sampled.shape == (300, 3)
    assert (0, 1, 2) not in {tuple(r) for r in sampled}
    assert np.all(np.diff(sampled, axis=1) > 0)  # sorted, distinct coordinates
    np.testing.assert_array_equal(sampled, other_subsets(50, 3, (0, 1, 2), seed=5, limit=300))
