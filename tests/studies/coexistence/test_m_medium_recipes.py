"""Study M's medium preset (issue 11): its closest-to-the-paper recipe that fits about an hour of
this 2-core CPU — its grid, the scale list the command line offers, and the planner's time
estimate."""

from __future__ import annotations

import math

from rulelab.study_registry import study
from rulelab.sweep.driver import make_plan
from rulelab.sweep.estimate import speed
from rulelab.sweep.recipe import load_recipe

M = study("coexistence")


def recipe(st, scale):
    return load_recipe(st.recipe_path(scale))


def cpu_minutes(r) -> float:
    return make_plan(r, None, r.execution).seconds(speed("cpu")) / 60


def test_medium_is_a_scale_of_m():
    assert "medium" in M.scales()


def test_m_medium_is_larger_than_quick_at_the_papers_optimizer():
    r = recipe(M, "medium")
    configs = r.configs()
    quick = recipe(M, "quick").configs()[0]
    assert {c.p for c in configs} == {configs[0].p} and configs[0].p > quick.p
    assert {(c.lr, c.weight_decay, c.optimizer) for c in configs} == {(1e-3, 0.1, "adamw")}
    assert sorted({c.noise for c in configs}) == [0.0, 0.5, 0.8]
    assert len({c.width for c in configs}) >= 6 and len(r.seeds) >= 2


def test_the_planner_estimate_of_m_medium_is_about_an_hour():
    """The cost model (2 threads, an idle CPU) puts medium near an hour; the recipe's header
    gives the pilot-based figure beside it."""
    minutes = cpu_minutes(recipe(M, "medium"))
    assert math.isfinite(minutes) and 20 <= minutes <= 75
