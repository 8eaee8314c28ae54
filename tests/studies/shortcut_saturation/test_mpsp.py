"""MPSP data generator (SPEC S.1): exact cells, correctness, disjointness, determinism."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.task import (
    MPSPSplit,
    cell_quotas,
    label_of,
    make_mpsp,
    mpsp_from_config,
    shortcut_of,
    to_frame,
    write_parquet,
)

SMALL = dict(seq_len=6, vocab=16, n_train=1000, n_eval=300, data_seed=3)
RATIOS = [0.0, 1 / 3, 0.5, 0.9, 1.0]


def gen(k=2, shortcut="max", ratio=0.5, **kw):
    args = {**SMALL, **kw}
    return make_mpsp(label_mod=k, shortcut=shortcut, ratio=ratio, **args)


def crosstab(sp: MPSPSplit, k: int) -> np.ndarray:
    out = np.zeros((k, k), dtype=np.int64)
    for y, s in zip(sp.label.tolist(), sp.shortcut.tolist(), strict=True):
        out[y, s] += 1
    return out


def rows(sp: MPSPSplit) -> list[tuple[int, ...]]:
    return [tuple(r) for r in sp.x.tolist()]


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("n", [1000, 16384, 7, 301])
@pytest.mark.parametrize("ratio", RATIOS)
def test_cell_quotas_exact(k, n, ratio):
    q = cell_quotas(n, ratio, k)
    n_cons = int(np.floor(ratio * n + 0.5))
    assert q.shape == (k, k) and q.sum() == n
    assert np.trace(q) == n_cons
    diag, off = np.diag(q), q[~np.eye(k, dtype=bool)]
    assert diag.max() - diag.min() <= 1 and off.max() - off.min() <= 1
    # Remainders go to the lowest labels first.
    assert list(diag) == sorted(diag, reverse=True)
    # Within the anti group, labels and shortcuts are balanced to ±1.
    anti = q * (1 - np.eye(k, dtype=np.int64))
    for counts in (anti.sum(axis=1), anti.sum(axis=0)):
        assert counts.max() - counts.min() <= 1


def test_cell_quotas_known_values():
    assert cell_quotas(10, 0.9, 2).tolist() == [[5, 1], [0, 4]]
    assert cell_quotas(10, 0.0, 3).tolist() == [[0, 2, 2], [1, 0, 2], [2, 1, 0]]
    with pytest.raises(ValueError):
        cell_quotas(10, 1.5, 2)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("ratio", RATIOS)
def test_split_cells_match_quotas(k, ratio):
    d = gen(k=k, ratio=ratio)
    assert set(d) == {"train", "val", "adv"}
    n = SMALL["n_train"]
    assert np.array_equal(crosstab(d["train"], k), cell_quotas(n, ratio, k))
    assert d["train"].consistent.sum() == int(np.floor(ratio * n + 0.5))
    assert np.array_equal(crosstab(d["val"], k), cell_quotas(SMALL["n_eval"], 1.0, k))
    assert np.array_equal(crosstab(d["adv"], k), cell_quotas(SMALL["n_eval"], 0.0, k))
    # Class balance within the consistent and the anti group, to ±1 per label.
    for sp in d.values():
        for group in (sp.consistent, ~sp.consistent):
            if group.sum() == 0:
                continue
            counts = np.bincount(sp.label[group], minlength=k)
            assert counts.max() - counts.min() <= 1


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("shortcut", ["max", "first"])
def test_labels_shortcuts_values_shapes(k, shortcut):
    d = gen(k=k, shortcut=shortcut, ratio=0.9)
    sizes = {"train": SMALL["n_train"], "val": SMALL["n_eval"], "adv": SMALL["n_eval"]}
    for name, sp in d.items():
        assert len(sp) == sizes[name]
        assert sp.x.shape == (sizes[name], SMALL["seq_len"]) and sp.x.dtype == np.int64
        assert sp.label.shape == sp.shortcut.shape == (sizes[name],)
        assert sp.label.dtype == sp.shortcut.dtype == np.int64
        assert sp.consistent.dtype == bool
        assert sp.x.min() >= 0 and sp.x.max() < SMALL["vocab"]
        for row, y, s in zip(sp.x.tolist(), sp.label.tolist(), sp.shortcut.tolist(), strict=True):
            assert y == sum(row) % k
            assert s == (max(row) if shortcut == "max" else row[0]) % k
    assert d["val"].consistent.all()
    assert not d["adv"].consistent.any()


def test_label_and_shortcut_helpers():
    x = np.array([[5, 1, 2], [0, 0, 7]])
    assert label_of(x, 3).tolist() == [2, 1]
    assert shortcut_of(x, 3, "max").tolist() == [2, 1]
    assert shortcut_of(x, 2, "first").tolist() == [1, 0]
    with pytest.raises(ValueError):
        shortcut_of(x, 2, "last")


@pytest.mark.parametrize(
    "kw",
    [
        {},
        dict(vocab=4, seq_len=7, n_train=500, n_eval=100),
        dict(vocab=4, seq_len=10, n_train=20000, n_eval=1000),
    ],
)
def test_no_duplicates_within_or_across(kw):
    # Small spaces (4**7 is enumerated, 4**10 sampled) where collisions would be common.
    d = gen(k=2, ratio=0.3, **kw)
    seen: set[tuple[int, ...]] = set()
    for sp in d.values():
        r = rows(sp)
        assert len(set(r)) == len(r)
        assert seen.isdisjoint(r)
        seen.update(r)


def test_no_duplicates_bytes_keys():
    # vocab**seq_len >= 2**63: dedup must compare row bytes instead of int64 codes.
    d = gen(k=3, vocab=4096, seq_len=6, n_train=400, n_eval=100)
    all_rows = [r for sp in d.values() for r in rows(sp)]
    assert len(set(all_rows)) == len(all_rows)


def test_determinism_and_seed_dependence():
    a, b = gen(k=3, ratio=0.7), gen(k=3, ratio=0.7)
    for name in a:
        for f in ("x", "label", "shortcut"):
            assert np.array_equal(getattr(a[name], f), getattr(b[name], f))
    c = gen(k=3, ratio=0.7, data_seed=4)
    for name in a:
        assert not np.array_equal(a[name].x, c[name].x)


def test_eval_sets_independent_of_ratio_and_n_train():
    a, b = gen(k=3, ratio=0.9), gen(k=3, ratio=0.2, n_train=700)
    for name in ("val", "adv"):
        assert np.array_equal(a[name].x, b[name].x)
    assert not np.array_equal(a["train"].x[:700], b["train"].x)


def test_shuffled_within_split():
    # Cells must be interleaved, not laid out block by block.
    sp = gen(k=2, ratio=0.5)["train"]
    assert np.count_nonzero(np.diff(sp.consistent.astype(int))) > len(sp) // 4


@pytest.mark.parametrize(
    "kw",
    [
        dict(k=2, vocab=4, seq_len=2, n_train=10000),  # fewer sequences than examples
        dict(k=3, vocab=4, seq_len=3, n_train=20, n_eval=16),  # a (label, shortcut) cell too small
    ],
)
def test_too_small_space_raises(kw):
    with pytest.raises(ValueError, match="MPSP"):
        gen(**kw)


def test_from_config_cached_and_frozen():
    cfg = MPSPRunConfig(n_train=256, n_eval=64, label_mod=3, ratio=0.25, data_seed=1)
    d1, d2 = mpsp_from_config(cfg), mpsp_from_config(cfg.model_copy(update={"seed": 5}))
    assert d1["train"] is d2["train"]  # model seed is not a task field: same cached data
    assert len(d1["train"]) == 256 and len(d1["val"]) == 64
    assert d1["train"].consistent.sum() == 64
    with pytest.raises(ValueError):
        d1["train"].x[0, 0] = 1  # shared between members: must not be mutable


def test_frame_and_parquet_round_trip(tmp_path):
    d = gen(k=3, shortcut="first", ratio=0.4, n_train=50, n_eval=20)
    df = to_frame(d)
    assert list(df.columns) == ["split", "x", "label", "shortcut", "consistent"]
    assert df["split"].value_counts().to_dict() == {"train": 50, "val": 20, "adv": 20}
    path = tmp_path / "mpsp.parquet"
    write_parquet(d, path)
    assert [p.name for p in tmp_path.iterdir()] == ["mpsp.parquet"]  # no temp file left
    back = pd.read_parquet(path)
    assert back["split"].tolist() == df["split"].tolist()
    for col in ("label", "shortcut", "consistent"):
        assert back[col].tolist() == df[col].tolist()
    assert [list(map(int, r)) for r in back["x"]] == df["x"].tolist()
    for name, sp in d.items():
        part = back[back["split"] == name]
        assert np.array_equal(np.stack(part["x"].to_numpy()), sp.x)
        assert part["consistent"].to_numpy().tolist() == sp.consistent.tolist()
