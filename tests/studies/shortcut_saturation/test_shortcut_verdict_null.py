"""The scale map's S5 and S6 verdicts against their nulls (issue 21), at the medium-s5s6
preset's seeds: ≤ 5% "shows" when no cell differs, every lab when the effect is certain."""

import numpy as np
import pytest

from rulelab.studies.shortcut_saturation import STUDY
from rulelab.studies.shortcut_saturation.analyses.verdict_null import (
    s5_check,
    s5_shows,
    s6_check,
    s6_counts,
)
from rulelab.sweep.recipe import load_recipe


@pytest.fixture(scope="module")
def preset():
    return load_recipe(STUDY.recipe_path("medium-s5s6")).configs()


def test_s5_and_s6_are_within_the_bar_at_the_preset(preset):
    s5, s6 = s5_check(preset, n_sims=400), s6_check(preset, n_sims=400)
    assert s5.within_bar and s6.within_bar
    assert "0.1 (6 seeds)" in s5.setting and "0.9 (6 seeds)" in s5.setting
    assert s6_counts(preset) == (30, 30)  # 5 ratios × 6 seeds at wd 0.1 and at wd 0.4
    assert s5.power > 0.5 and s6.power > 0.5


def test_s5_counts_a_lab_only_when_both_sides_beat_chance():
    rng = np.random.default_rng(0)
    seeds = {0.1: 6, 0.3: 6, 0.5: 6, 0.9: 6}
    certain = {0.1: 0.0, 0.3: 1.0, 0.5: 0.0, 0.9: 1.0}  # 6/6 vs 0/6: intervals disjoint
    assert s5_shows(rng, certain, seeds, 50) == 50
    one_side = {**certain, 0.9: 0.0}
    assert s5_shows(rng, one_side, seeds, 50) == 0
    # the best of two ratios below chance is a search: more calls than one ratio alone
    flat = dict.fromkeys(seeds, 0.5)
    wide = {0.05: 6, 0.1: 6, 0.2: 6, 0.3: 6, 0.5: 6, 0.7: 6, 0.8: 6, 0.9: 6}
    assert s5_shows(rng, dict.fromkeys(wide, 0.5), wide, 4000) > s5_shows(
        rng, flat, seeds, 4000)


def test_verdicts_with_nothing_to_compare_are_not_read():
    quick = load_recipe(STUDY.recipe_path("quick")).configs()  # r 0.5 and 0.9, one decay
    assert s5_check(quick) is None and s6_check(quick) is None
