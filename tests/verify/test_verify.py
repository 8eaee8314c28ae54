"""The damage table of issue 24: each stored thing of a finished run — its summary and config
in the registry, its metrics file, its final checkpoint — flipped by one byte, truncated,
deleted or edited to valid-but-wrong JSON. Each case must be

- detected by every reading command (``runs``, ``runs --json``, ``status``, ``report`` and
  ``rulelab.load``): one warning line naming the run and pointing to ``rulelab verify``;
- named by ``rulelab verify`` (exit 1, a line with the damage's kind and the run);
- repaired by ``rulelab verify --repair`` to bitwise what was stored before (exit 0), after
  which ``verify`` is clean.

Before issue 24 the summary, checkpoint and wrong-JSON cases passed every reading command
silently, and there was no ``verify``.
"""

from __future__ import annotations

import shutil
import sqlite3
import warnings
from contextlib import closing
from pathlib import Path

import pytest

import rulelab
from cli_inproc import NoCapture, run_main
from labs import execute_sql, run_ids

TINY = ["--seq-len", "4", "--vocab", "8", "--n-train", "64", "--n-eval", "32", "--epochs", "6",
        "--eval-every", "2", "--layers", "1", "--heads", "1", "--d-model", "16", "--d-mlp", "32"]



@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A study-S lab with 2 finished runs, trained once."""
    base = tmp_path_factory.mktemp("verify")
    mp = pytest.MonkeyPatch()
    mp.delenv("RULELAB_HOME", raising=False)
    try:
        argv = ["train", "mpsp", *TINY, "--seeds", "2", "--lab", base / "s", "--quiet"]
        assert run_main(argv, NoCapture(), mp).returncode == 0
    finally:
        mp.undo()
    return base / "s"


@pytest.fixture
def lab(trained, tmp_path, monkeypatch):
    monkeypatch.delenv("RULELAB_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    shutil.copytree(trained, tmp_path / "s")
    return tmp_path / "s"


def contents(lab: Path) -> dict:
    """Everything a run stored, as bytes/text: registry texts, metrics and checkpoints."""
    with closing(sqlite3.connect(lab / "registry.sqlite")) as conn:
        rows = {r[0]: r[1:] for r in conn.execute(
            "SELECT run_id, status, config_json, summary_json, error FROM runs")}
    files = {p.relative_to(lab).as_posix(): p.read_bytes()
             for folder in ("metrics", "checkpoints") for p in sorted((lab / folder).iterdir())}
    return {"rows": rows, "files": files}


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit of one byte, mid-file: size and name unchanged
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _file(kind: str, how):
    def damage(lab: Path, run: str) -> None:
        folder, suffix = ("metrics", ".parquet") if kind == "metrics" else ("checkpoints", ".pt")
        path = lab / folder / f"{run}{suffix}"
        path.unlink() if how is None else how(path)
    return damage


def _summary_digit(lab: Path, run: str) -> None:  # the probe: 0.5… → 1.5…
    execute_sql(lab, "UPDATE runs SET summary_json = replace(summary_json, '\"max_adv_acc\": 0.', "
         "'\"max_adv_acc\": 1.') WHERE run_id = ?", run)


def _summary_valid_wrong(lab: Path, run: str) -> None:  # possible values, wrong ones
    execute_sql(lab, "UPDATE runs SET summary_json = replace(summary_json, '\"final_epoch\": 6', "
         "'\"final_epoch\": 4') WHERE run_id = ?", run)


def _summary_byte(lab: Path, run: str) -> None:  # not JSON any more
    execute_sql(lab, "UPDATE runs SET summary_json = substr(summary_json, 1, 20) || '#' || "
         "substr(summary_json, 22) WHERE run_id = ?", run)


def _config_valid_wrong(lab: Path, run: str) -> None:
    execute_sql(lab, "UPDATE runs SET config_json = replace(config_json, '\"n_train\": 64', "
         "'\"n_train\": 96') WHERE run_id = ?", run)


def _registry_byte(lab: Path, run: str) -> None:
    """One bit flipped in the registry file itself, in a digit of the run's summary text (a
    digit stays a digit: the row still reads, with another value)."""
    with closing(sqlite3.connect(lab / "registry.sqlite")) as conn:
        (text,) = conn.execute("SELECT summary_json FROM runs WHERE run_id = ?", (run,)).fetchone()
    path = lab / "registry.sqlite"
    data = bytearray(path.read_bytes())
    at = data.find(text.encode())
    assert at >= 0 and data.find(text.encode(), at + 1) < 0  # in the file, once
    digit = at + text.index('"final_val_acc": ') + len('"final_val_acc": ') + 2
    data[digit] ^= 0x01
    path.write_bytes(bytes(data))


# case → (damage, the kind `verify` names, what the reading commands say)
CASES = {
    "summary digit flipped": (_summary_digit, "summary-hash", "summary of run"),
    "summary valid but wrong": (_summary_valid_wrong, "summary-hash", "summary of run"),
    "registry file bit flipped": (_registry_byte, "summary-hash", "summary of run"),
    "summary byte (bad JSON)": (_summary_byte, "summary-unreadable", "is unreadable"),
    "config valid but wrong": (_config_valid_wrong, "config-id", "is unreadable"),
    "metrics byte flipped": (_file("metrics", _flip), "metrics-hash", "metrics file"),
    "metrics truncated": (_file("metrics", _truncate), "metrics-hash", "metrics file"),
    "metrics deleted": (_file("metrics", None), "metrics-missing", "no metrics file"),
    "checkpoint byte flipped": (_file("checkpoint", _flip), "checkpoint-hash", "checkpoint"),
    "checkpoint truncated": (_file("checkpoint", _truncate), "checkpoint-hash", "checkpoint"),
    "checkpoint deleted": (_file("checkpoint", None), "checkpoint-missing", "checkpoint"),
}


def _reading_warnings(lab: Path, capsys, monkeypatch) -> dict[str, list[str]]:
    out = {}
    for argv in (["runs"], ["runs", "--json"], ["status"],
                 ["report", "--out", lab.parent / "r.html"]):
        res = run_main([*argv, "--lab", lab], capsys, monkeypatch)
        assert res.returncode == 0, res.stderr
        out[" ".join(argv[:2])] = [ln for ln in res.stderr.splitlines()
                                   if ln.startswith("warning: ")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rulelab.load(lab)
    out["rulelab.load"] = [str(w.message) for w in caught]
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_damage_is_detected_named_and_repaired_bitwise(case, lab, capsys, monkeypatch):
    damage, kind, said = CASES[case]
    before = contents(lab)
    run = run_ids(lab)[0]
    damage(lab, run)

    for command, lines in _reading_warnings(lab, capsys, monkeypatch).items():
        assert len(lines) == 1, (command, lines)
        assert run in lines[0] and said in lines[0] and "rulelab verify" in lines[0], command

    res = run_main(["verify", "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 1, res.stdout
    named = [ln for ln in res.stdout.splitlines() if ln.startswith(f"{kind}: run {run}")]
    assert len(named) == 1, res.stdout
    assert "1 problem(s)" in res.stdout.splitlines()[-1]

    res = run_main(["verify", "--repair", "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "DIFFERS" not in res.stdout and "bitwise what was recorded" in res.stdout \
        or kind.startswith("config"), res.stdout
    after = contents(lab)
    assert after["rows"] == before["rows"]
    assert after["files"] == before["files"]  # bitwise, every metrics file and checkpoint
    assert run_main(["verify", "--lab", lab], capsys, monkeypatch).returncode == 0
    assert all(not lines for lines in _reading_warnings(lab, capsys, monkeypatch).values())


def test_a_clean_lab_verifies_clean_and_names_nothing(lab, capsys, monkeypatch):
    res = run_main(["verify", "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 0 and res.stdout.splitlines()[-1].endswith("clean"), res.stdout
    assert "verified 2 run(s) and 4 file(s)" in res.stdout


def test_a_lab_without_hashes_reads_as_before_and_verify_records_them(lab, capsys,
                                                                       monkeypatch):
    """A lab made before issue 24: nothing is damage, `--repair` records the hashes, and from
    then on a flipped byte is caught."""
    before = contents(lab)
    execute_sql(lab, "DROP TABLE run_files")
    assert all(not lines for lines in _reading_warnings(lab, capsys, monkeypatch).values())
    res = run_main(["verify", "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 0 and res.stdout.count("info: run ") == 4, res.stdout
    assert "no hash recorded" in res.stdout
    res = run_main(["verify", "--repair", "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 0 and contents(lab) == before
    res = run_main(["verify", "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 0 and "info" not in res.stdout
    _flip(lab / "checkpoints" / f"{run_ids(lab)[1]}.pt")
    assert run_main(["verify", "--lab", lab], capsys, monkeypatch).returncode == 1


def test_an_impossible_accuracy_is_named_without_any_hash(lab, capsys, monkeypatch):
    """The range check alone (no hash to compare with): max_adv_acc 1.5… is no accuracy."""
    before, run = contents(lab), run_ids(lab)[1]
    execute_sql(lab, "DROP TABLE run_files")
    _summary_digit(lab, run)
    res = run_main(["runs", "--lab", lab], capsys, monkeypatch)
    assert "148.4%" not in res.stdout and "156" not in res.stdout
    assert f"summary of run {run} (max_adv_acc = 1." in res.stderr
    res = run_main(["verify", "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 1 and f"summary-range: run {run}: " in res.stdout
    res = run_main(["verify", "--repair", "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 0 and contents(lab) == before


def test_stray_files_are_named_and_moved_aside(lab, capsys, monkeypatch):
    orphan = lab / "metrics" / "0123456789ab.parquet"
    orphan.write_bytes(b"x")
    temp = lab / "checkpoints" / ".abc.pt.k2j4h5g6.tmp"
    temp.write_bytes(b"y")
    res = run_main(["verify", "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 1
    assert f"orphan: {orphan}" in res.stdout and f"temp-file: {temp}" in res.stdout
    res = run_main(["verify", "--repair", "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 0, res.stdout
    assert not orphan.exists() and not temp.exists()
    assert [p.read_bytes() for p in (lab / "damaged" / "metrics").iterdir()] == [b"x"]


def _foreign(path: Path) -> None:
    import torch

    torch.save({"weights": torch.ones(3)}, path)


@pytest.mark.parametrize("damage", [lambda p: p.write_bytes(b"not a checkpoint" * 40),
                                    _truncate, _foreign], ids=["garbage", "truncated",
                                                               "foreign"])
def test_a_resume_meeting_a_corrupt_checkpoint_restarts_that_run(damage, lab, capsys,
                                                                 monkeypatch):
    """Before: the train refused ("move it away"). Now the checkpoint goes to damaged/ and the
    run trains from the start — deterministic, so it ends bitwise as it first did."""
    before, run = contents(lab), run_ids(lab)[0]
    execute_sql(lab, "UPDATE runs SET status = 'running', summary_json = NULL WHERE run_id = ?",
                run)
    damage(lab / "checkpoints" / f"{run}.pt")
    res = run_main(["train", "mpsp", *TINY, "--seeds", "2", "--lab", lab, "--quiet"], capsys,
                   monkeypatch)
    assert res.returncode == 0, res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("warning: ")]
    assert f"run {run} restarts from the start" in line and "damaged/checkpoints" in line
    assert contents(lab) == before
    assert len(list((lab / "damaged" / "checkpoints").iterdir())) == 1


def test_a_train_naming_an_unreadable_row_retrains_it(lab, capsys, monkeypatch):
    """Before: a row whose config and summary were both damaged stayed left out for ever."""
    before, run = contents(lab), run_ids(lab)[1]
    _config_valid_wrong(lab, run)
    _summary_byte(lab, run)
    res = run_main(["train", "mpsp", *TINY, "--seeds", "2", "--lab", lab, "--quiet"], capsys,
                   monkeypatch)
    assert res.returncode == 0, res.stderr
    assert contents(lab) == before


def test_a_registry_that_sqlite_cannot_read_is_damage_not_bad_input(lab, capsys, monkeypatch):
    """`verify` reports it with exit 1 (scripts tell damage from a typo, which exits 2)."""
    path = lab / "registry.sqlite"
    path.write_bytes(path.read_bytes()[:4096] + b"\xff" * 100)
    res = run_main(["verify", "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 1 and res.stdout.startswith("registry-corrupt: "), res.stdout
    assert run_main(["verify", "--lab", lab / "nope"], capsys, monkeypatch).returncode == 2
