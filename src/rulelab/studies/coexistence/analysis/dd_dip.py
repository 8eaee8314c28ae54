"""The dip of a double-descent curve in width (SPEC M.4.1): located, and called only beyond the
seed spread.

Input: a table of test accuracy vs width over seeds — :func:`.analysis.tables.dd_table`
(``*by, width, mean, min, max, n`` and, when known, the mean final ``final_noisy_acc`` /
``final_clean_acc``). Per curve (each value of the ``by`` columns, e.g. per α):

- **interpolation threshold**: the smallest width whose mean final train accuracy on the noisy
  training set (against the corrupted labels; the clean set when α = 0) reaches
  ``interp_acc`` (default 0.99, "≈ 100%").
- **dip**: an interior width ``i`` (not the first or last of the grid) whose mean test accuracy
  is below a width before it *and* a width after it. Its depth is the smaller of the fall into it
  (the highest mean before it − its mean) and the rise after it (the highest mean after it − its
  mean); the deepest is reported.
- **called**: only when both the fall and the rise exceed the seed spread — the seed range
  ``[min, max]`` at the dip lies entirely below the seed ranges at the peak before it and at the
  peak after it — with at least 2 seeds at each of the three widths (one seed has no spread).
  A monotone curve has no interior dip; a curve lowest at the smallest width reads "no dip in
  the widths covered" (the descent before it would be outside the grid), with its rise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

STAT_COLUMNS = ("width", "mean", "std", "min", "max", "n", "final_clean_acc", "final_noisy_acc",
                "n_test", "chance")
DIP_COLUMNS = ("interp_width", "dip_width", "dip_acc", "dip_min", "dip_max", "before_width",
               "before_acc", "peak_width", "peak_acc", "peak_min", "fall", "rise", "called",
               "reading")


def interpolation_width(curve: pd.DataFrame, noise: float, interp_acc: float = 0.99) -> float:
    """Smallest width whose mean final train accuracy (noisy set vs its corrupted labels; clean
    set at α = 0) is ≥ ``interp_acc``; NaN if none does or the column is missing."""
    col = "final_noisy_acc" if noise > 0 else "final_clean_acc"
    if col not in curve:
        return math.nan
    hit = curve[pd.to_numeric(curve[col], errors="coerce") >= interp_acc]
    return float(hit["width"].min()) if len(hit) else math.nan


def _pct(v: float) -> str:
    return f"{v:.1%}"


def _at(c: pd.DataFrame, i: int) -> str:
    r = c.iloc[i]
    return f"{_pct(r['mean'])} [{_pct(r['min'])}, {_pct(r['max'])}] at M = {int(r['width'])}"


def noise_floor(acc: float, c: pd.DataFrame) -> float:
    """``2·SE`` of a test accuracy ``acc`` measured on the curve's ``n_test`` examples (0 when
    the table does not say how many)."""
    if "n_test" not in c or not (c["n_test"] > 0).all():
        return 0.0
    n_test = float(c["n_test"].min())
    a = min(max(acc, 1.0 / n_test), 1.0 - 1.0 / n_test)
    return 2.0 * math.sqrt(a * (1.0 - a) / n_test)


def _chance(c: pd.DataFrame) -> float:
    return float(c["chance"].max()) if "chance" in c else 0.0


def _dip(c: pd.DataFrame) -> dict:
    """Deepest interior dip of one curve sorted by width (module docstring)."""
    mean = c["mean"].to_numpy(float)
    lo, hi, n = (c[k].to_numpy(float) for k in ("min", "max", "n"))
    chance = _chance(c)
    best = None
    for i in range(1, len(c) - 1):
        j = int(np.argmax(mean[:i]))
        k = i + 1 + int(np.argmax(mean[i + 1:]))
        fall, rise = mean[j] - mean[i], mean[k] - mean[i]
        if min(fall, rise) <= 0:
            continue
        floor = noise_floor(mean[i], c)
        above_noise = min(fall, rise) > floor and mean[k] > chance + floor
        called = bool(lo[j] > hi[i] and lo[k] > hi[i] and min(n[i], n[j], n[k]) >= 2
                      and above_noise)
        cand = (called, min(fall, rise), i, j, k, fall, rise)
        if best is None or cand[:2] > best[:2]:
            best = cand
    if best is None:
        return {}
    called, _, i, j, k, fall, rise = best
    w = c["width"].to_numpy(float)
    return dict(dip_width=w[i], dip_acc=mean[i], dip_min=lo[i], dip_max=hi[i],
                before_width=w[j], before_acc=mean[j], peak_width=w[k], peak_acc=mean[k],
                peak_min=lo[k], fall=fall, rise=rise, called=called, _i=i, _j=j, _k=k)


def _where(c: pd.DataFrame, noise: float, interp: float, interp_acc: float) -> str:
    col, subset = (("final_noisy_acc", "noisy") if noise > 0 else ("final_clean_acc", "clean"))
    if interp == interp:
        return (f"interpolation threshold M = {int(interp)} (final train accuracy on the "
                f"{subset} set ≥ {interp_acc:.0%})")
    if col not in c:
        return "interpolation threshold unknown (no final train accuracy)"
    return f"no width interpolates (best final {subset}-train accuracy {c[col].max():.1%})"


def _reading(c: pd.DataFrame, d: dict, where: str) -> str:
    span = f"M = {int(c['width'].iloc[0])}…{int(c['width'].iloc[-1])}"
    if len(c) < 3:
        return f"too few widths for a dip ({span}); {where}"
    if not d:
        mean = c["mean"].to_numpy(float)
        i0 = int(np.argmin(mean))
        if i0 == 0 and mean[1:].max() > mean[0]:
            k = int(np.argmax(mean))
            beyond = c["min"].iloc[k] > c["max"].iloc[0]
            return (f"no dip in the widths covered ({span}): lowest at the smallest width, "
                    f"{_at(c, 0)}; rises to {_at(c, k)} ({100 * (mean[k] - mean[0]):+.1f} "
                    f"points, {'beyond' if beyond else 'within'} the seed ranges); {where}")
        return f"no dip: test accuracy does not fall and rise again over {span}; {where}"
    i, k = d["_i"], d["_k"]
    if d["called"]:
        return (f"dip at M = {int(d['dip_width'])}: test {_pct(d['dip_acc'])} "
                f"[{_pct(d['dip_min'])}, {_pct(d['dip_max'])}], down from {_at(c, d['_j'])}; "
                f"rises to {_at(c, k)} ({100 * d['rise']:+.1f} points, beyond the seed "
                f"ranges); {where}")
    floor, chance = noise_floor(d["dip_acc"], c), _chance(c)
    if min(c["n"].iloc[[d["_j"], i, k]]) < 2:
        why = "one seed: no spread to compare"
    elif min(d["fall"], d["rise"]) <= floor or d["peak_acc"] <= chance + floor:
        why = (f"the fall or the rise, or the peak's height above chance {_pct(chance)}, is within "
               f"the test set's sampling noise, ±{100 * floor:.1f} points at "
               f"n_test = {int(c['n_test'].min()):,}")
    else:
        why = "the fall into it or the rise after it lies within the seed ranges"
    return (f"no dip beyond the seed spread: deepest interior low {_at(c, i)}, between "
            f"{_at(c, d['_j'])} and {_at(c, k)} — not called ({why}); {where}")


def dip_reading(dd: pd.DataFrame, *, by: Sequence[str] | None = None,
                interp_acc: float = 0.99) -> pd.DataFrame:
    """One row per curve of ``dd``: ``*by`` and :data:`DIP_COLUMNS` (module docstring).

    ``by`` defaults to every column of ``dd`` that is not a width statistic (normally
    ``noise`` and the config columns that vary).
    """
    for col in ("width", "mean", "min", "max", "n"):
        if col not in dd.columns:
            raise KeyError(f"dip_reading: table has no column {col!r}")
    by = [c for c in dd.columns if c not in STAT_COLUMNS] if by is None else list(by)
    rows = []
    groups = dd.groupby(by, dropna=False, sort=True) if by else [((), dd)]
    for key, c in groups:
        key = key if isinstance(key, tuple) else (key,)
        c = c.dropna(subset=["mean"]).sort_values("width").reset_index(drop=True)
        if c.empty:
            continue
        noise = float(dict(zip(by, key, strict=True)).get("noise", 1.0))
        interp = interpolation_width(c, noise, interp_acc)
        d = _dip(c) if len(c) >= 3 else {}
        row = {**dict(zip(by, key, strict=True)), **dict.fromkeys(DIP_COLUMNS, math.nan)}
        row.update({k: v for k, v in d.items() if not k.startswith("_")})
        row.update(interp_width=interp, called=bool(d.get("called", False)),
                   reading=_reading(c, d, _where(c, noise, interp, interp_acc)))
        rows.append(row)
    return pd.DataFrame(rows, columns=[*by, *DIP_COLUMNS])
