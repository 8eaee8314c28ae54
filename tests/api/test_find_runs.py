"""Short run ids, id prefixes and ``--where`` (issue 23 item 4), on hand-made ids and frames:
the shortest unique prefix is 8 characters unless two ids share 8 or more; a prefix names a
run only when exactly one id starts with it; a filter is pandas query syntax whose mistakes
are one line naming the columns allowed."""

from __future__ import annotations

import pandas as pd
import pytest

from rulelab.api.find_runs import resolve_run, short_ids, where
from rulelab.errors import UserError

IDS = ["ec7154a1b2c3", "ec7154a1ffff", "3f2b9a000000", "3f2c00000000", "a00000000000"]


def test_short_ids_are_8_characters_unless_a_neighbour_shares_more():
    short = short_ids(IDS)
    assert short == {"ec7154a1b2c3": "ec7154a1b", "ec7154a1ffff": "ec7154a1f",
                     "3f2b9a000000": "3f2b9a00", "3f2c00000000": "3f2c0000",
                     "a00000000000": "a0000000"}
    assert len(set(short.values())) == len(IDS)  # unique, and each names its own run
    assert all(resolve_run(s, IDS) == rid for rid, s in short.items())
    assert short_ids(["abc"]) == {"abc": "abc"}  # shorter than 8: the whole id


def test_a_prefix_names_one_run_or_is_one_line_naming_the_candidates():
    assert resolve_run("3f2b", IDS) == "3f2b9a000000"
    assert resolve_run("a00000000000", IDS) == "a00000000000"
    with pytest.raises(UserError, match=r"run_id: 'ec7154' is ambiguous in lab X: 2 runs start "
                       r"with it \(ec7154a1b, ec7154a1f\); give more characters"):
        resolve_run("ec7154", IDS, "lab X")
    with pytest.raises(UserError, match=r"'3f2' is ambiguous .*\(3f2b9a00, 3f2c0000\)"):
        resolve_run("3f2", IDS)
    with pytest.raises(UserError, match=r"runs: 'zz' is not a run of here \(runs: 3f2b9a00, "
                       r"3f2c0000, a0000000, ec7154a1b, ec7154a1f; `rulelab runs --ids`"):
        resolve_run("zz", IDS, "here", what="runs")
    with pytest.raises(UserError, match="'' is not a run"):
        resolve_run("", IDS)  # an empty prefix names no run (not all of them)


RUNS = pd.DataFrame({"run_id": IDS, "layers": [1, 2, 2, 1, 2],
                     "ratio": [0.5, 0.9, 0.5, 0.9, 0.7], "act": ["relu"] * 4 + ["gelu"]})
COLUMNS = {"config": ["layers", "ratio", "act"], "run": ["run_id"]}


@pytest.mark.parametrize(("expr", "ids"), [
    ("layers == 2 and ratio > 0.5", {"ec7154a1ffff", "a00000000000"}),
    ("layers == 1 or act == 'gelu'", {"ec7154a1b2c3", "3f2c00000000", "a00000000000"}),
    ("ratio in [0.5, 0.7] and not layers == 1", {"3f2b9a000000", "a00000000000"}),
    ("run_id == '3f2b9a000000'", {"3f2b9a000000"}),
    ("layers > 5", set()),
    ("", set(IDS)),
    (None, set(IDS)),
])
def test_where_keeps_the_rows_where_the_condition_holds(expr, ids):
    assert set(where(RUNS, expr, COLUMNS)["run_id"]) == ids


@pytest.mark.parametrize(("expr", "says"), [
    ("layer == 2", "--where: layer is not a column of the runs; the columns allowed are "
                   "config: layers, ratio, act; run: run_id"),
    ("layers ==", "--where: 'layers ==' is not an expression"),
    ("layers", "'layers' is not a condition on each run"),
    ("@x > 1", "is not an expression"),
    ("ratio.foo > 1", "does not evaluate"),
])
def test_a_bad_where_is_one_line_naming_the_columns(expr, says):
    with pytest.raises(UserError) as e:
        where(RUNS, expr, COLUMNS)
    assert says in str(e.value) and "\n" not in str(e.value)
    assert "config: layers, ratio, act" in str(e.value)
