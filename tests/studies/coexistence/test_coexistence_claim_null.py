"""The scale map's M1 verdict against its null (issue 21): with 2 seeds a width the seed ranges
of two flat widths are disjoint by chance 1/C(4, 2) = 1/6 of the time — above the 5% bar, so the
calibration says "too few seeds"; at the paper preset's 3 seeds it is at the bar."""

import math

import numpy as np

from rulelab.studies.coexistence import STUDY
from rulelab.studies.coexistence.analyses.claim_null import (
    m1_calls,
    m1_check,
    seeds_needed,
    simulate,
)
from rulelab.sweep.recipe import load_recipe


def preset(scale):
    return load_recipe(STUDY.recipe_path(scale)).configs()


def test_quick_preset_two_seeds_cannot_reach_the_bar():
    check = m1_check(preset("quick"), n_sims=2000)
    assert "7 widths (17…1025) × 2 seeds, 192 test pairs" in check.setting
    assert 0.12 < check.fpr < 0.21 and not check.within_bar  # ≈ 1/6
    assert "too few seeds to call" in check.note and "3 would reach 5%" in check.note
    assert check.power > 0.8  # a 10-point gain is seen at 2 seeds


def test_paper_preset_three_seeds_is_near_one_in_twenty():
    check = m1_check(preset("paper"), n_sims=4000)
    assert "× 3 seeds" in check.setting
    assert check.fpr <= 0.06 and "too few" not in check.note  # 1/C(6, 3) = 5%
    assert seeds_needed() == 3 and seeds_needed(0.02) == 4  # 1/20, then 1/70


def test_m1_calls_read_the_widest_against_the_narrowest():
    acc = np.array([[[0.50, 0.52], [0.9, 0.9], [0.60, 0.61]],   # ranges disjoint, mean ≥ 50%
                    [[0.50, 0.62], [0.1, 0.1], [0.60, 0.61]],   # overlapping ranges
                    [[0.30, 0.32], [0.9, 0.9], [0.40, 0.41]]])  # disjoint but below 50%
    assert m1_calls(acc).tolist() == [True, False, False]
    flat = simulate(7, 4, 4000, 192, rng=np.random.default_rng(1))
    assert abs(m1_calls(flat).mean() - 1 / math.comb(8, 4)) < 0.01  # exchangeable seeds
