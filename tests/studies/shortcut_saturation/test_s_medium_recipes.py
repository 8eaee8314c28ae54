"""Study S's medium presets (issue 11): its closest-to-the-paper recipe that fits about an hour
of this 2-core CPU and its S5/S6 recipe at the same scale — their grids, the scale list the
command line offers, and the planner's time estimate."""

from __future__ import annotations

import math

import pytest

from rulelab.study_registry import study
from rulelab.sweep.driver import make_plan
from rulelab.sweep.estimate import speed
from rulelab.sweep.recipe import load_recipe

S = study("shortcut-saturation")


def recipe(st, scale):
    return load_recipe(st.recipe_path(scale))


def cpu_minutes(r) -> float:
    return make_plan(r, None, r.execution).seconds(speed("cpu")) / 60


def test_medium_and_s5s6_are_scales_of_s():
    assert "medium" in S.scales() and "medium-s5s6" in S.scales()


def test_s_medium_holds_the_four_headline_cells_full_batch():
    r = recipe(S, "medium")
    configs = r.configs()
    cells = {(c.layers, c.ratio) for c in configs}
    assert cells == {(1, 0.5), (1, 0.9), (2, 0.5), (2, 0.9)}
    assert {(c.heads, c.weight_decay, c.batch_size, c.label_mod, c.shortcut, c.lr)
            for c in configs} == {(2, 0.1, 0, 2, "max", 1e-3)}
    quick = recipe(S, "quick").configs()[0]
    c = configs[0]
    # closer to the paper than quick: longer sequences over more integers, full batch
    assert c.seq_len > quick.seq_len and c.vocab > quick.vocab and c.n_train >= quick.n_train
    assert c.batch_size == 0 and quick.batch_size > 0
    assert len(configs) == 4 * len(r.seeds) and len(r.seeds) >= 6
    assert r.experiment == "shortcut-saturation-medium"


def test_s5s6_recipe_crosses_five_ratios_and_two_decays_and_shares_the_medium_runs():
    r = recipe(S, "medium-s5s6")
    configs = r.configs()
    assert sorted({c.ratio for c in configs}) == [0.1, 0.3, 0.5, 0.7, 0.9]
    assert sorted({c.weight_decay for c in configs}) == [0.1, 0.4]
    medium = {c.run_id for c in recipe(S, "medium").configs() if c.layers == 2}
    assert medium <= {c.run_id for c in configs}  # same ids: trained once in one lab


@pytest.mark.parametrize("scale, most", [("medium", 75), ("medium-s5s6", 400)])
def test_the_planner_estimate_is_about_an_hour(scale, most):
    """The cost model (2 threads, an idle CPU) puts medium near an hour; the recipe's header
    gives the pilot-based figure beside it."""
    minutes = cpu_minutes(recipe(S, scale))
    assert math.isfinite(minutes) and 20 <= minutes <= most
