"""The dip of a double-descent curve in width (SPEC M.4.1): located, and called only by a
test whose false-positive rate on flat curves is ≤ 5% (issue 21, item 1).

Input: a table of test accuracy vs width over seeds — :func:`.analyses.tables.dd_table`
(``*by, width, mean, std, min, max, n`` and, when known, the mean final ``final_noisy_acc`` /
``final_clean_acc``, ``n_test`` and ``chance``). Per curve (each value of the ``by`` columns,
e.g. per α):

- **interpolation threshold**: the smallest width whose mean final train accuracy on the noisy
  training set (against the corrupted labels; the clean set when α = 0) reaches
  ``interp_acc`` (default 0.99, "≈ 100%").
- **dip**: the interior width ``i`` (not the first or last of the grid) whose mean test accuracy
  lies deepest below the highest mean before it *and* the highest mean after it, in pooled
  standard errors (:mod:`.analyses.dip_test`). ``fall`` (highest mean before − its mean) and
  ``rise`` (highest mean after − its mean) are in accuracy.
- **called** when (1) the max-statistic test over every interior width gives ``p < 0.05``
  against a flat curve — the search over widths is part of the null, so the grid's size does not
  inflate the rate; (2) the fall and the rise both exceed the test set's binomial noise at the
  dip (2·SE on ``n_test`` examples; every seed of a preset shares one data seed, so one test
  set, whose sampling noise the seed spread does not contain) and the peak after it stands that
  far above chance. One seed per width has no spread: "too few seeds to call", with the seeds
  per width a dip that deep would need (:func:`.analyses.dip_test.seeds_needed`). A reading that
  is not called says how many seeds would call it with 80% power.

The old rule (seed ranges at the dip below those at the highest mean on each side) called a dip
on 47–56% of flat curves at the quick and medium grids and 9–20% at the paper's; it is kept,
for before/after comparisons only, as :func:`.analyses.dip_null.seed_range_calls`, which measures
both rates. A monotone curve has no interior dip; a curve lowest at the smallest width reads "no
dip in the widths covered" (the descent before it would be outside the grid), with its rise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from rulelab.studies.coexistence.analyses.dip_test import (
    ALPHA,
    dip_statistic,
    p_value,
    pooled_sd,
    seeds_needed,
)

STAT_COLUMNS = ("width", "mean", "std", "min", "max", "n", "final_clean_acc", "final_noisy_acc",
                "n_test", "chance")
DIP_COLUMNS = ("interp_width", "dip_width", "dip_acc", "dip_min", "dip_max", "before_width",
               "before_acc", "peak_width", "peak_acc", "peak_min", "fall", "rise", "t_stat",
               "p_value", "seed_sd", "df", "called", "reading")


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


def binomial_floor(acc: np.ndarray, n_test: float) -> np.ndarray:
    """``2·SE`` of test accuracies ``acc`` on ``n_test`` examples (array form of
    :func:`noise_floor`; 0 when ``n_test`` is unknown)."""
    acc = np.asarray(acc, float)
    if not n_test > 0:
        return np.zeros_like(acc)
    a = np.clip(acc, 1.0 / n_test, 1.0 - 1.0 / n_test)
    return 2.0 * np.sqrt(a * (1.0 - a) / n_test)


def dip_calls(means: np.ndarray, std: np.ndarray, n: np.ndarray, *, n_test: float = math.nan,
              chance: float = 0.0, alpha: float = ALPHA) -> dict[str, np.ndarray]:
    """The dip test on curves ``means [..., W]`` (widths ascending) with per-width seed SDs
    ``std [..., W]`` and seed counts ``n [W]`` (module docstring): arrays ``called, located
    (an interior width lies below both sides), p, t, sd, i, j, k, fall, rise, floor`` and the
    int ``df``. ``p`` and ``t`` are NaN with one seed per width (no seed spread: nothing to
    test against)."""
    means, n = np.asarray(means, float), np.asarray(n, int)
    sd, df = pooled_sd(std, n)
    # without a seed SD (one seed per width) the dip is still located, in mean units
    t, i, j, k = dip_statistic(means, n, sd if df else 1.0)
    located = t > 0
    t = t if df else np.full(np.shape(t), math.nan)
    dip, before, peak = (np.take_along_axis(means, idx[..., None], -1)[..., 0]
                         for idx in (i, j, k))
    fall, rise = before - dip, peak - dip
    floor = binomial_floor(dip, n_test)
    p = p_value(t, tuple(n)) if df else np.full(np.shape(t), math.nan)
    above_noise = (np.minimum(fall, rise) > floor) & (peak > chance + floor)
    called = located & (p < alpha) & above_noise
    return dict(called=called, located=located, p=p, t=t, sd=sd, df=df, i=i, j=j, k=k,
                fall=fall, rise=rise, floor=floor)


def _std(c: pd.DataFrame) -> np.ndarray:
    """Per-width seed SD: the table's ``std``, else, at two seeds, ``(max − min)/√2``."""
    if "std" in c:
        return pd.to_numeric(c["std"], errors="coerce").to_numpy(float)
    two = c["n"].to_numpy(float) == 2
    return np.where(two, (c["max"] - c["min"]).to_numpy(float) / math.sqrt(2), math.nan)


def _dip(c: pd.DataFrame) -> dict:
    """The dip test on one curve sorted by width (module docstring); ``{}`` without an interior
    width below both sides."""
    n_test = float(c["n_test"].min()) if "n_test" in c and (c["n_test"] > 0).all() else math.nan
    r = dip_calls(c["mean"].to_numpy(float)[None], _std(c)[None], c["n"].to_numpy(int),
                  n_test=n_test, chance=_chance(c))
    r = {key: v if key == "df" else v[0] for key, v in r.items()}
    if not r["located"]:
        return {}
    i, j, k = int(r["i"]), int(r["j"]), int(r["k"])
    w, lo, hi = (c[col].to_numpy(float) for col in ("width", "min", "max"))
    mean = c["mean"].to_numpy(float)
    return dict(dip_width=w[i], dip_acc=mean[i], dip_min=lo[i], dip_max=hi[i],
                before_width=w[j], before_acc=mean[j], peak_width=w[k], peak_acc=mean[k],
                peak_min=lo[k], fall=float(r["fall"]), rise=float(r["rise"]),
                called=bool(r["called"]), p_value=float(r["p"]), t_stat=float(r["t"]),
                seed_sd=float(r["sd"]), df=r["df"], _i=i, _j=j, _k=k)


def _where(c: pd.DataFrame, noise: float, interp: float, interp_acc: float) -> str:
    col, subset = (("final_noisy_acc", "noisy") if noise > 0 else ("final_clean_acc", "clean"))
    if interp == interp:
        return (f"interpolation threshold M = {int(interp)} (final train accuracy on the "
                f"{subset} set ≥ {interp_acc:.0%})")
    if col not in c:
        return "interpolation threshold unknown (no final train accuracy)"
    return f"no width interpolates (best final {subset}-train accuracy {c[col].max():.1%})"


def _needed(d: dict, c: pd.DataFrame, floor_sd: float) -> str:
    """What it would take: seeds per width for 80% power against a dip this deep."""
    depth = min(d["fall"], d["rise"])
    measured = d["seed_sd"] == d["seed_sd"] and d["seed_sd"] > 0
    sd = d["seed_sd"] if measured else floor_sd
    if not sd > 0:  # one seed and no test-set size: nothing to size the noise by
        return "at least 2 seeds per width are needed to test it"
    n = seeds_needed(depth, sd, len(c))
    at = f"{100 * depth:.1f}-point dip at a seed SD of {100 * sd:.1f} points"
    if not measured:
        at += " (the test set's binomial noise alone; more if seeds vary)"
    return (f"≈ {n} seeds per width would call a {at} with 80% power" if n else
            f"more than 20 seeds per width would be needed to call a {at}")


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
    test = (f"max-statistic test over the {len(c) - 2} interior widths: {d['t_stat']:.1f} "
            f"pooled SEs, p = {d['p_value']:.3f} on a flat curve (seed SD "
            f"{100 * d['seed_sd']:.1f} points, {d['df']} df)")
    if d["called"]:
        return (f"dip at M = {int(d['dip_width'])}: test {_pct(d['dip_acc'])} "
                f"[{_pct(d['dip_min'])}, {_pct(d['dip_max'])}], down from {_at(c, d['_j'])}; "
                f"rises to {_at(c, k)} ({100 * d['rise']:+.1f} points); {test}; {where}")
    floor, chance = noise_floor(d["dip_acc"], c), _chance(c)
    low = (f"deepest interior low {_at(c, i)}, between {_at(c, d['_j'])} and {_at(c, k)}")
    if d["df"] == 0:
        return (f"too few seeds to call: {low} — one seed per width has no seed spread to "
                f"test against; {_needed(d, c, floor / 2)}; {where}")
    if min(d["fall"], d["rise"]) <= floor or d["peak_acc"] <= chance + floor:
        why = (f"the fall or the rise, or the peak's height above chance {_pct(chance)}, is within "
               f"the test set's sampling noise, ±{100 * floor:.1f} points at "
               f"n_test = {int(c['n_test'].min()):,}")
    else:
        why = f"{test}: p ≥ {ALPHA:g}; {_needed(d, c, floor / 2)}"
    return f"no dip called: {low} — not called ({why}); {where}"


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
