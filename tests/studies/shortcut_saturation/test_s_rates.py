"""Study S's rate tables (SPEC S.3): the rate with max adv accuracy and its per-seed range
beside it, and the adv-only reading beside the generalized one. The generic rate table and
Wilson intervals: tests/analysis/test_stats.py."""

import numpy as np
import pytest
from tests.analysis.test_stats import _runs

from rulelab.analysis.stats import config_columns, format_range, varying_columns, wilson
from rulelab.studies.shortcut_saturation.rates import (
    adv_rate_table,
    readings_differ,
    readings_table,
)


def test_rate_table_counts_finished_runs_only():
    table = adv_rate_table(_runs(), ["layers", "ratio"])
    assert list(table.columns) == [
        "layers", "ratio", "n", "k", "rate", "ci_low", "ci_high", "n_failed", "mean_max_adv",
        "max_adv_min", "max_adv_max",
    ]
    got = {(r.layers, r.ratio): (r.n, r.k, r.n_failed) for r in table.itertuples()}
    assert got == {
        (1, 0.5): (3, 1, 1),
        (1, 0.9): (0, 0, 0),
        (2, 0.5): (1, 0, 0),
        (2, 0.9): (3, 2, 2),
    }
    row = table[(table.layers == 2) & (table.ratio == 0.9)].iloc[0]
    assert row.rate == pytest.approx(2 / 3)
    assert (row.ci_low, row.ci_high) == pytest.approx(wilson(2, 3))
    assert row.mean_max_adv == pytest.approx((1.0 + 1.0 + 0.8) / 3)
    # the per-seed range beside the mean, over finished runs only (the running 1.0 is not in)
    first = table[(table.layers == 1) & (table.ratio == 0.5)].iloc[0]
    assert (first.max_adv_min, first.max_adv_max) == (0.4, 1.0)
    two = table[(table.layers == 2) & (table.ratio == 0.5)].iloc[0]
    assert (two.max_adv_min, two.mean_max_adv, two.max_adv_max) == (0.5, 0.5, 0.5)
    assert format_range(row.mean_max_adv, row.max_adv_min, row.max_adv_max) == (
        "93.3% [80.0%, 100.0%]")
    empty = table[(table.layers == 1) & (table.ratio == 0.9)].iloc[0]
    assert np.isnan(empty.rate) and (empty.ci_low, empty.ci_high) == (0.0, 1.0)


def test_readings_table_shows_the_adv_only_reading_beside():
    runs = _runs().assign(adv_generalized=_runs().generalized)
    same = readings_table(runs, ["layers", "ratio"])
    assert (same.k_adv == same.k).all() and not readings_differ(same)
    # a flipped-shortcut seed: adv 100% (adv-only yes), val 0% (generalized no)
    runs.loc[5, "adv_generalized"] = True
    table = readings_table(runs, ["layers", "ratio"]).set_index(["layers", "ratio"])
    assert readings_differ(table)
    assert (table.loc[(2, 0.5), "k"], table.loc[(2, 0.5), "k_adv"]) == (0, 1)
    assert table.loc[(2, 0.5), "rate_adv"] == 1.0
    assert "k_adv" not in readings_table(_runs(), ["layers"]).columns  # study M: one reading


def test_config_columns_of_s_runs_skip_ids_seed_and_summaries():
    """Without a task column: the config fields of every registered task (S's among them)."""
    runs = _runs().assign(weight_decay=0.1, code_version="0.1.0+abc", created_at="t",
                          first_epoch_100=np.nan, config=[{}] * 13)
    assert config_columns(runs) == ["layers", "ratio", "weight_decay"]
    assert varying_columns(runs) == ["layers", "ratio"]
