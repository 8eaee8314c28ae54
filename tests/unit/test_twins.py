"""Aligned twins (SPEC S.4.4) checked on real MPSP adversarial splits and hand-built edge rows."""

import time

import numpy as np
import pytest

from rulelab.analysis.twins import aligned_twins
from rulelab.tasks.mpsp import label_of, make_mpsp, shortcut_of

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


def _brute_ok(row, k, kind, vocab):
    """Reference: does any (δ, compensator, ε) from the documented candidate sets work?"""
    y, s = int(row.sum()) % k, int(row.max() if kind == "max" else row[0]) % k
    p = int(row.argmax()) if kind == "max" else 0
    d = (y - s) % k
    for delta in (d, d - k, d + k):
        for q in range(len(row)):
            for eps in ((-delta) % k, (-delta) % k - k):
                t = row.copy()
                t[p] += delta
                if q == p:
                    continue
                t[q] += eps
                if t.min() < 0 or t.max() >= vocab:
                    continue
                if kind == "max" and not (t.argmax() == p and (t == t[p]).sum() == 1):
                    continue
                if t.sum() % k == y and t[p] % k == y:
                    return True
    return False


@pytest.mark.parametrize("kind", ["max", "first"])
@pytest.mark.parametrize("k", [2, 3])
def test_twins_fail_only_when_no_twin_exists(k, kind):
    x = _adv(k, kind)[:1000]
    _, ok = aligned_twins(x, k, kind, V, np.random.default_rng(0))
    ref = np.array([_brute_ok(row, k, kind, V) for row in x])
    assert np.array_equal(ok, ref)


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
    # max at V-1=7 tied → cannot go up (range) nor down (tie): no twin.
    tw, ok = aligned_twins(np.array([[7, 7, 2, 2]]), 2, "max", 8, rng)  # y=0, s=1
    assert not ok[0] and np.array_equal(tw[0], [7, 7, 2, 2])
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
