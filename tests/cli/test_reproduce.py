"""``rulelab reproduce STUDY --scale S`` on the toy study (tests/toy_study): the command is built
from the registry, trains the study's recipe through the planner, hands the lab to the study's
``reproduce`` and writes its report; a second call trains nothing; a scale the study has not
is one error line naming those it has."""

import json

from cli_inproc import run_main


def test_reproduce_trains_the_recipe_and_writes_the_report(tmp_path, capsys, monkeypatch, toy):
    lab, out = tmp_path / "lab", tmp_path / "r.html"
    argv = ["reproduce", "toy", "--scale", "quick", "--lab", lab, "--out", out]
    res = run_main(argv, capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    runs = json.loads(run_main(["runs", "--json", "--lab", lab], capsys, monkeypatch).stdout)
    assert len(runs) == 8 and {r["status"] for r in runs} == {"done"}  # 2 widths × 2 noises × 2
    generalized = sum(bool(r["summary"]["generalized"]) for r in runs)
    assert f"toy: {generalized} of 8 runs generalized" in res.stdout
    assert "Toy study (tests only) (quick)" in out.read_text()
    stamps = {p.name: p.stat().st_mtime_ns for p in (lab / "metrics").iterdir()}
    again = run_main(argv, capsys, monkeypatch)
    assert again.returncode == 0, again.stderr
    assert {p.name: p.stat().st_mtime_ns for p in (lab / "metrics").iterdir()} == stamps


def test_a_scale_the_study_has_not_is_one_line(tmp_path, capsys, monkeypatch, toy):
    res = run_main(["reproduce", "toy", "--scale", "huge", "--lab", tmp_path / "lab"], capsys,
                   monkeypatch)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "huge" in res.stderr and "quick" in res.stderr
    assert not (tmp_path / "lab").exists()
