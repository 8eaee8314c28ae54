"""The tight identity bound and the per-run flag (issue 21, study S's analysis.identity).

With ρ = amplification / (r/(1−r)) and ε = ‖g‖/(r‖g+‖), ε² = 1 + ρ² + 2ρ·cos exactly, so
cos ≤ −√(1 − ε²) for ε < 1, attained at ρ = √(1 − ε²). The issue-8 bound −1 + ε²/(2(1−ε)²)
was valid but loose (−0.83 at ε = 0.37, where the tight one is −0.93) and empty past ≈ 0.59.
"""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from rulelab.studies.shortcut_saturation.analyses.gradients import conflict_metrics
from rulelab.studies.shortcut_saturation.analyses.identity import (
    COS_PINNED,
    EPS_IDENTITY,
    identity_bounds,
    identity_count,
    identity_flags,
    identity_reading,
)
from rulelab.studies.shortcut_saturation.analyses.tables import MOSTLY_PINNED, gradient_summary
from rulelab.studies.shortcut_saturation.commands import print_gradient_summary


def test_the_tight_bound_is_attained():
    """g+, g− built at ρ = √(1 − ε²), cos = −√(1 − ε²): conflict_metrics reads back that ε,
    and its cos equals identity_bounds' cos_max — no larger cos is possible at that ε."""
    eps = torch.linspace(0.01, 0.99, 99, dtype=torch.float64)
    r = torch.full_like(eps, 0.9)
    rho = (1 - eps**2).sqrt()
    theta = torch.arccos(-rho)  # the angle between a = r·g+ and b = (1−r)·g−
    g_plus = torch.stack([torch.full_like(eps, 2.0), torch.zeros_like(eps)], 1)
    a_norm = r * 2.0
    b = (rho * a_norm)[:, None] * torch.stack([theta.cos(), theta.sin()], 1)
    out = conflict_metrics({"all": g_plus}, {"all": b / (1 - r[:, None])}, r)["all"]
    assert torch.allclose(out["eps"], eps, rtol=1e-12, atol=1e-12)
    assert torch.allclose(out["cos"], identity_bounds(eps)[2], atol=1e-12)
    assert torch.allclose(out["amplification"] / out["odds"], rho, rtol=1e-12)
    assert identity_bounds(0.6)[2] == pytest.approx(-0.8)  # a 3-4-5 triangle


def test_no_pair_below_the_threshold_breaks_the_bound():
    """A sweep of (ρ, cos) — 601 log-spaced ρ in [1e-3, 1e3] × 801 cos in [−1, 1]: every pair
    with ε < 1 has cos ≤ −√(1 − ε²), every pair with ε < ε* has cos ≤ −0.9 and ρ within
    1 ± ε*, and near each ε the largest cos found is the bound itself (it is tight)."""
    rho, cos = np.meshgrid(np.logspace(-3, 3, 601), np.linspace(-1, 1, 801))
    eps = np.sqrt(np.clip(1 + rho**2 + 2 * rho * cos, 0, None))
    inside = eps < 1
    assert inside.sum() > 10_000
    assert np.all(cos[inside] <= identity_bounds(eps[inside])[2] + 1e-12)
    pinned = eps < EPS_IDENTITY
    assert pinned.sum() > 1_000 and np.all(cos[pinned] <= COS_PINNED + 1e-12)
    assert np.all(np.abs(rho[pinned] - 1) <= EPS_IDENTITY + 1e-12)
    for lo in np.arange(0.05, 0.95, 0.1):  # tight: the sweep comes within 0.01 of the bound
        band = (eps >= lo) & (eps < lo + 0.1)
        assert cos[band].max() >= identity_bounds(lo + 0.1)[2] - 0.01
    old = -1 + 0.37**2 / (2 * 0.63**2)  # issue 8's bound at ε = 0.37: valid, 0.10 looser
    assert old == pytest.approx(-0.8275, abs=1e-4) and identity_bounds(0.37)[2] < old - 0.1


def test_issue_example_quick_2l_row_is_flagged():
    """Issue 21: study S's quick 2L r = 0.9 row, median ε 0.37 and cos −0.94, 1/8 runs below
    the old 0.25 cut, was printed unmarked. The tight bound forces cos ≤ −√(1 − 0.37²) = −0.929
    at ε = 0.37, and each run is flagged on its own ε: here 6 of 8, so the medians get †."""
    bound = identity_bounds(0.37)[2]
    assert bound == pytest.approx(-0.92903, abs=1e-5) and bound > -0.94  # −0.94 is forced
    assert abs(EPS_IDENTITY - math.sqrt(0.19)) < 1e-15 and EPS_IDENTITY > 0.37
    assert identity_reading(0.37) == "identity-dominated"
    assert identity_reading(0.5) == "not identity-dominated"
    eps = [0.2, 0.3, 0.33, 0.36, 0.38, 0.40, 0.5, 0.6]  # median 0.37; one below 0.25
    frame = pd.DataFrame(dict(run_id=[f"s{i}" for i in range(8)], epoch=100, module="all",
                              layers=2, ratio=0.9, cos=-0.94, amplification=8.3, odds=9.0,
                              eps=eps))
    row = gradient_summary(frame).iloc[0]
    assert row["eps"] == pytest.approx(0.37) and row["identity_dominated"] == "6/8"
    assert row[MOSTLY_PINNED]


def test_printed_row_carries_the_mark(capsys):
    eps = [0.2, 0.3, 0.33, 0.36, 0.38, 0.40, 0.5, 0.6]
    frame = pd.DataFrame(dict(run_id=[f"s{i}" for i in range(8)], epoch=100, module="all",
                              layers=2, ratio=0.9, cos=-0.94, amplification=8.3, odds=9.0,
                              eps=eps))
    print_gradient_summary(frame)
    rows = [ln for ln in capsys.readouterr().out.splitlines() if "6/8" in ln]
    assert len(rows) == 1 and "-0.94 †" in rows[0] and "8.3 †" in rows[0]


def test_nan_eps_reads_undefined_and_is_counted_apart():
    assert identity_reading(float("nan")) == "undefined" and identity_reading(None) == "undefined"
    flags = identity_flags([0.1, float("nan"), 0.9])
    assert flags.iloc[0] and flags.isna().iloc[1] and not flags.iloc[2]
    assert identity_count([0.1, float("nan"), 0.9]) == "1/3 (1 undefined)"
    assert identity_count([0.1, 0.2, 0.9]) == "2/3"  # no NaN: no "undefined" part
    frame = pd.DataFrame(dict(run_id=["a", "b", "c"], epoch=10, module="all", layers=1,
                              ratio=1.0, cos=[-0.99, np.nan, -0.2], amplification=1.0,
                              odds=9.0, eps=[0.1, np.nan, 0.9]))
    row = gradient_summary(frame).iloc[0]
    assert row["identity_dominated"] == "1/3 (1 undefined)" and not row[MOSTLY_PINNED]


def test_bounds_past_one_and_on_every_array_type():
    """ε > 1: no constraint on cos (cos_max = 1); ε = 1: cos < 0; floats, numpy and torch
    give the same."""
    assert identity_bounds(1.5)[2] == 1.0 and identity_bounds(1.0)[2] == 0.0
    e = [0.0, 0.6, 1.0, 2.0]
    want = [-1.0, -0.8, 0.0, 1.0]
    assert identity_bounds(np.array(e))[2].tolist() == pytest.approx(want)
    assert identity_bounds(torch.tensor(e, dtype=torch.float64))[2].tolist() == pytest.approx(want)
    assert math.isnan(identity_bounds(float("nan"))[2])
