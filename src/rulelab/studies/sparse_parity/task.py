"""The sparse-parity task as pure numpy functions (no torch): the support, the label, the
fixed example sets, and ``rulelab data sparse_parity``.

Inputs are ``x ∈ {−1, +1}^n`` uniform and the label is ``y = χ_S(x) = ∏_{i∈S} x_i`` for the hidden
support ``S`` (|S| = k), as in Barak et al. (2022). Random streams of ``data_seed``: 0 draws S,
1 the fixed training set (``samples = fixed``), 2 the evaluation set every run is scored on;
fresh training batches come from each member's own generator (:mod:`.data`).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

SUPPORT_STREAM, TRAIN_STREAM, EVAL_STREAM = 0, 1, 2
MAX_OTHER_SUBSETS = 2048  # k-subsets the Fourier gap compares S with (all, if fewer)
DATA_FIELDS = ("n_bits", "k", "support", "samples", "n_train", "n_eval", "data_seed")


def _rng(data_seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(data_seed), stream]))


def draw_support(n_bits: int, k: int, data_seed: int, kind: str = "random") -> tuple[int, ...]:
    """The hidden support S, sorted: a uniform k-subset of ``range(n_bits)`` or ``0..k−1``."""
    if not 1 <= k <= n_bits:
        raise ValueError(f"k: {k} must be in [1, n_bits = {n_bits}]")
    if kind == "first":
        return tuple(range(k))
    if kind != "random":
        raise ValueError(f"support: {kind!r} is not one of 'random', 'first'")
    chosen = _rng(data_seed, SUPPORT_STREAM).choice(n_bits, size=k, replace=False)
    return tuple(sorted(int(i) for i in chosen))


def parity(x, support: Sequence[int]):
    """``χ_S(x) = ∏_{i∈S} x_i`` over the last axis of ±1 inputs (numpy or torch, any batch)."""
    return x[..., list(support)].prod(-1)


@functools.lru_cache(maxsize=32)
def _fixed_bits(n_bits: int, count: int, data_seed: int, stream: int) -> np.ndarray:
    bits = _rng(data_seed, stream).integers(0, 2, size=(count, n_bits), dtype=np.int8)
    out = (2 * bits - 1).astype(np.float32)
    out.flags.writeable = False  # cached: shared by every caller
    return out


def fixed_bits(n_bits: int, count: int, data_seed: int, stream: int) -> np.ndarray:
    """``count`` uniform ±1 examples ``[count, n_bits]`` (float32) from ``(data_seed, stream)``;
    cached and read-only."""
    return _fixed_bits(int(n_bits), int(count), int(data_seed), int(stream))


def other_subsets(n_bits: int, k: int, support, seed: int = 0,
                  limit: int = MAX_OTHER_SUBSETS) -> np.ndarray:
    """The k-subsets other than ``support`` (``[C, k]`` int64): all when there are at most
    ``limit``, else ``limit`` uniform draws (from ``seed``) distinct from S."""
    s = tuple(sorted(int(i) for i in support))
    if math.comb(n_bits, k) - 1 <= limit:
        rows = [t for t in itertools.combinations(range(n_bits), k) if t != s]
        return np.asarray(rows, dtype=np.int64).reshape(-1, k)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 3]))
    rows = []
    while len(rows) < limit:
        t = tuple(sorted(rng.choice(n_bits, size=k, replace=False).tolist()))
        if t != s:
            rows.append(t)
    return np.asarray(rows, dtype=np.int64)


def example_sets(cfg) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{split: (x [N, n], y [N])}`` of one config: ``eval``, and ``train`` when fixed."""
    S = draw_support(cfg.n_bits, cfg.k, cfg.data_seed, cfg.support)
    sets = {"eval": fixed_bits(cfg.n_bits, cfg.n_eval, cfg.data_seed, EVAL_STREAM)}
    if cfg.samples == "fixed":
        sets["train"] = fixed_bits(cfg.n_bits, cfg.n_train, cfg.data_seed, TRAIN_STREAM)
    return {name: (x, parity(x, S)) for name, x in sets.items()}


def write(data: dict, out: Path) -> str:
    """``rulelab data sparse_parity``: one row per example — ``split``, ``x`` as a string of
    ``+``/``-`` (bit i is character i) and the label ``y`` (±1) — as Parquet."""
    import pandas as pd

    from rulelab.store.atomic import atomic_write

    frames = [pd.DataFrame({"split": name,
                            "x": ["".join("+" if b > 0 else "-" for b in row) for row in x],
                            "y": y.astype(np.int8)}) for name, (x, y) in data.items()]
    frame = pd.concat(frames, ignore_index=True)
    atomic_write(Path(out), lambda f: frame.to_parquet(f, index=False))
    return f"wrote {out} ({', '.join(f'{k} {len(v[1])}' for k, v in data.items())})"
