"""Rates with honest uncertainty: Wilson intervals and per-configuration rate tables.

Generic over studies: a study says what its ``generalized`` flag means (its summary) and adds
its own columns (e.g. study S's adv-only reading, in its package).

SPEC S.3: "The generalization rate of a configuration is the fraction of seeds that
generalize; always report it with a 95% Wilson interval and n." SPEC "Cross-cutting": rates
carry Wilson intervals and counts.

The Wilson score interval (Wilson 1927) for ``k`` successes in ``n`` trials at normal quantile
``z`` is

    centre ± half = (k + z²/2) / (n + z²)  ±  z·√(k(n−k)/n + z²/4) / (n + z²)

It stays inside [0, 1] and is sensible at k = 0 and k = n, where the normal (Wald) interval
collapses to a point. With n ≈ 30 seeds per cell (the paper's scale) the interval is wide —
23/30 is [59%, 88%] — which is exactly why it must be shown.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

Z95 = 1.959963984540054  # Φ⁻¹(0.975): two-sided 95%

def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval for ``k`` of ``n`` (SPEC S.3); ``n = 0`` gives (0, 1)."""
    lo, hi = wilson_arrays(np.asarray(k), np.asarray(n), z)
    return float(lo), float(hi)


def wilson_arrays(k, n, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized :func:`wilson` over broadcastable arrays of counts ``k`` and totals ``n``."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if np.any(k < 0) or np.any(k > n):
        raise ValueError("wilson: counts must satisfy 0 ≤ k ≤ n")
    z2 = z * z
    safe_n = np.where(n > 0, n, 1.0)  # avoid 0/0; n = 0 is overwritten below
    denom = safe_n + z2
    centre = (k + z2 / 2) / denom
    half = z * np.sqrt(k * (safe_n - k) / safe_n + z2 / 4) / denom
    # At k = 0 (k = n) the bound is exactly 0 (1); set it so rounding cannot leave 1e-17.
    lo = np.where(k > 0, np.clip(centre - half, 0.0, 1.0), 0.0)
    hi = np.where(k < n, np.clip(centre + half, 0.0, 1.0), 1.0)
    # No trials: nothing is known.
    lo = np.where(n > 0, lo, 0.0)
    hi = np.where(n > 0, hi, 1.0)
    return lo, hi


def config_columns(runs: pd.DataFrame) -> list[str]:
    """Columns of ``runs`` that define a configuration: the config fields of its tasks (its
    ``task`` column; without one, of every registered task, :mod:`rulelab.study_registry`), but the
    seed and the task name — ids, statuses, code versions and summaries are not config fields."""
    from rulelab.study_registry import tasks

    known = tasks()
    names = runs["task"].dropna().unique() if "task" in runs.columns else ()
    chosen = [known[n] for n in names if n in known] or list(known.values())
    fields = {f for t in chosen for f in t.config.model_fields} - {"seed", "task"}
    return [c for c in runs.columns if c in fields]


def varying_columns(runs: pd.DataFrame, cols: list[str] | None = None) -> list[str]:
    """Config columns that take more than one value across ``runs`` (NaN counts as a value)."""
    cols = config_columns(runs) if cols is None else cols
    return [c for c in cols if c in runs.columns and runs[c].nunique(dropna=False) > 1]


def flag_values(values: pd.Series) -> pd.Series:
    """Coerce a flag column (bool, 0/1, None/NaN) to bool; missing means False."""
    return values.map(lambda v: False if v is None or pd.isna(v) else bool(v)).astype(bool)


def rate_table(runs: pd.DataFrame, by: list[str], flag: str = "generalized") -> pd.DataFrame:
    """Rate of ``flag`` per group of ``by`` columns, over finished runs (SPEC S.3).

    Columns: ``*by, n, k, rate, ci_low, ci_high, n_failed``. ``n`` counts runs with status
    ``"done"``, ``k`` those among them whose flag is true (a missing flag on a done run counts
    as false); pending or running runs are left out, failed ones counted in ``n_failed``. A
    group with no finished run has ``n = 0``, rate NaN and interval (0, 1). A lab where no run
    has finished yet has no summary columns at all: the flag column may then be absent (every
    ``k`` is 0).
    """
    by = list(by)
    missing = [c for c in [*by, "status"] if c not in runs.columns]
    status = runs["status"].astype(str) if "status" in runs.columns else None
    if flag not in runs.columns and (status is None or status.eq("done").any()):
        missing.append(flag)  # a finished run always has its summary: a real omission
    if missing:
        raise KeyError(f"rate_table: runs has no column(s) {missing}")
    frame = pd.DataFrame({"_done": status.eq("done"), "_failed": status.eq("failed")},
                         index=runs.index)
    flags = flag_values(runs[flag]) if flag in runs.columns else False
    frame["_hit"] = frame["_done"] & flags
    keys = [runs[c] for c in by] if by else [pd.Series(0, index=runs.index)]
    grouped = frame.groupby(keys, dropna=False, sort=True)
    agg = {"n": ("_done", "sum"), "k": ("_hit", "sum"), "n_failed": ("_failed", "sum")}
    table = grouped.agg(**agg)
    table = table.reset_index(drop=not by)
    if by:
        table.columns = [*by, *agg]
    for c in ("n", "k", "n_failed"):
        table[c] = table[c].astype(np.int64)
    n, k = table["n"].to_numpy(), table["k"].to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        table["rate"] = np.where(n > 0, k / np.maximum(n, 1), np.nan)
    table["ci_low"], table["ci_high"] = wilson_arrays(k, n)
    return table[[*by, "n", "k", "rate", "ci_low", "ci_high", "n_failed"]]


def spread_table(runs: pd.DataFrame, by: list[str], column: str) -> pd.DataFrame:
    """Per group of ``by`` (rows as :func:`rate_table`'s): the mean of a per-run ``column``
    over the finished (done) runs and its per-seed range, ``mean, min, max`` (SPEC
    "Cross-cutting": a mean over seeds carries its spread)."""
    done = runs["status"].astype(str).eq("done")
    values = pd.to_numeric(runs[column], errors="coerce").where(done)
    keys = [runs[c] for c in by] if by else [pd.Series(0, index=runs.index)]
    out = values.groupby(keys, dropna=False, sort=True).agg(["mean", "min", "max"])
    return out.reset_index(drop=True)


def format_range(mean: float, lo: float, hi: float) -> str:
    """``"59.0% [40.1%, 80.2%]"``: a mean over seeds with the per-seed range, or ``"–"``."""
    if pd.isna(mean):
        return "–"
    return f"{mean:.1%} [{lo:.1%}, {hi:.1%}]"


def format_rate(k: int, n: int, *, digits: int = 0) -> str:
    """``"77% [59%, 88%] (23/30)"``: rate, 95% Wilson interval and counts (SPEC S.3)."""
    if n == 0:
        return "— (0/0)"
    lo, hi = wilson(k, n)
    pct = f"{{:.{digits}%}}".format
    return f"{pct(k / n)} [{pct(lo)}, {pct(hi)}] ({k}/{n})"
