"""Aligned twins (SPEC S.4.4) checked on real MPSP adversarial splits and hand-built edge rows."""

import itertools
import time

import numpy as np
import pytest

from rulelab.studies.shortcut_saturation.analyses.twins import aligned_twins
from rulelab.studies.shortcut_saturation.task import label_of, make_mpsp, shortcut_of

V, N_SEQ = 64, 10


def _adv(k, kind, vocab=V, seq_len=N_SEQ):
    sp = make_mpsp(
        label_mod=k, shortcut=kind, ratio=0.5, seq_len=seq_len, vocab=vocab,
        n_train=16, n_eval=4096, data_seed=3,
    )
    return np.asarray(sp["adv"].x)


@pytest.mark.parametrize("kind", ["max", "first"])
@pytest.mark.parametrize("k", [2, 3])
def test_twins_on_real_adv_data(k, kind):
    x = _adv(k, kind)
    assert np.all(shortcut_of(x, k, kind) != label_of(x, k))
    t0 = time.perf_counter()
    twins, ok = aligned_twins(x, k, kind, V, np.random.default_rng(0))
    assert time.perf_counter() - t0 < 0.5
    assert twins.shape == x.shape and ok.shape == (len(x),) and ok.dtype == bool
    # Only rows with the max pinned at V−1 and tied (or a runner-up just below) can fail.
    assert ok.mean() > 0.95
    xo, tw = x[ok], twins[ok]
    y = label_of(xo, k)
    assert np.array_equal(label_of(tw, k), y)  # same label
    assert np.array_equal(shortcut_of(tw, k, kind), y)  # shortcut aligned with the label
    assert tw.min() >= 0 and tw.max() < V
    changed = (tw != xo).sum(1)
    assert np.all(changed == 2)  # the shortcut element and one compensator, nothing else
    rows = np.arange(len(xo))
    p = xo.argmax(1) if kind == "max" else np.zeros(len(xo), dtype=int)
    assert np.all(tw[rows, p] != xo[rows, p])  # the shortcut element itself moved
    assert np.all(np.abs(tw - xo).max(1) <= 2 * k)  # small perturbations only
    if kind == "max":
        assert np.array_equal(tw.argmax(1), p)  # the max stays at its position ...
        assert np.all((tw == tw.max(1, keepdims=True)).sum(1) == 1)  # ... and is unique
    assert np.array_equal(twins[~ok], x[~ok])  # failures are returned unchanged


def _all_twins(V, n, k, kind):
    """Independent reference, from scratch with numpy over **every** sequence of ``[0, V)^n``:
    for each adversarial sequence, the boolean row of all sequences that are a valid aligned
    twin by SPEC S.4.4 — exactly two elements differ, one of them the shortcut element (x₁, or
    an occurrence of the max that is the twin's unique max), same label, shortcut = label.
    No candidate shifts are assumed: any values in range may be used."""
    space = np.array(list(itertools.product(range(V), repeat=n)))
    lab = space.sum(1) % k
    sc = (space.max(1) if kind == "max" else space[:, 0]) % k
    adv = space[lab != sc]
    unique_max = (space == space.max(1, keepdims=True)).sum(1) == 1
    top = space.argmax(1)  # the position of a twin's (unique) max
    cands = np.zeros((len(adv), len(space)), dtype=bool)
    for i, x in enumerate(adv):
        diff = space != x
        ok = (diff.sum(1) == 2) & (lab == x.sum() % k) & (sc == x.sum() % k)
        if kind == "max":
            ok &= unique_max & diff[np.arange(len(space)), top] & (x[top] == x.max())
        else:
            ok &= diff[:, 0]
        cands[i] = ok
    return space, adv, cands


@pytest.mark.parametrize("kind", ["max", "first"])
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize(("V", "n"), [(6, 4), (5, 5)])
def test_twins_found_exactly_when_a_brute_force_search_finds_one(V, n, k, kind):
    """Over all sequences: ok ⇔ some aligned twin exists, and each twin returned is one of them.
    Fails on the pre-issue-8 search, which tried compensator shifts |ε| < k only and missed
    e.g. [0, 0, 5, 5] → [0, 0, 4, 2] (V = 6, k = 2: the tied max must drop by 3)."""
    space, adv, cands = _all_twins(V, n, k, kind)
    twins, ok = aligned_twins(adv, k, kind, V, np.random.default_rng(0))
    assert np.array_equal(ok, cands.any(1))
    index = {tuple(row): i for i, row in enumerate(space)}
    assert all(cands[i, index[tuple(twins[i])]] for i in np.flatnonzero(ok))
    assert np.array_equal(twins[~ok], adv[~ok])


def test_twins_deterministic_and_rng_dependent():
    x = _adv(3, "max")
    a, ok_a = aligned_twins(x, 3, "max", V, np.random.default_rng(1))
    b, ok_b = aligned_twins(x, 3, "max", V, np.random.default_rng(1))
    c, _ = aligned_twins(x, 3, "max", V, np.random.default_rng(2))
    assert np.array_equal(a, b) and np.array_equal(ok_a, ok_b)
    assert not np.array_equal(a, c)  # the compensator is drawn from rng


def test_twins_hand_built_rows():
    rng = np.random.default_rng(0)
    # k=2, max: [5, 2, 2] sum 9 → y=1, s=1: not adversarial → error.
    with pytest.raises(ValueError, match="adversarial"):
        aligned_twins(np.array([[5, 2, 2]]), 2, "max", 8, rng)
    # max 6 (s=0), sum 6+1+2=9 (y=1). δ=+1 → 7; compensator ±1 stays below 7.
    tw, ok = aligned_twins(np.array([[6, 1, 2]]), 2, "max", 8, rng)
    assert ok[0] and tw[0, 0] == 7 and label_of(tw, 2)[0] == 1 and tw[0, 1:].max() < 7
    # max at V-1=7 tied → cannot go up (range); down by 1 only if the other 7 (the
    # compensator, ε odd) drops below 6: ±1 cannot, ε = −3 can (a larger compensator tier).
    tw, ok = aligned_twins(np.array([[7, 7, 2, 2]]), 2, "max", 8, rng)  # y=0, s=1
    assert ok[0] and np.array_equal(tw[0], [6, 4, 2, 2])
    # max at V-1 tied three times: the third 7 stays → no twin.
    tw, ok = aligned_twins(np.array([[7, 7, 7, 1]]), 2, "max", 8, rng)  # y=0, s=1
    assert not ok[0] and np.array_equal(tw[0], [7, 7, 7, 1])
    # untied max at V-1 goes down by 1 when the runner-up is below it: [7, 5, 2] y=0, s=1.
    tw, ok = aligned_twins(np.array([[7, 5, 2]]), 2, "max", 8, rng)
    assert ok[0] and tw[0, 0] == 6 and tw[0].argmax() == 0 and (tw[0] == 6).sum() == 1
    assert label_of(tw, 2)[0] == 0 and shortcut_of(tw, 2, "max")[0] == 0
    # a runner-up at max−1 is lowered by the compensator to make room: [7, 6, 1] → [6, 5, 1].
    tw, ok = aligned_twins(np.array([[7, 6, 1]]), 2, "max", 8, rng)
    assert ok[0] and np.array_equal(tw[0], [6, 5, 1])
    # two runners-up at max−1 block it: [7, 6, 6, 1] (y=0, s=1) → no twin.
    _, ok = aligned_twins(np.array([[7, 6, 6, 1]]), 2, "max", 8, rng)
    assert not ok[0]
    # first, k=3: x1=0 (s=0), sum 0+1+1=2 (y=2): δ=2 → 2, compensator by ε≡1 (mod 3).
    tw, ok = aligned_twins(np.array([[0, 1, 1]]), 3, "first", 8, rng)
    assert ok[0] and tw[0, 0] == 2 and label_of(tw, 3)[0] == 2
    # first at the top of the range: x1=7 (s=1), sum 8 (y=2), V=8: 7+1 is out of range.
    tw, ok = aligned_twins(np.array([[7, 0, 1]]), 3, "first", 8, rng)
    assert ok[0] and tw[0, 0] == 5  # so δ = 1 − 3 = −2
    assert label_of(tw, 3)[0] == 2 and shortcut_of(tw, 3, "first")[0] == 2


def test_twins_validates_input():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="shortcut_kind"):
        aligned_twins(np.array([[1, 2]]), 2, "last", 8, rng)
    with pytest.raises(ValueError, match="range|lie in"):
        aligned_twins(np.array([[1, 9]]), 2, "max", 8, rng)
