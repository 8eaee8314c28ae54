"""Modular-arithmetic data with label noise (SPEC M.1): counts, exact noise, modes, seeds."""

import math

import numpy as np
import pytest

from rulelab.config import ConfigError, make_config
from rulelab.studies.coexistence.config import ModularRunConfig
from rulelab.studies.coexistence.mlp import ACTIVATIONS
from rulelab.studies.coexistence.modular_task import (
    apply_op,
    make_modular,
    modular_from_config,
    to_frame,
)


def _make(**kw):
    return make_modular(**{"op": "add", "p": 13, "data_seed": 0, **kw})


def _pairs(x):
    return [tuple(r) for r in x.tolist()]


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_counts_split_and_clean_labels(op):
    d = _make(op=op, train_frac=0.3)
    n_all = 13 * 13
    assert len(d.y_train) == math.floor(0.3 * n_all + 0.5) and len(d.y_test) == n_all - 51
    both = _pairs(d.x_train) + _pairs(d.x_test)
    assert sorted(both) == [(a, b) for a in range(13) for b in range(13)]  # every pair once
    assert d.x_train.dtype == np.int64 and d.x_train.shape == (51, 2)
    np.testing.assert_array_equal(d.y_train_true, apply_op(op, *d.x_train.T, 13))
    np.testing.assert_array_equal(d.y_test, apply_op(op, *d.x_test.T, 13))
    assert not d.noisy.any() and np.array_equal(d.y_train, d.y_train_true)  # α = 0


@pytest.mark.parametrize("mode", ["wrong", "uniform", "symmetric"])
@pytest.mark.parametrize("alpha", [0.0, 0.13, 0.5, 0.8, 1.0])
def test_exact_noise_count_and_only_train_is_noisy(mode, alpha):
    d = _make(noise=alpha, noise_mode=mode, data_seed=3)
    n = len(d.y_train)
    assert d.n_noisy == math.floor(alpha * n + 0.5)
    clean = ~d.noisy
    assert np.array_equal(d.y_train[clean], d.y_train_true[clean])
    assert ((d.y_train >= 0) & (d.y_train < 13)).all()
    if mode != "uniform":  # a wrong label is wrong
        assert (d.y_train[d.noisy] != d.y_train_true[d.noisy]).all()


def test_uniform_mode_may_keep_the_true_label():
    d = make_modular(op="add", p=5, noise=1.0, noise_mode="uniform", data_seed=0)
    kept = (d.y_train == d.y_train_true).mean()
    assert 0.0 < kept < 0.5  # about 1/P of the corrupted labels are drawn equal to the truth


@pytest.mark.parametrize("op", ["add", "sub"])
def test_symmetric_mode_shares_labels_of_mirror_pairs(op):
    d = _make(op=op, p=17, noise=0.4, noise_mode="symmetric", data_seed=5, train_frac=0.7)
    lab = {pair: (int(y), bool(nz)) for pair, y, nz in zip(_pairs(d.x_train), d.y_train,
                                                           d.noisy, strict=True)}
    mirrored = [(a, b) for (a, b) in lab if a != b and (b, a) in lab]
    assert len(mirrored) > 50
    for a, b in mirrored:  # corrupted together, to the same wrong label
        assert lab[a, b][1] == lab[b, a][1], (a, b)
        assert not lab[a, b][1] or lab[a, b][0] == lab[b, a][0], (a, b)
    assert sum(lab[pair][1] for pair in mirrored) > 20
    assert (d.y_train[d.noisy] != d.y_train_true[d.noisy]).all()  # wrong for both orders
    # 'wrong' mode draws mirror pairs independently
    w = _make(op=op, p=17, noise=0.4, data_seed=5, train_frac=0.7)
    wl = {pair: int(y) for pair, y in zip(_pairs(w.x_train), w.y_train, strict=True)}
    assert any(wl[a, b] != wl[b, a] for a, b in mirrored)


def test_deterministic_and_seed_dependent():
    a, b = _make(noise=0.3, data_seed=7), _make(noise=0.3, data_seed=7)
    for f in ("x_train", "y_train", "noisy", "x_test", "y_test"):
        assert np.array_equal(getattr(a, f), getattr(b, f))
    c = _make(noise=0.3, data_seed=8)
    assert not np.array_equal(a.x_train, c.x_train)


def test_same_split_across_alpha_and_nested_noise():
    lo, hi = _make(noise=0.2, data_seed=2), _make(noise=0.6, data_seed=2)
    assert np.array_equal(lo.x_train, hi.x_train) and np.array_equal(lo.x_test, hi.x_test)
    assert (hi.noisy[lo.noisy]).all()  # the α = 0.2 noisy set ⊂ the α = 0.6 one …
    assert np.array_equal(lo.y_train[lo.noisy], hi.y_train[lo.noisy])  # … with the same labels


def test_mul_drop_zero():
    d = make_modular(op="mul", p=7, drop_zero=True, train_frac=0.5, noise=0.25, data_seed=1)
    assert len(d.y_train) + len(d.y_test) == 36
    assert (d.x_train > 0).all() and (d.x_test > 0).all()
    assert (d.y_train_true > 0).all() and (d.y_test > 0).all()  # ℤ_7* is closed under ×
    assert d.n_noisy == math.floor(0.25 * 18 + 0.5)


def test_config_validation_and_cached_data():
    with pytest.raises(ConfigError, match=r"--p: 12 .*prime"):
        make_config(ModularRunConfig, op="mul", p=12)
    for bad, flag in [({"p": 1}, "--p"), ({"noise": 1.5}, "--noise"), ({"width": 0}, "--width"),
                      ({"activation": "swish"}, "--activation"),
                      ({"drop_zero": True}, "--drop-zero")]:
        with pytest.raises(ConfigError, match=flag):
            make_config(ModularRunConfig, **bad)
    assert set(ModularRunConfig.model_fields["activation"].annotation.__args__) == set(ACTIVATIONS)
    cfg = ModularRunConfig(p=11, noise=0.5, data_seed=4, width=8)
    assert modular_from_config(cfg) is modular_from_config(cfg.model_copy(update={"seed": 9}))
    assert ModularRunConfig(optimizer="muon").momentum == 0.95
    assert ModularRunConfig(optimizer="sgd").momentum == 0.9


def test_frame_columns():
    d = _make(noise=0.5)
    df = to_frame(d)
    assert list(df.columns) == ["split", "a", "b", "label", "true_label", "noisy"]
    assert df["split"].value_counts().to_dict() == {"train": 85, "test": 84}
    test = df[df["split"] == "test"]
    assert (test["label"] == test["true_label"]).all() and not test["noisy"].any()
    assert int(df["noisy"].sum()) == d.n_noisy


@pytest.mark.parametrize("mode", ["wrong", "symmetric"])
def test_wrong_labels_are_uniform_over_the_wrong_classes(mode):
    # SPEC M.1: a noisy label is uniform over the P − 1 wrong classes (add: the mirror pair
    # shares the true label, so symmetric noise has the same P − 1). Every train label of 40
    # data seeds is corrupted (α = 1); per true label c the wrong labels must cover the P − 1
    # classes ≠ c uniformly: a chi-square test on the offsets (label − c) mod P ∈ 1..P−1 and on
    # the (c, label) table, at a fixed seed range. A draw biased to c + 1 (an off-by-one in
    # "c + 1 + ⌊r(P−1)⌋"), or one that can return c, fails.
    from scipy.stats import chisquare

    P = 17
    true, wrong = [], []
    for seed in range(40):
        d = make_modular(op="add", p=P, train_frac=1.0, noise=1.0, noise_mode=mode,
                         data_seed=seed)
        # Symmetric noise draws one label per unordered pair: count each pair once, or the
        # mirror copies would double every count and inflate the statistic.
        once = d.x_train[:, 0] <= d.x_train[:, 1] if mode == "symmetric" else slice(None)
        true.append(d.y_train_true[once])
        wrong.append(d.y_train[once])
    true, wrong = np.concatenate(true), np.concatenate(wrong)
    assert (wrong != true).all()  # never the true label
    offsets = (wrong - true) % P
    counts = np.bincount(offsets, minlength=P)
    assert counts[0] == 0
    assert chisquare(counts[1:]).pvalue > 1e-3  # 11,560 draws over 16 offsets (wrong mode)
    table = np.zeros((P, P), dtype=np.int64)
    np.add.at(table, (true, wrong), 1)
    for c in range(P):
        cells = np.delete(table[c], c)  # the P − 1 wrong classes of true label c
        assert chisquare(cells).pvalue > 1e-4, c  # ≈ 680 draws per true label (wrong mode)
