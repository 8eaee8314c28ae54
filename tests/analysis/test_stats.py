"""Wilson intervals and rate tables (SPEC S.3: rates with a 95% Wilson interval and n)."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from rulelab.analysis.stats import (
    config_columns,
    format_rate,
    rate_table,
    varying_columns,
    wilson,
    wilson_arrays,
)

CASES = [(k, n) for n in (*range(1, 31), 50, 97, 100, 1000) for k in range(n + 1) if n <= 31 or
         k in (0, 1, n // 3, n // 2, n - 1, n)]


@pytest.mark.parametrize("n", sorted({n for _, n in CASES}))
def test_wilson_matches_scipy_oracle(n):
    for k in [k for k, m in CASES if m == n]:
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        lo, hi = wilson(k, n)
        assert lo == pytest.approx(ci.low, abs=1e-12), (k, n)
        assert hi == pytest.approx(ci.high, abs=1e-12), (k, n)


def test_wilson_edges_are_exact():
    assert wilson(0, 30)[0] == 0.0
    assert wilson(30, 30)[1] == 1.0
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson(4, 3)


def test_wilson_arrays_equals_scalar():
    k = np.array([k for k, _ in CASES] + [0])
    n = np.array([n for _, n in CASES] + [0])
    lo, hi = wilson_arrays(k, n)
    expected = np.array([wilson(a, b) for a, b in zip(k, n, strict=True)])
    np.testing.assert_array_equal(lo, expected[:, 0])
    np.testing.assert_array_equal(hi, expected[:, 1])
    assert (lo[-1], hi[-1]) == (0.0, 1.0)


def test_format_rate_paper_headline():
    # SPEC S.3: 77% of 2L seeds at r = 0.9 fits 23/30.
    assert format_rate(23, 30) == "77% [59%, 88%] (23/30)"
    assert format_rate(0, 0) == "— (0/0)"


def _runs() -> pd.DataFrame:
    rows = [
        # layers, ratio, status, generalized, max_adv_acc
        (1, 0.5, "done", True, 1.0),
        (1, 0.5, "done", False, 0.6),
        (1, 0.5, "done", None, 0.4),  # missing flag on a done run counts as not generalized
        (1, 0.5, "failed", None, np.nan),
        (1, 0.5, "pending", None, np.nan),
        (2, 0.5, "done", 0, 0.5),
        (2, 0.5, "running", 1, 1.0),  # not finished: left out even though flagged
        (2, 0.9, "done", 1, 1.0),
        (2, 0.9, "done", 1.0, 1.0),
        (2, 0.9, "done", np.nan, 0.8),
        (2, 0.9, "failed", None, np.nan),
        (2, 0.9, "failed", None, np.nan),
        (1, 0.9, "pending", None, np.nan),  # a group with no finished run at all
    ]
    frame = pd.DataFrame(rows, columns=["layers", "ratio", "status", "generalized", "max_adv_acc"])
    frame["run_id"] = [f"r{i}" for i in range(len(frame))]
    frame["seed"] = range(len(frame))
    return frame


def test_rate_table_counts_finished_runs_only():
    """The generic table (the study-S one with max adv beside it: tests/studies/
    shortcut_saturation/test_s_rates.py)."""
    table = rate_table(_runs(), ["layers", "ratio"])
    assert list(table.columns[:8]) == ["layers", "ratio", "n", "k", "rate", "ci_low", "ci_high",
                                       "n_failed"]
    got = {(r.layers, r.ratio): (r.n, r.k, r.n_failed) for r in table.itertuples()}
    assert got == {(1, 0.5): (3, 1, 1), (1, 0.9): (0, 0, 0), (2, 0.5): (1, 0, 0),
                   (2, 0.9): (3, 2, 2)}
    row = table[(table.layers == 2) & (table.ratio == 0.9)].iloc[0]
    assert row.rate == pytest.approx(2 / 3)
    assert (row.ci_low, row.ci_high) == pytest.approx(wilson(2, 3))
    empty = table[(table.layers == 1) & (table.ratio == 0.9)].iloc[0]
    assert np.isnan(empty.rate) and (empty.ci_low, empty.ci_high) == (0.0, 1.0)


def test_rate_table_without_groups_and_without_adv_column():
    table = rate_table(_runs().drop(columns="max_adv_acc"), [])
    assert len(table) == 1 and "mean_max_adv" not in table.columns
    assert (table.n[0], table.k[0], table.n_failed[0]) == (7, 3, 3)


def test_rate_table_names_missing_column():
    with pytest.raises(KeyError, match="weight_decay"):
        rate_table(_runs(), ["weight_decay"])
    with pytest.raises(KeyError, match="generalized"):  # a done run always has its summary
        rate_table(_runs().drop(columns="generalized"), ["layers"])


def test_rate_table_of_a_lab_where_nothing_has_finished():
    # issue 12: a fresh lab has no summary columns at all; the old code raised KeyError
    runs = _runs().drop(columns=["generalized", "max_adv_acc"])
    runs["status"] = ["pending", "running", "failed"] * 4 + ["pending"]
    table = rate_table(runs, ["layers", "ratio"])
    assert table.n.tolist() == [0, 0, 0, 0] and table.k.tolist() == [0, 0, 0, 0]
    assert table.rate.isna().all() and table.n_failed.sum() == 4


@pytest.mark.usefixtures("toy")
def test_config_columns_skip_ids_seed_and_summaries():
    """The config fields of the runs' task (the toy study's here; study S's without a task
    column: tests/studies/shortcut_saturation/test_s_rates.py)."""
    runs = _runs().rename(columns={"layers": "width", "ratio": "noise"}).assign(
        task="toy", weight_decay=0.1, code_version="0.1.0+abc", created_at="t",
        first_epoch_generalized=np.nan, config=[{}] * 13)
    assert config_columns(runs) == ["width", "noise", "weight_decay"]
    assert varying_columns(runs) == ["width", "noise"]
