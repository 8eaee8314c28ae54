"""``key=value`` overrides on ``rulelab sweep`` and ``rulelab reproduce`` (issue 23), and the
command-line rough edges of that issue: ``data --ratio`` help and behaviour agree, analysis
progress lines name their ensemble, whole numbers print whole, and ``sweep`` ends with the
rate table."""

from __future__ import annotations

import pytest

from cli_inproc import run_main
from labs import TINY, write

RECIPE = f"""experiment: o
task: mpsp
base: {{{TINY.replace("layers: 1, ", "")}, epochs: 6}}
grid:
  layers: [1, 2]
seeds: 2
"""


@pytest.fixture(autouse=True)
def _here(monkeypatch, tmp_path):
    monkeypatch.delenv("RULELAB_HOME", raising=False)
    monkeypatch.chdir(tmp_path)


def test_sweep_dry_run_plans_the_overridden_recipe(tmp_path, capsys, monkeypatch):
    res = run_main(["sweep", "shortcut-saturation/quick", "base.epochs=50", "seeds.count=2",
                    "--dry-run"], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == ("plan for shortcut-saturation/quick with base.epochs=50 seeds.count=2 "
                        "(dry run: nothing written)")
    assert "runs        8 in 4 cells" in res.stdout  # 32 runs in the file: 4 cells × 8 seeds
    assert "400 seed-epochs" in res.stdout  # 8 runs × 50 epochs
    assert not (tmp_path / "rulelab-runs").exists()


@pytest.mark.parametrize("args, message", [
    (["base.epoch=50"], "error: base.epoch=50: unknown config key 'epoch' (did you mean "
                        "'epochs'?)"),
    (["seeds.count=x"], "error: seeds.count=x: 'x' is not allowed; give a count from 1 to "),
    (["base.epochs=50", "oops"], "error: 'oops' is not a key=value override"),
    (["bogus=1"], "error: bogus=1: unknown config key 'bogus'; allowed: label_mod,"),
])
def test_sweep_refuses_a_bad_override_in_one_line(tmp_path, capsys, monkeypatch, args, message):
    res = run_main(["sweep", "shortcut-saturation/quick", *args, "--lab", tmp_path / "lab"],
                   capsys, monkeypatch)
    assert res.returncode == 2 and res.stderr.startswith(message), res.stderr
    assert res.stderr.count("\n") == 1 and not (tmp_path / "lab").exists()


def test_sweep_with_an_override_trains_it_and_ends_with_the_table(tmp_path, capsys,
                                                                  monkeypatch):
    recipe = write(tmp_path, "r", RECIPE)
    res = run_main(["sweep", recipe, "base.epochs=4", "seeds=1", "--lab", tmp_path / "lab",
                    "--quiet"], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    assert "trained 2 of 2 runs (2 done, 0 failed)" in res.stderr
    assert "estimate: " in res.stderr and "(8 member-epochs)" in res.stderr  # 2 × 4 epochs
    assert "rate [95% CI] (k/n)" in res.stdout and "  rulelab status --lab lab" in res.stdout
    import rulelab

    runs = rulelab.load(tmp_path / "lab").runs
    assert sorted(runs["layers"]) == [1, 2] and set(runs["epochs"]) == {4}


def test_reproduce_refuses_a_bad_override_before_writing(tmp_path, capsys, monkeypatch):
    res = run_main(["reproduce", "shortcut-saturation", "--scale", "quick", "base.epochs=0"],
                   capsys, monkeypatch)
    assert res.returncode == 2, res.stderr
    assert res.stderr == ("error: base.epochs=0: 0 is not allowed; input should be greater "
                          "than or equal to 1\n")
    assert not (tmp_path / "rulelab-runs").exists() and not (tmp_path / "reports").exists()


def test_an_overridden_reproduction_gets_its_own_default_lab():
    from rulelab.cli.reproduce import override_tag
    from rulelab.sweep.overrides import parse_override

    a = [parse_override("base.epochs=50"), parse_override("seeds.count=2")]
    assert override_tag(a) == override_tag(a[::-1]) and len(override_tag(a)) == 6
    assert override_tag(a) != override_tag(a[:1])


def test_data_help_shows_one_value_and_a_list_is_refused_by_name(tmp_path, capsys,
                                                                 monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    res = run_main(["data", "mpsp", "--help"], capsys, monkeypatch)
    ratio = next(line for line in res.stdout.splitlines() if "--ratio" in line)
    assert "<float>" in ratio and "list" not in ratio, ratio
    res = run_main(["data", "mpsp", "--ratio", "0.5", "0.9", "--out", tmp_path / "d.parquet"],
                   capsys, monkeypatch)
    assert res.returncode == 2 and res.stderr == ("error: --ratio: 2 values given; data mpsp "
                                                  "writes one data set, give one value\n")
    res = run_main(["data", "mpsp", "--ratio", "0.5", "--seq-len", "4", "--vocab", "8",
                    "--n-train", "32", "--n-eval", "16", "--out", tmp_path / "d.parquet"],
                   capsys, monkeypatch)
    assert res.returncode == 0 and (tmp_path / "d.parquet").stat().st_size > 0, res.stderr


def test_analysis_progress_names_each_ensemble_once(tmp_path, capsys, monkeypatch):
    recipe = write(tmp_path, "r", RECIPE)
    assert run_main(["sweep", recipe, "base.epochs=2", "--lab", tmp_path / "lab", "--quiet"],
                    capsys, monkeypatch).returncode == 0
    res = run_main(["analyze", "fingerprints", "--lab", tmp_path / "lab"], capsys, monkeypatch)
    steps = [ln for ln in res.stderr.splitlines() if ln.startswith("fingerprints: ")]
    assert steps == ["fingerprints: ensemble 1 (1L·1H, 2 runs) at epoch 2",
                     "fingerprints: ensemble 2 (2L·1H, 2 runs) at epoch 2"], res.stderr


def test_whole_numbers_print_whole_in_analysis_tables():
    import pandas as pd

    from rulelab.report.terminal import cell_text, print_frame

    assert [cell_text(v) for v in (1025.0, 1500.0, 0.51234, 3e-4, 1.0, float("nan"))] == \
        ["1025", "1500", "0.512", "0.0003", "1", "nan"]
    from rich.console import Console

    out = Console(width=100, record=True)
    print_frame("t", pd.DataFrame({"width": [17, 1025], "acc": [0.5, 0.25]}), out=out)
    text = out.export_text()
    assert "1025" in text and "1.02e+03" not in text and "17.0" not in text
