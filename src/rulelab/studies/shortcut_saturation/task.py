"""MPSP data: sum-mod-k labels with a max/first shortcut, exact stratified splits (SPEC S.1).

An example is a sequence ``x`` of ``seq_len`` integers in ``[0, vocab)``; the label is
``sum(x) mod k`` and the shortcut is ``max(x) mod k`` ("max") or ``x[0] mod k`` ("first").
Each split is filled cell by cell, (label, shortcut) cell quotas being exact (:func:`cell_quotas`),
by vectorized rejection sampling of uniform sequences, without duplicate sequences anywhere.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

SHORTCUTS = ("max", "first")
# Spaces up to this size are enumerated (one permutation of all sequences) instead of sampled:
# exact, and it turns "space too small" into a clean error instead of an endless loop.
_ENUMERATE_MAX = 2**18
_CHUNK_MIN, _CHUNK_MAX = 2**12, 2**21


@dataclass(frozen=True)
class MPSPSplit:
    """One split: sequences ``x`` [N, seq_len], ``label`` [N] and ``shortcut`` [N] (int64)."""

    x: np.ndarray
    label: np.ndarray
    shortcut: np.ndarray

    @property
    def consistent(self) -> np.ndarray:
        """[N] bool: shortcut agrees with the label (SPEC S.1)."""
        return self.label == self.shortcut

    def __len__(self) -> int:
        return int(self.label.shape[0])


def label_of(x: np.ndarray, k: int) -> np.ndarray:
    """True label ``sum(x) mod k`` per row (SPEC S.1)."""
    return np.asarray(x, dtype=np.int64).sum(axis=-1) % k


def shortcut_of(x: np.ndarray, k: int, kind: str) -> np.ndarray:
    """Shortcut ``max(x) mod k`` (kind "max") or ``x[0] mod k`` (kind "first") per row."""
    x = np.asarray(x, dtype=np.int64)
    if kind == "max":
        return x.max(axis=-1) % k
    if kind == "first":
        return x[..., 0] % k
    raise ValueError(f"shortcut must be one of {SHORTCUTS}, got {kind!r}")


def cell_quotas(n: int, ratio: float, k: int) -> np.ndarray:
    """Exact example counts per (label y, shortcut s) cell, shape [k, k] (SPEC S.1).

    ``n_cons = floor(ratio*n + 0.5)`` consistent examples share the k diagonal cells evenly
    (remainder to the lowest labels); the other ``n - n_cons`` share the k(k-1) off-diagonal
    cells evenly. Off-diagonal remainders go in order of offset ``(s - y) mod k`` then label,
    i.e. (0,1),(1,2),(2,0),(0,2),... so that within the anti group both labels and shortcuts
    stay balanced to ±1 (a plain row-major order would give label 0 up to 2 extra for k=3).
    """
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio must be in [0, 1], got {ratio}")
    n_cons = int(np.floor(ratio * n + 0.5))
    q = np.zeros((k, k), dtype=np.int64)
    base, rem = divmod(n_cons, k)
    q[np.arange(k), np.arange(k)] = base + (np.arange(k) < rem)
    base, rem = divmod(n - n_cons, k * (k - 1))
    off = [(y, (y + j) % k) for j in range(1, k) for y in range(k)]
    for i, (y, s) in enumerate(off):
        q[y, s] = base + (i < rem)
    return q


def _keys(x: np.ndarray, vocab: int) -> np.ndarray:
    """Exact per-row keys for dedup: base-``vocab`` int64 codes when they fit, else row bytes."""
    if vocab ** x.shape[1] < 2**63:
        code = np.zeros(x.shape[0], dtype=np.int64)
        for j in range(x.shape[1]):  # Horner; no overflow since vocab**seq_len < 2**63
            code = code * vocab + x[:, j]
        return code
    return np.ascontiguousarray(x).view(np.dtype((np.void, 8 * x.shape[1]))).ravel()


def _fill(rng, quotas, *, name, seq_len, vocab, kind, seen):
    """Draw sequences until every cell of ``quotas`` is full; skip keys in ``seen``.

    Returns (x, label, shortcut) shuffled, and the accepted keys.
    """
    k = quotas.shape[0]
    need = quotas.ravel().copy()
    space = vocab**seq_len  # Python int: exact even when huge
    enumerate_all = space <= _ENUMERATE_MAX
    budget = max(2**22, 100 * int(need.sum()))  # draws before declaring a cell unreachable
    found = np.zeros(k * k)
    drawn, parts = 0, []
    while need.any():
        if enumerate_all and drawn:
            break  # the whole space was scanned once: quotas cannot be met
        if drawn >= budget:
            break
        if enumerate_all:
            code = rng.permutation(space)
            pw = vocab ** np.arange(seq_len - 1, -1, -1, dtype=np.int64)
            x = (code[:, None] // pw) % vocab
        else:
            # Size the chunk from observed per-cell acceptance rates (a k*k guess at first).
            rate = np.maximum(found / drawn, 1e-6) if drawn else np.full(k * k, 1.0 / (k * k))
            want = 1.25 * float(np.max(np.where(need > 0, need / rate, 0.0)))
            x = rng.integers(0, vocab, size=(int(np.clip(want, _CHUNK_MIN, _CHUNK_MAX)), seq_len))
        drawn += len(x)
        keys = _keys(x, vocab)
        fresh = np.zeros(len(x), dtype=bool)
        fresh[np.unique(keys, return_index=True)[1]] = True  # first occurrence within chunk
        for s in seen:
            fresh &= ~np.isin(keys, s)
        cell = label_of(x, k) * k + shortcut_of(x, k, kind)
        found += np.bincount(cell[fresh], minlength=k * k)
        take = []
        for c in np.flatnonzero(need):
            idx = np.flatnonzero(fresh & (cell == c))[: need[c]]
            need[c] -= len(idx)
            take.append(idx)
        take = np.concatenate(take)
        parts.append((x[take], keys[take]))
        seen = [*seen, keys[take]]  # keep later chunks from repeating accepted rows
    if need.any():
        bad = [(int(c) // k, int(c) % k) for c in np.flatnonzero(need)]
        raise ValueError(
            f"could not fill MPSP {name} cell quotas (label, shortcut) {bad} after {drawn} draws: "
            f"the space of {vocab}**{seq_len} sequences is too small or too skewed for them"
        )
    x = np.concatenate([p[0] for p in parts]).astype(np.int64)
    keys = np.concatenate([p[1] for p in parts])
    order = rng.permutation(len(x))  # interleave cells
    x, keys = x[order], keys[order]
    return MPSPSplit(*(_frozen(a) for a in (x, label_of(x, k), shortcut_of(x, k, kind)))), keys


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False  # splits are cached and shared between ensemble members
    return a


def make_mpsp(
    *,
    label_mod: int,
    shortcut: str,
    ratio: float,
    seq_len: int,
    vocab: int,
    n_train: int,
    n_eval: int,
    data_seed: int,
) -> dict[str, MPSPSplit]:
    """Build the MPSP splits (SPEC S.1): train (n_train at ``ratio``), val (r=1), adv (r=0).

    val and adv depend only on the task fields, ``n_eval`` and ``data_seed`` — not on ``ratio``
    or ``n_train`` — so members with different r sharing a data seed see identical eval sets.
    No sequence appears twice within or across splits. Deterministic in its arguments.
    """
    k = int(label_mod)
    if k < 2:
        raise ValueError(f"label_mod must be ≥ 2, got {label_mod}")
    if shortcut not in SHORTCUTS:
        raise ValueError(f"shortcut must be one of {SHORTCUTS}, got {shortcut!r}")
    if seq_len < 1 or vocab < k or n_train < 1 or n_eval < 1 or data_seed < 0:
        raise ValueError("need seq_len ≥ 1, vocab ≥ label_mod, n_train, n_eval ≥ 1, data_seed ≥ 0")
    kw = dict(seq_len=seq_len, vocab=vocab, kind=shortcut)
    train_q = cell_quotas(n_train, ratio, k)  # validates ratio before any work
    if n_train + 2 * n_eval > vocab**seq_len:
        raise ValueError(
            f"MPSP sequence space too small: {vocab}**{seq_len} = {vocab**seq_len} sequences "
            f"< n_train + 2*n_eval = {n_train + 2 * n_eval}"
        )
    eval_rng = np.random.default_rng(np.random.SeedSequence([data_seed, 1]))
    val, val_keys = _fill(eval_rng, cell_quotas(n_eval, 1.0, k), name="val", seen=[], **kw)
    adv, adv_keys = _fill(eval_rng, cell_quotas(n_eval, 0.0, k), name="adv", seen=[val_keys], **kw)
    # The train stream is separate (and keyed on r) so it never perturbs val/adv.
    train_rng = np.random.default_rng(
        np.random.SeedSequence([data_seed, 2, int(round(ratio * 1e6)), n_train])
    )
    train, _ = _fill(train_rng, train_q, name="train", seen=[val_keys, adv_keys], **kw)
    return {"train": train, "val": val, "adv": adv}


_TASK_FIELDS = (
    "label_mod",
    "shortcut",
    "ratio",
    "seq_len",
    "vocab",
    "n_train",
    "n_eval",
    "data_seed",
)


@functools.lru_cache(maxsize=64)
def _cached(key: tuple) -> dict[str, MPSPSplit]:
    return make_mpsp(**dict(zip(_TASK_FIELDS, key, strict=True)))


def mpsp_from_config(cfg) -> dict[str, MPSPSplit]:
    """Splits for an :class:`rulelab.config.MPSPRunConfig`, cached on its task fields."""
    return dict(_cached(tuple(getattr(cfg, f) for f in _TASK_FIELDS)))


def to_frame(splits: dict[str, MPSPSplit]) -> pd.DataFrame:
    """One row per example: split, x (list of int), label, shortcut, consistent."""
    frames = [
        pd.DataFrame(
            {
                "split": name,
                "x": sp.x.tolist(),
                "label": np.asarray(sp.label, dtype=np.int64),
                "shortcut": np.asarray(sp.shortcut, dtype=np.int64),
                "consistent": np.asarray(sp.consistent, dtype=bool),
            }
        )
        for name, sp in splits.items()
    ]
    return pd.concat(frames, ignore_index=True)


def write_parquet(splits: dict[str, MPSPSplit], path) -> None:
    """Write :func:`to_frame` as parquet atomically (temp file in the same dir, then replace)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rulelab.store.atomic import atomic_write

    table = pa.Table.from_pandas(to_frame(splits), preserve_index=False)
    atomic_write(Path(path), lambda f: pq.write_table(table, f))
