"""Issue 24's building blocks: file modes from the umask, the cheap and the full hash check,
the impossible-summary check, hashes recorded with a finished run, nan/inf refused as "not a
number" and seed ranges named by the flags the user passed."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing

import pandas as pd
import pytest

from cli_inproc import run_main
from rulelab.config.base import ConfigError, make_config
from rulelab.grid import largest_seed, seed_range_problem
from rulelab.store import Lab
from rulelab.store.atomic import atomic_write, new_file_mode
from rulelab.store.digests import FULL_HASH_BYTES, file_problem, file_stamp
from rulelab.store.integrity import summary_problem, warning_line
from toy_study import ToyRunConfig


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_stored_files_get_the_mode_the_umask_gives(umask, mode, tmp_path):
    """Before: mkstemp's 0600 whatever the umask (registry 0644, data unreadable to others)."""
    old = os.umask(umask)
    try:
        assert new_file_mode() == mode
        atomic_write(tmp_path / "f.bin", lambda f: f.write(b"x"))
        (tmp_path / "plain").write_bytes(b"x")  # what open() gives: the registry's rule
    finally:
        os.umask(old)
    assert (tmp_path / "f.bin").stat().st_mode & 0o777 == mode
    assert (tmp_path / "plain").stat().st_mode & 0o777 == mode


def test_the_cheap_check_hashes_small_files_and_trusts_a_big_files_mtime(tmp_path):
    small, big = tmp_path / "small", tmp_path / "big"
    small.write_bytes(b"a" * 1000)
    big.write_bytes(b"a" * (FULL_HASH_BYTES + 1))
    stamps = {p: file_stamp(p) for p in (small, big)}
    for path in (small, big):
        st = path.stat()
        data = bytearray(path.read_bytes())
        data[500] ^= 1  # bit rot: same size, and the mtime put back
        path.write_bytes(bytes(data))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert file_problem(small, stamps[small], full=False) == \
        "content differs from its recorded hash"
    assert file_problem(big, stamps[big], full=False) is None  # cheap: size + mtime only
    assert file_problem(big, stamps[big], full=True) == "content differs from its recorded hash"
    os.utime(big)  # a write moves the mtime: then even the cheap check hashes it
    assert file_problem(big, stamps[big], full=False) == "content differs from its recorded hash"
    small.write_bytes(b"a" * 10)
    assert file_problem(small, stamps[small], full=False) == "10 bytes, 1000 were written"
    small.unlink()
    assert file_problem(small, stamps[small]) == "missing"


@pytest.mark.parametrize(("summary", "why"), [
    ({"max_adv_acc": 1.484375}, "max_adv_acc = 1.484375 is not an accuracy in [0, 1]"),
    ({"final_test_acc": -0.5}, "final_test_acc = -0.5 is not an accuracy in [0, 1]"),
    ({"max_adv_acc": 1.0, "final_val_acc": 0.0, "final_adv_acc": float("nan")}, None),
    ({"final_train_loss": 7.5, "first_epoch_adv_100": 300, "accuracy_note": 3}, None),
    ({"generalized": True, "final_eval_acc": None}, None),
])
def test_summary_problem_names_an_impossible_accuracy(summary, why):
    assert summary_problem(summary) == why


def test_the_warning_line_names_four_items_and_counts_the_rest(tmp_path):
    from rulelab.store.integrity import Damage

    damage = [Damage(f"r{i}", "summary", f"summary of run r{i}") for i in range(6)]
    line = warning_line(damage, tmp_path)
    assert "\n" not in line and "r3" in line and "r4" not in line and "and 2 more" in line
    assert f"rulelab verify --lab {tmp_path}" in line


def test_a_finished_run_records_its_hashes_in_the_registry(tmp_path):
    lab = Lab(tmp_path / "lab", create=True)
    lab.register([("a" * 12, {"task": "mpsp"})], "e")
    rows = pd.DataFrame({"epoch": [0], "split": ["val"], "metric": ["acc"], "value": [0.5]})
    lab.write_metrics("a" * 12, rows)
    lab.mark_done("a" * 12, {"max_adv_acc": 0.5})
    stamps = lab.stamps()
    metrics = lab.metrics_dir / f"{'a' * 12}.parquet"
    assert stamps["a" * 12, "metrics"].sha256 == file_stamp(metrics).sha256
    assert stamps["a" * 12, "summary"].size == len('{"max_adv_acc": 0.5}')
    assert ("a" * 12, "checkpoint") not in stamps  # none was written
    assert stamps["a" * 12, "config"].copy == '{"task": "mpsp"}'
    lab.mark_running(["a" * 12], "cpu")  # trained again: the old hashes no longer hold
    assert set(lab.stamps()) == {("a" * 12, "config")}


def test_a_lab_without_the_hash_table_reads(tmp_path):
    lab = Lab(tmp_path / "lab", create=True)
    lab.register([("b" * 12, {"task": "mpsp"})], "e")
    with closing(sqlite3.connect(lab.registry_path)) as conn, conn:
        conn.execute("DROP TABLE run_files")
    assert Lab(tmp_path / "lab").stamps() == {}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), "nan", "Infinity"])
@pytest.mark.parametrize("field", ["lr", "noise"])
def test_nan_and_inf_are_not_numbers(field, value):
    """Before: "input should be less than or equal to 1" (nan fails every bound)."""
    with pytest.raises(ConfigError, match=rf"^--{field}: -?(nan|inf)\w* is not allowed; it is "
                                          "not a number"):
        make_config(ToyRunConfig, **{field: value})


def test_seed_ranges_are_named_by_what_sets_them():
    top = largest_seed(ToyRunConfig)
    assert top == 2**31 - 1
    assert seed_range_problem(ToyRunConfig, top, 1) is None
    assert seed_range_problem(ToyRunConfig, top, 2) == (
        f"seeds {top} to {top + 1} are not allowed; seeds go up to 2,147,483,647, so at most "
        f"1 seed(s) from {top}")
    assert seed_range_problem(ToyRunConfig, top + 1, 1).startswith(f"{top + 1} is not allowed")


@pytest.mark.parametrize(("argv", "line"), [
    (["--noise", "nan"], "error: --noise: nan is not allowed; it is not a number"),
    (["--lr", "inf"], "error: --lr: inf is not allowed; it is not a number"),
    (["--seed-start", "2147483647", "--seeds", "2"],
     "error: --seed-start/--seeds: seeds 2147483647 to 2147483648 are not allowed"),
    (["--seed-start", "2147483648"], "error: --seed-start: 2147483648 is not allowed"),
])
def test_the_train_command_names_the_flags_given(argv, line, tmp_path, capsys, monkeypatch, toy):
    res = run_main(["train", "toy", *argv, "--lab", tmp_path / "lab"], capsys, monkeypatch)
    assert res.returncode == 2 and res.stderr.startswith(line), res.stderr
    assert len(res.stderr.splitlines()) == 1 and not (tmp_path / "lab").exists()


def test_a_recipe_lr_nan_and_seed_range_are_named_by_their_keys(tmp_path, capsys, monkeypatch,
                                                                 toy):
    for name, text, said in (
            ("nan", "base: {lr: .nan}", "r.yaml:3: base.lr: nan is not allowed; it is not a "
             "number"),
            ("seeds", "seeds: {count: 2, start: 2147483647}", "r.yaml:3: seeds: seeds "
             "2147483647 to 2147483648 are not allowed")):
        recipe = tmp_path / name / "r.yaml"
        recipe.parent.mkdir()
        recipe.write_text(f"experiment: t\ntask: toy\n{text}\n")
        res = run_main(["sweep", recipe, "--lab", tmp_path / "lab"], capsys, monkeypatch)
        assert res.returncode == 2 and said in res.stderr, res.stderr
