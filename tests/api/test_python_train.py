"""``rulelab.train`` (issue 23): training from Python builds the same runs as ``rulelab train``
(same ids, bitwise the same metrics), refuses bad input before writing with Python wording,
trains a named recipe with overrides, and returns the lab loaded. Beside it, what ``train``
prints (the estimate first, the rate table and next commands last) and ``status`` after a
killed ``train``."""

from __future__ import annotations

import json
import os
import warnings

import pandas as pd
import pytest

import rulelab
from cli_inproc import run_main
from labs import metrics, registry
from rulelab.errors import UserError

TINY = dict(seq_len=4, vocab=8, n_train=64, n_eval=32, eval_every=2, layers=1, heads=1,
            d_model=16, d_mlp=32)
FLAGS = ["--seq-len", "4", "--vocab", "8", "--n-train", "64", "--n-eval", "32", "--eval-every",
         "2", "--layers", "1", "--heads", "1", "--d-model", "16", "--d-mlp", "32"]


@pytest.fixture(autouse=True)
def _no_home(monkeypatch, tmp_path):
    monkeypatch.delenv("RULELAB_HOME", raising=False)
    monkeypatch.chdir(tmp_path)


def test_python_and_command_line_train_the_same_runs(tmp_path, capsys, monkeypatch):
    lab = rulelab.train("mpsp", ratio=[0.5, 1.0], epochs=12, seeds=2, snapshots=2, quiet=True,
                        lab=tmp_path / "py", **TINY)
    res = run_main(["train", "mpsp", *FLAGS, "--ratio", "0.5", "1.0", "--epochs", "12",
                    "--seeds", "2", "--snapshots", "2", "--quiet", "--lab", tmp_path / "cli"],
                   capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    assert type(lab).__name__ == "LoadedLab" and len(lab.runs) == 4
    assert sorted(lab.runs["run_id"]) == sorted(registry(tmp_path / "cli"))
    assert set(lab.runs["status"]) == {"done"}
    pd.testing.assert_frame_equal(metrics(tmp_path / "py"), metrics(tmp_path / "cli"),
                                  check_exact=True)
    # run again: every run is done, nothing trains, the same lab comes back
    before = metrics(tmp_path / "py")
    again = rulelab.train("mpsp", ratio=[0.5, 1.0], epochs=12, seeds=2, quiet=True,
                          lab=tmp_path / "py", **TINY)
    assert sorted(again.runs["run_id"]) == sorted(lab.runs["run_id"])
    pd.testing.assert_frame_equal(metrics(tmp_path / "py"), before, check_exact=True)


@pytest.mark.parametrize("bad, message", [
    (dict(epochs=0), "epochs: 0 is not allowed; input should be greater than or equal to 1"),
    (dict(seeds=0), "seeds: 0 is not allowed; it must be ≥ 1"),
    (dict(ratio=[0.5, 1.5]), "ratio: 1.5 is not allowed; input should be less than or equal"),
    (dict(seed_start=-1), "seed_start: -1 is not allowed; it must be ≥ 0"),
    (dict(seeds="2"), "seeds: '2' is not allowed; give an integer"),
    (dict(track=["nope"]), "track: nope is not allowed; use a comma list of ablation"),
    (dict(ln=[True, False]), "ln: [True, False] is not allowed; give one value"),
    (dict(epoch=5), "epoch: not a keyword of train('mpsp'); use config keys (label_mod"),
    (dict(experiment="a b"), "experiment: 'a b' is not allowed; use up to 100 letters"),
    (dict(device="tpu"), "device: 'tpu' is not allowed; use cpu, cuda, cuda:N or mps"),
])
def test_bad_input_raises_before_writing_worded_for_python(tmp_path, bad, message):
    with pytest.raises(UserError) as err:
        rulelab.train("mpsp", lab=tmp_path / "lab", **{**TINY, "epochs": 4, **bad})
    assert str(err.value).startswith(message) and "--" not in str(err.value), str(err.value)
    assert not (tmp_path / "lab").exists()


def test_bad_task_and_recipe_arguments(tmp_path):
    with pytest.raises(UserError, match=r"^task: 'nope' is not allowed; use one of .*mpsp"):
        rulelab.train("nope", lab=tmp_path / "lab")
    with pytest.raises(UserError, match=r"^overrides: only with a recipe"):
        rulelab.train("mpsp", overrides={"base.epochs": 3}, lab=tmp_path / "lab")
    with pytest.raises(UserError, match=r"^base\.epochs=0: 0 is not allowed"):
        rulelab.train(recipe="shortcut-saturation/quick", overrides=["base.epochs=0"],
                      lab=tmp_path / "lab")
    with pytest.raises(UserError, match=r"^task: 'modular' is not allowed with recipe"):
        rulelab.train("modular", recipe="shortcut-saturation/quick", lab=tmp_path / "lab")
    with pytest.raises(UserError, match=r"^max_members: 0 is not allowed"):
        rulelab.train(recipe="shortcut-saturation/quick", max_members=0, lab=tmp_path / "lab")
    assert not (tmp_path / "lab").exists()


def test_a_named_recipe_with_overrides_trains_and_comes_back_loaded(tmp_path):
    small = {"base.n_train": 64, "base.n_eval": 32, "base.epochs": 3, "base.eval_every": 1,
             "base.d_model": 16, "base.d_mlp": 32, "base.seq_len": 4, "seeds.count": 1,
             "grid.layers": [1]}
    lab = rulelab.train(recipe="shortcut-saturation/quick", overrides=small, quiet=True,
                        vocab=8, lab=tmp_path / "q")  # vocab=8: a bare-key override
    runs = lab.runs
    assert len(runs) == 2 and set(runs["status"]) == {"done"}  # ratio 0.5 and 0.9, one seed
    assert set(runs["experiment"]) == {"shortcut-saturation-quick"}
    assert set(runs["epochs"]) == {3} and set(runs["vocab"]) == {8}
    assert sorted(runs["ratio"]) == [0.5, 0.9] and set(runs["batch_size"]) == {64}
    assert lab.metrics["epoch"].max() == 3


def test_rulelab_train_stays_the_function_once_the_engine_is_imported():
    """The engine package is ``rulelab.engine`` (issue 22): importing it cannot rebind
    ``rulelab.train``, which is the Python API's function."""
    import rulelab.engine.runner

    assert rulelab.train.__module__ == "rulelab" and callable(rulelab.train)
    assert rulelab.engine.runner.__name__ == "rulelab.engine.runner"
    with pytest.raises(UserError, match="task: 'nope'"):
        rulelab.train("nope")


def test_epochs_all_without_snapshots_analyses_the_final_weights_and_says_so(tmp_path):
    lab = rulelab.train("mpsp", epochs=6, seeds=2, quiet=True, lab=tmp_path / "lab", **TINY)
    with pytest.warns(UserWarning, match="epochs='all': no run has weight snapshots"):
        table = lab.analyze("fingerprints", epochs="all")
    assert set(table["epoch"]) == {6} and set(table["run_id"]) == set(lab.runs["run_id"])
    with pytest.raises(Exception, match=r"^epochs: 3 is not allowed; no run has weights") as e:
        lab.analyze("fingerprints", epochs=3)
    assert "--" not in str(e.value)
    snap = rulelab.train("mpsp", epochs=6, seeds=1, snapshots=3, quiet=True,
                         lab=tmp_path / "snap", **TINY)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # snapshots exist: no warning, every one analysed
        table = snap.analyze("fingerprints", epochs="all")
    assert sorted(set(table["epoch"])) == snap.lab.snapshot_epochs(snap.runs["run_id"].iloc[0])
    assert len(set(table["epoch"])) >= 3


def test_train_prints_its_estimate_first_and_ends_with_the_rate_table(tmp_path, capsys,
                                                                      monkeypatch):
    res = run_main(["train", "mpsp", *FLAGS, "--ratio", "0.5", "1.0", "--epochs", "4",
                    "--lab", tmp_path / "lab", "--quiet"], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    err = res.stderr.splitlines()
    assert err[0].startswith("mpsp: 2 runs → lab ")
    assert err[1].startswith("estimate: ") and " for 2 runs (8 member-epochs) on this CPU" \
        in err[1]
    assert not any(line.startswith("warning:") for line in err)  # seconds, not hours
    out = res.stdout
    assert "rate [95% CI] (k/n)" in out and out.count("│") >= 4  # the table, one row a ratio
    assert "  rulelab runs --lab lab" in out and "  rulelab report --lab lab" in out
    assert "  rulelab analyze gradients --lab lab" in out
    one = run_main(["train", "mpsp", *FLAGS, "--epochs", "4", "--lab", tmp_path / "one",
                    "--quiet"], capsys, monkeypatch)
    assert one.stderr.startswith("mpsp: 1 run → lab ")  # not "1 runs"


def test_an_estimate_over_an_hour_comes_with_a_warning_line():
    from types import SimpleNamespace

    from rulelab.cli.execute import estimate_lines
    from rulelab.settings import Settings

    cfg = SimpleNamespace(epochs=1000)
    chunk = SimpleNamespace(flops=60e9 * 7200, passes=0, configs=[cfg] * 4, start_epoch=0)
    plan = SimpleNamespace(task="mpsp", chunks=[chunk], n_todo=4, n_done=1, n_failed=0,
                           seed_epochs=lambda: 4000,
                           seconds=lambda speed: speed.seconds(chunk.flops, chunk.passes))
    lines = estimate_lines(plan, Settings())
    assert lines[0] == ("estimate: 2.0 h for 4 runs (4,000 member-epochs) on this CPU at 60 "
                        "GFLOP/s + 3 ms a pass; 1 done before")
    assert len(lines) == 2 and lines[1].startswith("warning: this takes about 2.0 h")


def test_status_after_a_killed_train_says_how_to_resume_it(tmp_path, capsys, monkeypatch):
    from rulelab.store import Lab

    lab = tmp_path / "lab"
    rulelab.train("mpsp", epochs=4, seeds=2, quiet=True, lab=lab, **TINY)
    ids = sorted(registry(lab))
    Lab(lab).mark_running(ids, "cpu")  # as a train killed mid-chunk leaves them
    (lab / "sweep.lock").write_text(json.dumps({"pid": os.getpid() + 10**6,
                                                "experiment": "mpsp", "command": "train"}))
    res = run_main(["status", "--lab", lab], capsys, monkeypatch)
    line = next(ln for ln in res.stdout.splitlines() if "left 'running'" in ln)
    assert "2 run(s) of mpsp left 'running' by rulelab train" in line
    assert "run the same `rulelab train …` command" in line and "sweep" not in line
