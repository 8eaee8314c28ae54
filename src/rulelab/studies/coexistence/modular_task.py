"""Modular arithmetic with label noise (SPEC M.1): ``c = a ∘ b mod P``, ``∘ ∈ {add, sub, mul}``.

All pairs ``(a, b) ∈ [0, P)²`` (``[1, P)²`` with ``drop_zero``, for mul) are shuffled by the data
seed and cut into train (the first ``⌊f·K² + ½⌋``, at least 1) and test. Exactly
``⌊α·N + ½⌋`` of the ``N`` train labels are corrupted; test labels stay clean.

Two independent random streams per data seed: the *split* stream (pair order) and the *noise*
stream, which draws one priority and one label variate per pair ``(a, b)`` (indexed
``a·P + b``, so independent of the split and of ``α``). The corrupted examples are the train
examples of lowest priority, so for one data seed the noisy sets are nested in ``α``
(the α = 0.3 set ⊂ the α = 0.5 set, with the same wrong labels) and every α shares the split.

Noise modes:

- ``wrong`` (default): a uniformly random *wrong* label, ``c + 1 + ⌊r·(P−1)⌋ mod P``.
- ``uniform``: uniform over all ``P`` labels, ``⌊r·P⌋``; about 1/P of the corrupted examples keep
  their true label. ``noisy`` marks the examples *selected* for corruption, so its count is
  exactly ``⌊α·N + ½⌋`` in every mode.
- ``symmetric``: ``(a, b)`` and ``(b, a)`` share priority and wrong label (uniform over the labels
  that are wrong for both; for add/mul that is the P−1 wrong labels). Corruption is chosen by
  unordered pair, so both are corrupted together when both are in train. To hit the exact count,
  pairs are taken in priority order while they fit; a remaining deficit of one is filled by the
  next singleton (a diagonal ``(a, a)`` or a pair whose mirror is in test) — or, in the rare case
  that none is left, by one half of a pair, which then breaks the symmetry for that pair alone.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

OPS = ("add", "sub", "mul")
NOISE_MODES = ("wrong", "uniform", "symmetric")


@dataclass(frozen=True)
class ModularData:
    """Train/test pairs of one task draw. ``x`` are ``(a, b)`` rows; all arrays int64 but
    ``noisy`` (bool); read-only (cached and shared between ensemble members)."""

    p: int
    x_train: np.ndarray  # [N, 2]
    y_train: np.ndarray  # [N] training labels (noisy where ``noisy``)
    y_train_true: np.ndarray  # [N] clean labels a ∘ b mod P
    noisy: np.ndarray  # [N] bool: selected for corruption
    x_test: np.ndarray  # [T, 2]
    y_test: np.ndarray  # [T] clean

    @property
    def n_noisy(self) -> int:
        return int(self.noisy.sum())


def apply_op(op: str, a: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    """``a ∘ b mod P`` elementwise (int64)."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if op == "add":
        return (a + b) % p
    if op == "sub":
        return (a - b) % p
    if op == "mul":
        return (a * b) % p
    raise ValueError(f"op must be one of {OPS}, got {op!r}")


def _symmetric_pick(gkey: np.ndarray, prio: np.ndarray, n_noisy: int) -> np.ndarray:
    """Indices of ``n_noisy`` examples taken by group (``gkey``) in ``prio`` order (see module)."""
    order = np.lexsort((gkey, prio))  # by priority, ties by key: groups are contiguous
    g = gkey[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    sizes = np.diff(np.r_[starts, len(g)])
    csum = np.cumsum(sizes)
    k = int(np.searchsorted(csum, n_noisy, side="right"))  # groups that fit whole
    taken = int(csum[k - 1]) if k else 0
    picked = order[:taken]
    if taken < n_noisy:  # deficit of exactly one (sizes are 1 or 2)
        singles = np.flatnonzero(sizes[k:] == 1)
        start = starts[k + singles[0]] if len(singles) else starts[k]
        picked = np.r_[picked, order[start]]
    return picked


def make_modular(
    *,
    op: str,
    p: int,
    drop_zero: bool = False,
    train_frac: float = 0.5,
    noise: float = 0.0,
    noise_mode: str = "wrong",
    data_seed: int = 0,
) -> ModularData:
    """Build the train/test split with ``noise`` label noise (SPEC M.1); deterministic."""
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    if noise_mode not in NOISE_MODES:
        raise ValueError(f"noise_mode must be one of {NOISE_MODES}, got {noise_mode!r}")
    if p < 2 or not 0.0 < train_frac <= 1.0 or not 0.0 <= noise <= 1.0 or data_seed < 0:
        raise ValueError("need P ≥ 2, train_frac ∈ (0, 1], noise ∈ [0, 1], data_seed ≥ 0")
    vals = np.arange(1 if drop_zero else 0, p, dtype=np.int64)
    K2 = len(vals) ** 2
    if K2 == 0:
        raise ValueError(f"no pairs: P = {p} with drop_zero leaves no values")
    a, b = np.meshgrid(vals, vals, indexing="ij")
    pairs = np.stack([a.ravel(), b.ravel()], axis=1)  # [K², 2]
    split_rng = np.random.default_rng(np.random.SeedSequence([data_seed, 0]))
    pairs = pairs[split_rng.permutation(K2)]
    n_train = min(K2, max(1, int(np.floor(train_frac * K2 + 0.5))))
    x_train, x_test = pairs[:n_train], pairs[n_train:]
    ta, tb = x_train[:, 0], x_train[:, 1]
    y_true = apply_op(op, ta, tb, p)

    # Per-pair variates, indexed a·P + b (the same draws whatever the split or α).
    noise_rng = np.random.default_rng(np.random.SeedSequence([data_seed, 1]))
    prio = noise_rng.random(p * p)
    r = noise_rng.random(p * p)
    n_noisy = int(np.floor(noise * n_train + 0.5))
    key = ta * p + tb  # [N]
    lo, hi = np.minimum(ta, tb), np.maximum(ta, tb)
    gkey = lo * p + hi  # [N] unordered pair
    if noise_mode == "symmetric":
        picked = _symmetric_pick(gkey, prio[gkey], n_noisy)
        t1, t2 = apply_op(op, lo, hi, p), apply_op(op, hi, lo, p)  # both true labels
        e1, e2 = np.minimum(t1, t2), np.maximum(t1, t2)
        n_excl = 1 + (e1 != e2)
        c = np.floor(r[gkey] * (p - n_excl)).astype(np.int64)  # index among allowed labels
        c += c >= e1  # skip the excluded labels in ascending order
        c += (e2 != e1) & (c >= e2)
        wrong = c
    else:
        picked = np.argsort(prio[key], kind="stable")[:n_noisy]
        if noise_mode == "wrong":
            wrong = (y_true + 1 + np.floor(r[key] * (p - 1)).astype(np.int64)) % p
        else:  # uniform
            wrong = np.floor(r[key] * p).astype(np.int64)
    noisy = np.zeros(n_train, dtype=bool)
    noisy[picked] = True
    y_train = np.where(noisy, wrong, y_true)
    return ModularData(
        p, *(_frozen(x) for x in (x_train, y_train, y_true, noisy, x_test,
                                  apply_op(op, x_test[:, 0], x_test[:, 1], p)))
    )


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


_TASK_FIELDS = ("op", "p", "drop_zero", "train_frac", "noise", "noise_mode", "data_seed")


@functools.lru_cache(maxsize=64)
def _cached(key: tuple) -> ModularData:
    return make_modular(**dict(zip(_TASK_FIELDS, key, strict=True)))


def modular_from_config(cfg) -> ModularData:
    """Data for a :class:`rulelab.config.ModularRunConfig`, cached on its task fields."""
    return _cached(tuple(getattr(cfg, f) for f in _TASK_FIELDS))


def to_frame(data: ModularData) -> pd.DataFrame:
    """One row per example: split, a, b, label, true_label, noisy."""
    n_test = len(data.y_test)
    return pd.DataFrame({
        "split": ["train"] * len(data.y_train) + ["test"] * n_test,
        "a": np.r_[data.x_train[:, 0], data.x_test[:, 0]],
        "b": np.r_[data.x_train[:, 1], data.x_test[:, 1]],
        "label": np.r_[data.y_train, data.y_test],
        "true_label": np.r_[data.y_train_true, data.y_test],
        "noisy": np.r_[data.noisy, np.zeros(n_test, dtype=bool)],
    })


def write_parquet(data: ModularData, path) -> None:
    """Write :func:`to_frame` as parquet atomically (temp file in the same dir, then replace)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rulelab.store.atomic import atomic_write

    table = pa.Table.from_pandas(to_frame(data), preserve_index=False)
    atomic_write(Path(path), lambda f: pq.write_table(table, f))
