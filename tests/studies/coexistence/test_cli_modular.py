"""``rulelab data modular`` / ``rulelab train modular`` end to end on a tiny grid (SPEC M.1–M.3).

Training runs as a real ``rulelab`` process once; the cheap commands (``data``, ``runs --json``
and the bad-input cases) call the real entry point :func:`rulelab.cli.main` in-process, with
``sys.argv`` set, so the suite stays fast (each fresh process pays the torch import).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cli_inproc import run_main

GRID = ["--p", "11", "--width", "8", "16", "--noise", "0", "0.5", "--seeds", "2",
        "--epochs", "12", "--eval-every", "5", "--log-eval-steps", "3"]
CONFIG_KEYS = {"op", "p", "width", "noise", "noise_mode", "seed", "activation", "optimizer",
               "lr", "weight_decay", "train_frac", "epochs", "loss", "init", "tied", "bias"}
SUMMARY_KEYS = {"generalized", "final_test_acc", "max_test_acc", "final_clean_acc",
                "final_noisy_acc", "first_step_clean_50", "first_step_noisy_90",
                "failed_reason"}


def _script() -> list[str]:
    exe = Path(sys.executable).with_name("rulelab")
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "rulelab.cli"]



@pytest.fixture(autouse=True)
def _no_home(monkeypatch, tmp_path):
    monkeypatch.delenv("RULELAB_HOME", raising=False)
    monkeypatch.chdir(tmp_path)  # a default lab would land here


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    work = tmp_path_factory.mktemp("modular")
    env = {k: v for k, v in os.environ.items() if k != "RULELAB_HOME"}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run([*_script(), "train", "modular", *GRID, "--quiet", "--lab",
                           str(work / "lab")], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return work / "lab", proc


def test_data_modular_writes_parquet(tmp_path, capsys, monkeypatch):
    out = tmp_path / "sub" / "m.parquet"
    res = run_main(["data", "modular", "--p", "11", "--noise", "0.3", "--noise-mode", "wrong",
                    "--data-seed", "2", "--out", out], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    df = pd.read_parquet(out)
    assert list(df.columns) == ["split", "a", "b", "label", "true_label", "noisy"]
    assert df["split"].value_counts().to_dict() == {"train": 61, "test": 60}
    assert int(df["noisy"].sum()) == 18  # ⌊0.3 · 61 + ½⌋
    assert ((df["a"] + df["b"]) % 11 == df["true_label"]).all()
    assert (df["noisy"] == (df["label"] != df["true_label"])).all()  # 'wrong' mode


def test_train_modular_grid_lands_in_the_lab(trained, capsys, monkeypatch):
    lab, proc = trained
    assert "8 runs" in proc.stderr
    res = run_main(["runs", "--lab", lab, "--json"], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    runs = json.loads(res.stdout)
    assert len(runs) == 8 and all(r["status"] == "done" for r in runs)
    for r in runs:
        assert set(r["config"]) >= CONFIG_KEYS and r["config"]["task"] == "modular"
        assert set(r["summary"]) >= SUMMARY_KEYS
        assert r["config"]["p"] == 11 and r["config"]["epochs"] == 12
        assert r["summary"]["final_epoch"] == 12
        assert (r["summary"]["final_noisy_acc"] is None) == (r["config"]["noise"] == 0)
    got = {(r["config"]["width"], r["config"]["noise"], r["config"]["seed"]) for r in runs}
    assert got == {(w, a, s) for w in (8, 16) for a in (0.0, 0.5) for s in (0, 1)}


@pytest.mark.parametrize("bad, flag", [
    (["--p", "1"], "--p"),
    (["--noise", "0.2", "1.5"], "--noise"),
    (["--width", "8", "0"], "--width"),
    (["--op", "mul", "--p", "12"], "--p"),
    (["--activation", "relu", "swish"], "--activation"),
])
def test_bad_input_is_one_line_and_writes_nothing(bad, flag, tmp_path, capsys, monkeypatch):
    res = run_main(["train", "modular", "--epochs", "2", "--lab", tmp_path / "lab", *bad],
                   capsys, monkeypatch)
    assert res.returncode == 2, res
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and flag in lines[0], lines
    assert list(tmp_path.iterdir()) == []  # no lab, nothing else


@pytest.mark.parametrize("bad", [["--noise", "-0.1"], ["--noise", "0.1", "0.2"]])
def test_bad_data_input_writes_no_file(bad, tmp_path, capsys, monkeypatch):
    res = run_main(["data", "modular", *bad, "--out", tmp_path / "d.parquet"], capsys,
                   monkeypatch)
    assert res.returncode == 2 and "--noise" in res.stderr and len(res.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
