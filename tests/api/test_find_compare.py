"""Finding and comparing runs in a real lab (issue 23 item 4): ``rulelab runs --ids`` lists
each run under its short id and ``--where`` narrows both tables; a short id or any unique
prefix names the run in ``lab.model``, ``lab.analyze`` and ``lab.compare``;
``lab.curves`` gives one metric with the config columns joined; ``lab.compare`` puts two
runs side by side with exactly the fields that differ marked."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cli_inproc import run_main
from labs import loaded_copy, tiny_lab
from rulelab.errors import UserError


@pytest.fixture(scope="module")
def lab_path(tmp_path_factory) -> Path:
    return tiny_lab(tmp_path_factory.mktemp("find"), "find")


@pytest.fixture
def lab(lab_path, tmp_path):
    return loaded_copy(lab_path, tmp_path)


def run_of(lab, **config) -> str:
    rows = lab.runs
    for k, v in config.items():
        rows = rows[rows[k] == v]
    (run_id,) = rows["run_id"]
    return run_id


def table_rows(stdout: str) -> list[list[str]]:
    """The body rows of a rich table, as cells."""
    return [[c.strip() for c in line.strip("│ ").split("│")]
            for line in stdout.splitlines() if line.startswith("│")]


def test_runs_ids_lists_every_run_under_its_short_id(lab, capsys, monkeypatch):
    res = run_main(["runs", "--lab", lab.path, "--ids"], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    rows = table_rows(res.stdout)
    head = next(line for line in res.stdout.splitlines() if line.startswith("┃"))
    assert [h.strip() for h in head.strip("┃ ").split("┃")][:4] == ["id", "status", "layers",
                                                                  "seed"]
    assert sorted(r[0] for r in rows) == sorted(lab.short_ids.values())
    assert all(len(r[0]) == 8 for r in rows) and len(rows) == 4
    config = lab.runs.set_index("run_id")
    for short, _, layers, seed, *_ in rows:  # each row is that run's config
        full = lab.run_id(short)
        assert (layers, seed) == (str(config.loc[full, "layers"]), str(config.loc[full, "seed"]))


def test_runs_where_narrows_the_rate_table_the_list_and_json(lab, capsys, monkeypatch):
    base = ["runs", "--lab", lab.path, "--where", "layers == 2 and seed > 0"]
    listed = table_rows(run_main([*base, "--ids"], capsys, monkeypatch).stdout)
    assert [r[0] for r in listed] == [lab.short_ids[run_of(lab, layers=2, seed=1)]]
    rates = run_main(base, capsys, monkeypatch).stdout
    (row,) = table_rows(rates)
    assert row[0] == "2" and row[3].endswith(("(0/1)", "(1/1)"))  # one run in the cell
    import json
    js = json.loads(run_main([*base, "--json"], capsys, monkeypatch).stdout)
    assert [r["run_id"] for r in js] == [run_of(lab, layers=2, seed=1)]
    none = run_main(["runs", "--lab", lab.path, "--where", "seed > 5"], capsys, monkeypatch)
    assert none.returncode == 0 and "no runs match --where 'seed > 5'" in none.stdout


@pytest.mark.parametrize(("expr", "says"), [
    ("layer == 2", "layer is not a column of the runs"),
    ("layers ==", "is not an expression"),
])
def test_a_bad_where_is_one_error_line(expr, says, lab, capsys, monkeypatch):
    res = run_main(["runs", "--lab", lab.path, "--where", expr, "--ids"], capsys, monkeypatch)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: --where")
    assert says in lines[0] and "config: " in lines[0] and "layers" in lines[0]


def test_a_prefix_names_the_run_in_model_and_analyze(lab):
    full = run_of(lab, layers=2, seed=0)
    by_prefix = lab.model(full[:5])
    assert by_prefix.run_id == full and by_prefix.config.layers == 2
    x = by_prefix.data.val_x
    with torch.no_grad():
        assert torch.equal(by_prefix(x), lab.model(full)(x))
    table = lab.analyze("gradients", runs=[lab.short_ids[full]])
    assert set(table["run_id"]) == {full}
    with pytest.raises(UserError, match=r"run_id: '' is not a run of .*runs: "):
        lab.model("")


def test_an_ambiguous_prefix_names_the_candidates(lab, monkeypatch):
    from rulelab.store import Lab

    real = run_of(lab, layers=1, seed=0)
    twin = real[:9] + "fff" if real[9:] != "fff" else real[:9] + "000"  # shares 9 characters
    rows = lab.lab.runs_json()
    monkeypatch.setattr(Lab, "runs_json", lambda self: [*rows, {**rows[0], "run_id": twin}])
    with pytest.raises(UserError, match=rf"run_id: '{real[:6]}' is ambiguous .*2 runs start "
                       rf"with it \({real[:10]}, {twin[:10]}\); give more characters"):
        lab.model(real[:6])
    assert lab.model(real[:10]).run_id == real  # one more character than they share


def test_curves_join_the_config_columns(lab):
    c = lab.curves("acc", "val")
    assert list(c.columns[:6]) == ["run_id", "layers", "seed", "epoch", "metric", "split"]
    assert set(c["metric"]) == {"acc"} and set(c["split"]) == {"val"}
    m = lab.metrics
    want = m[(m["metric"] == "acc") & (m["split"] == "val")]
    assert len(c) == len(want) == 4 * 3  # 4 runs × epochs 0, 5, 10
    config = lab.runs.set_index("run_id")
    assert (c["layers"].to_numpy() == config.loc[c["run_id"], "layers"].to_numpy()).all()
    merged = c.merge(want, on=["run_id", "epoch"], suffixes=("", "_stored"))
    assert (merged["value"] == merged["value_stored"]).all()
    only = lab.curves("loss", "train", by=["ratio"], where="layers == 1")
    assert set(only["ratio"]) == {0.9} and only["run_id"].nunique() == 2
    assert list(only.columns[:3]) == ["run_id", "ratio", "epoch"]
    with pytest.raises(UserError, match=r"split: 'vall' is not stored .*splits: adv, train"):
        lab.curves("acc", "vall")
    with pytest.raises(UserError, match="by: layer is not a config column .*layers"):
        lab.curves("acc", "val", by=["layer"])


def test_compare_marks_exactly_the_fields_that_differ(lab):
    a, b = run_of(lab, layers=1, seed=0), run_of(lab, layers=2, seed=1)
    cmp = lab.compare(a[:6], b)
    assert list(cmp.columns) == [lab.short_ids[a], lab.short_ids[b], "differs"]
    config = cmp.loc["config"]
    assert set(config.index[config["differs"]]) == {"layers", "seed"}
    assert list(config.index[:2]) in (["layers", "seed"], ["seed", "layers"])  # first
    assert config.loc["layers"].tolist() == ["1", "2", True]
    summary = cmp.loc["summary"]
    acc = lab.runs.set_index("run_id")["final_val_acc"]
    assert summary.loc["final_val_acc", "differs"] == (acc[a] != acc[b])
    assert float(summary.loc["final_val_acc"].iloc[0]) == acc[a]
    with pytest.raises(UserError, match="twice"):
        lab.compare(a, a[:7])
