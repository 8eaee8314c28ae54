"""The exponent of steps-to-learn per k and its growth with k (issue 21) on synthetic runs with
a known answer: steps = c_k · n^(a·k) recovers a."""

import math

import numpy as np
import pandas as pd
import pytest

from rulelab.studies.sparse_parity.scaling import (
    fits_by_k,
    k_dependence,
    k_line,
    scaling_lines,
)


def runs(a: float, ks=(2, 3, 4), ns=(8, 12, 16, 24, 32), seeds=4, noise=0.1, c=None,
         never=()):
    """steps = c_k · n^(a·k) · e^(noise·z), one row per (k, n, seed)."""
    rng = np.random.default_rng(0)
    c = c or {k: 5.0 * k for k in ks}
    rows = []
    for k in ks:
        for n in ns:
            for s in range(seeds):
                steps = c[k] * n ** (a * k) * math.exp(noise * rng.standard_normal())
                learned = (k, n, s) not in never
                rows.append({"run_id": f"{k}-{n}-{s}", "status": "done", "k": k, "n_bits": n,
                             "seed": s, "learned": learned,
                             "steps_to_learn": round(steps) if learned else None})
    return pd.DataFrame(rows)


def test_exact_power_laws_recover_a_and_the_per_k_exponents():
    dep = k_dependence(runs(0.5, noise=0.0, ns=(8, 64, 512, 4096)))
    assert dep["a"] == pytest.approx(0.5, abs=1e-3)
    assert dep["growth"] == pytest.approx(0.5, abs=1e-3)  # exponent a·k grows by a per unit k
    fits = fits_by_k(runs(0.5, noise=0.0, ns=(8, 64, 512, 4096)))
    assert [round(f["slope"], 3) for f in fits.values()] == [1.0, 1.5, 2.0]


def test_noisy_runs_bracket_a_and_read_growth_or_none():
    dep = k_dependence(runs(0.4))
    assert dep["a_lo"] < 0.4 < dep["a_hi"] and dep["growth_lo"] < 0.4 < dep["growth_hi"]
    assert dep["growth_lo"] > 0 and "grows with k" in k_line(dep)
    flat = runs(0.0, c={2: 100.0, 3: 200.0, 4: 400.0})  # n^1.2 for every k: no k-dependence
    flat["steps_to_learn"] = (flat["steps_to_learn"] * flat["n_bits"] ** 1.2).round()
    same = k_dependence(flat)
    assert same["growth_lo"] < 0 < same["growth_hi"]
    assert "does not change measurably with k" in k_line(same)


def test_censored_runs_are_left_out_and_one_k_reads_as_before():
    dep = k_dependence(runs(0.5, never={(4, 32, 0), (4, 32, 1)}))
    assert dep["runs"] == 3 * 5 * 4 - 2
    one = scaling_lines(runs(0.5, ks=(3,), noise=0.0))
    assert len(one) == 1 and one[0].startswith("steps-to-learn ∝ n^a: a = 1.5")
    assert math.isnan(k_dependence(runs(0.5, ks=(3,)))["growth"])
    lines = scaling_lines(runs(0.5))
    assert [line[:6] for line in lines[:3]] == ["k = 2:", "k = 3:", "k = 4:"]
    assert lines[3].startswith("exponent vs k over 60 learned runs at k = 2, 3, 4")


def test_the_scaling_k_preset_holds_every_k_at_the_same_n():
    from rulelab.studies.sparse_parity import STUDY
    from rulelab.sweep.recipe import load_recipe

    configs = load_recipe(STUDY.recipe_path("scaling-k")).configs()
    grid = {(c.k, c.n_bits) for c in configs}
    assert grid == {(k, n) for k in (2, 3, 4) for n in (8, 12, 16, 24, 32, 48)}
    assert len(configs) == 72 and {c.width for c in configs} == {256}
    assert {c.eval_every for c in configs if c.k == 2} == {5}  # k = 2 learns in ~100 steps
