"""Damaged or tampered labs are read as far as they can be, and what was left out is named
(DESIGN §3; issue 12): a corrupt metrics file, a deleted one, a changed byte in a stored
summary or config, a foreign checkpoint, unfinished runs under a study-M analysis.

Every command runs through the real entry point in this process (:func:`run_main`). Each test
would fail on the code before issue 12 (noted per test).
"""

from __future__ import annotations

import re
import shutil

import pytest
import torch

from cli_inproc import NoCapture, run_main
from labs import execute_sql, run_ids

TINY = ["--seq-len", "4", "--vocab", "8", "--n-train", "64", "--n-eval", "32", "--epochs", "6",
        "--eval-every", "2", "--layers", "1", "--heads", "1", "--d-model", "16", "--d-mlp", "32"]
M_TINY = ["--p", "11", "--width", "8", "--epochs", "12", "--eval-every", "5",
          "--log-eval-steps", "3"]



@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A study-S lab with 3 finished runs and a study-M lab with 2, trained once."""
    base = tmp_path_factory.mktemp("damaged")
    mp = pytest.MonkeyPatch()
    mp.delenv("RULELAB_HOME", raising=False)
    try:
        for argv in (["train", "mpsp", *TINY, "--seeds", "3", "--lab", base / "s"],
                     ["train", "modular", *M_TINY, "--seeds", "2", "--lab", base / "m"]):
            assert run_main([*argv, "--quiet"], NoCapture(), mp).returncode == 0
    finally:
        mp.undo()
    return base


@pytest.fixture
def s_lab(trained, tmp_path):
    shutil.copytree(trained / "s", tmp_path / "s")
    return tmp_path / "s"


@pytest.fixture
def m_lab(trained, tmp_path):
    shutil.copytree(trained / "m", tmp_path / "m")
    return tmp_path / "m"


@pytest.fixture(autouse=True)
def _cwd(tmp_path, monkeypatch):
    monkeypatch.delenv("RULELAB_HOME", raising=False)
    monkeypatch.chdir(tmp_path)


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: ")]


def test_report_skips_a_corrupt_metrics_file_and_names_it(s_lab, capsys, monkeypatch):
    """Before: ``report`` raised on the first damaged file and wrote nothing."""
    bad = s_lab / "metrics" / f"{run_ids(s_lab)[0]}.parquet"
    bad.write_bytes(b"not parquet" * 10)
    out = s_lab.parent / "r.html"
    res = run_main(["report", "--lab", s_lab, "--out", out], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    assert out.is_file() and "data:image/png;base64," in out.read_text()
    warnings = _warnings(res.stderr)
    assert len(warnings) == 1 and str(bad) in warnings[0], res.stderr


def test_a_deleted_metrics_file_is_named_by_runs_and_report(s_lab, capsys, monkeypatch):
    """Before: the run silently vanished from the report's curves."""
    gone = run_ids(s_lab)[1]
    (s_lab / "metrics" / f"{gone}.parquet").unlink()
    for argv in (["runs", "--lab", s_lab], ["runs", "--json", "--lab", s_lab],
                 ["report", "--lab", s_lab, "--out", s_lab.parent / "r.html"]):
        res = run_main(argv, capsys, monkeypatch)
        assert res.returncode == 0, res.stderr
        warnings = _warnings(res.stderr)
        assert len(warnings) == 1 and gone in warnings[0] and "no metrics file" in warnings[0]


def test_a_changed_byte_in_a_summary_leaves_that_run_out(s_lab, capsys, monkeypatch):
    """Before: every read command died with a JSONDecodeError."""
    run = run_ids(s_lab)[0]
    execute_sql(s_lab, "UPDATE runs SET summary_json = substr(summary_json, 1, 20) || '#' || "
         "substr(summary_json, 22) WHERE run_id = ?", run)
    for argv in (["runs", "--lab", s_lab], ["status", "--lab", s_lab],
                 ["report", "--lab", s_lab, "--out", s_lab.parent / "r.html"]):
        res = run_main(argv, capsys, monkeypatch)
        assert res.returncode == 0, res.stderr
        warnings = _warnings(res.stderr)
        assert len(warnings) == 1 and f"run {run} is unreadable" in warnings[0], res.stderr
    res = run_main(["runs", "--json", "--lab", s_lab], capsys, monkeypatch)
    assert run not in res.stdout and len(_warnings(res.stderr)) == 1


def test_a_changed_byte_in_a_config_is_caught_by_the_run_id(s_lab, capsys, monkeypatch):
    """Before: accepted silently (``runs`` showed a cell with n_train 296)."""
    run = run_ids(s_lab)[0]
    execute_sql(s_lab, "UPDATE runs SET config_json = replace(config_json, '\"n_train\": 64', "
         "'\"n_train\": 96') WHERE run_id = ?", run)
    res = run_main(["runs", "--lab", s_lab], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    assert not re.search(r"\b96\b", res.stdout)  # "(paper 4,096)" in the scale note is fine
    warnings = _warnings(res.stderr)
    assert len(warnings) == 1 and run in warnings[0] and "run id" in warnings[0]
    res = run_main(["analyze", "fingerprints", "--lab", s_lab], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    assert any(run in w for w in _warnings(res.stderr))


def test_a_foreign_final_checkpoint_is_one_line_naming_it(s_lab, capsys, monkeypatch):
    """A valid torch file without the expected keys (before: ``KeyError: 'params'``)."""
    path = s_lab / "checkpoints" / f"{run_ids(s_lab)[0]}.pt"
    torch.save({"weights": torch.ones(3)}, path)
    res = run_main(["analyze", "fingerprints", "--lab", s_lab], capsys, monkeypatch)
    assert res.returncode == 2
    # issue 24: the reading check names it (hash) before the analysis refuses it (one line)
    warning, error = res.stderr.splitlines()
    assert str(path) in warning and "rulelab verify" in warning
    assert error.startswith("error: ") and str(path) in error and "Traceback" not in error


def test_weights_of_another_model_are_one_line(s_lab, trained, capsys, monkeypatch):
    """A study-M checkpoint copied over a study-S one: the right keys, the wrong weights."""
    s_run = run_ids(s_lab)[0]
    m_ckpt = next((trained / "m" / "checkpoints").glob("*.pt"))
    shutil.copy(m_ckpt, s_lab / "checkpoints" / f"{s_run}.pt")
    res = run_main(["analyze", "fingerprints", "--lab", s_lab], capsys, monkeypatch)
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 2, res.stderr
    warning, error = res.stderr.splitlines()  # issue 24: the hash check names it, then refuses
    assert f"checkpoints/{s_run}.pt (" in warning and "rulelab verify" in warning
    assert f"checkpoints/{s_run}.pt is damaged" in error and "verify --repair" in error
    execute_sql(s_lab, "DROP TABLE run_files")  # a lab made before hashes: the weights tell
    res = run_main(["analyze", "fingerprints", "--lab", s_lab], capsys, monkeypatch)
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1, res.stderr
    assert f"checkpoints/{s_run}.pt does not hold the weights of run {s_run}" in res.stderr


@pytest.mark.parametrize("analysis", ["dd", "order"])
def test_study_m_tables_leave_out_unfinished_runs_and_say_which(analysis, m_lab, capsys,
                                                                 monkeypatch):
    """Before: ``dd`` raised KeyError and ``order`` wrote an empty table without a word."""
    pending = run_ids(m_lab)[0]
    execute_sql(m_lab, "UPDATE runs SET status = 'running' WHERE run_id = ?", pending)
    res = run_main(["analyze", analysis, "--lab", m_lab], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    warnings = _warnings(res.stderr)
    assert len(warnings) == 1 and pending in warnings[0] and "unfinished" in warnings[0]
