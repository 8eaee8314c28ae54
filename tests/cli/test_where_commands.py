"""``--where`` on ``analyze``, ``report`` and ``export tl`` (issue 23 item 4): the grammar and
errors of ``rulelab runs --where`` (one implementation, :func:`rulelab.api.find_runs.select`),
acting on exactly the runs it picks; a filter that picks none is one error line and writes
nothing. A filtered ``analyze`` never costs other runs their stored rows.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

import rulelab
from cli_inproc import run_main
from labs import tiny_lab


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return tiny_lab(tmp_path_factory.mktemp("where"), "where")


@pytest.fixture
def lab(base, tmp_path) -> Path:
    shutil.copytree(base, tmp_path / "lab")
    return tmp_path / "lab"


def files(lab: Path) -> dict[str, bytes]:
    return {str(p.relative_to(lab)): p.read_bytes() for p in sorted(lab.rglob("*"))
            if p.is_file() and p.suffix in (".parquet", ".pt", ".sqlite")}


def one_error(res) -> str:
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    return lines[0]


def test_analyze_where_stores_the_picked_runs_and_keeps_the_others(lab, capsys, monkeypatch):
    runs = rulelab.load(lab).runs
    two = set(runs.index[runs["layers"] == 2])
    res = run_main(["analyze", "phases", "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    before = pd.read_parquet(lab / "analyses" / "phases" / "all.parquet")
    assert set(before["run_id"]) == set(runs.index)
    res = run_main(["analyze", "phases", "--lab", lab, "--where", "layers == 2"], capsys,
                   monkeypatch)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("│      2 │") == 2 and "│      1 │" not in res.stdout  # printed
    after = pd.read_parquet(lab / "analyses" / "phases" / "all.parquet")
    assert sorted(after["run_id"]) == sorted(before["run_id"])  # one table, every run kept
    ones = before[~before["run_id"].isin(two)].reset_index(drop=True)
    pd.testing.assert_frame_equal(after[~after["run_id"].isin(two)].reset_index(drop=True),
                                  ones)  # the other runs' rows untouched


def test_analyze_where_runs_only_on_the_picked_runs(lab, capsys, monkeypatch):
    runs = rulelab.load(lab).runs
    picked = set(runs.index[(runs["layers"] == 1) & (runs["seed"] == 1)])
    res = run_main(["analyze", "ablation", "--lab", lab, "--where", "layers == 1 and seed > 0"],
                   capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    table = pd.concat(pd.read_parquet(p) for p in (lab / "analyses" / "ablation").iterdir())
    assert set(table["run_id"]) == picked and len(picked) == 1


@pytest.mark.parametrize(("command", "expr", "says"), [
    (["analyze", "phases"], "seed > 5", "error: --where: no run matches 'seed > 5' (of the 4 "
                                        "runs in"),
    (["report", "--out", "r.html"], "seed > 5", "error: --where: no run matches"),
    (["export", "tl"], "seed > 5", "error: --where: no run matches"),
    (["analyze", "phases"], "layer == 2", "error: --where: layer is not a column of the runs; "
                                          "the columns allowed are config: "),
    (["report", "--out", "r.html"], "layers ==", "error: --where: 'layers ==' is not an "
                                                 "expression"),
    (["export", "tl"], "layer == 2", "error: --where: layer is not a column of the runs"),
])
def test_a_where_that_picks_nothing_or_does_not_parse_is_one_line(command, expr, says, lab,
                                                                   tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = files(lab)
    line = one_error(run_main([*command, "--lab", lab, "--where", expr], capsys, monkeypatch))
    assert line.startswith(says), line
    same = run_main(["runs", "--lab", lab, "--ids", "--where", expr], capsys, monkeypatch)
    if "no run matches" not in says:  # the very line `runs --where` prints
        assert one_error(same) == line
    assert files(lab) == before and not (tmp_path / "r.html").exists()
    assert not list(tmp_path.glob("*.pt"))


def test_report_where_draws_only_the_picked_runs(lab, tmp_path, capsys, monkeypatch):
    import rulelab.report.html as html

    seen = {}
    real = html.write_report

    def spy(out, **kw):
        seen.update(kw)
        return real(out, **kw)

    monkeypatch.setattr(html, "write_report", spy)
    runs = rulelab.load(lab).runs
    res = run_main(["report", "--lab", lab, "--out", tmp_path / "r.html", "--where",
                    "seed == 1"], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    picked = set(runs.index[runs["seed"] == 1])
    assert set(seen["runs"]["run_id"]) == picked and len(picked) == 2
    assert set(seen["metrics"]["run_id"]) == picked
    assert f"wrote {tmp_path / 'r.html'} (2 runs where seed == 1)" in res.stdout


def test_export_where_writes_one_file_per_picked_run(lab, tmp_path, capsys, monkeypatch):
    pytest.importorskip("transformer_lens")
    runs = rulelab.load(lab).runs
    out = tmp_path / "exports"
    res = run_main(["export", "tl", "--lab", lab, "--where", "layers == 2", "--out", out],
                   capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    picked = sorted(runs.index[runs["layers"] == 2])
    assert sorted(p.name for p in out.iterdir()) == [f"{r}-tl.pt" for r in picked]
    for r in picked:
        payload = torch.load(out / f"{r}-tl.pt", weights_only=True)
        assert payload["meta"]["run_id"] == r and payload["config"]["n_layers"] == 2
    assert res.stdout.count("wrote ") == 2
    assert f"load_file({str(out / (picked[0] + '-tl.pt'))!r})" in res.stdout


@pytest.mark.parametrize(("argv", "says"), [
    ([], "error: RUN_ID: give the run to export"),
    (["RUN", "--where", "layers == 2"], "error: RUN_ID: give a run or --where, not both"),
    (["--where", "layers == 2", "--out", "one.pt"], "error: --out: 'one.pt' is not allowed; "
                                                    "with --where it names a folder"),
])
def test_export_run_or_where(argv, says, lab, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rid = rulelab.load(lab).runs.index[0]
    argv = [rid if a == "RUN" else a for a in argv]
    line = one_error(run_main(["export", "tl", *argv, "--lab", lab], capsys, monkeypatch))
    assert line.startswith(says), line
    assert [p.name for p in tmp_path.iterdir()] == ["lab"]  # nothing written here
