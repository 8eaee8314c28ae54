"""The embedded store (DESIGN §3): registry, metrics, checkpoints, lab resolution, code version."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess

import numpy as np
import pandas as pd
import pytest
import torch

from rulelab.store import Lab, LabFrames, StoreError, code_version, load, resolve_lab
from rulelab.store.version import describe


def _cfg(seed: int, ratio: float = 0.9) -> dict:
    return {"task": "mpsp", "seed": seed, "ratio": ratio, "layers": 2}


@pytest.fixture
def lab(tmp_path):
    return Lab(tmp_path / "lab", create=True)


def _metrics(run_id: str, epochs: list[int]) -> pd.DataFrame:
    rows = [
        (run_id, e, split, metric, 0.5 + 0.01 * e)
        for e in epochs
        for split in ("train", "adv")
        for metric in ("acc", "loss")
    ]
    return pd.DataFrame(rows, columns=["run_id", "epoch", "split", "metric", "value"])


# --- lab resolution and opening --------------------------------------------------------------
def test_resolve_lab_explicit_env_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RULELAB_HOME", raising=False)
    assert resolve_lab(None) == tmp_path / "rulelab-runs"
    monkeypatch.setenv("RULELAB_HOME", str(tmp_path / "home"))
    assert resolve_lab(None) == tmp_path / "home"
    assert resolve_lab(tmp_path / "explicit") == tmp_path / "explicit"
    assert Lab(create=True).root == tmp_path / "home"
    assert (tmp_path / "home" / "registry.sqlite").is_file()


def test_missing_lab_without_create_raises_and_creates_nothing(tmp_path):
    root = tmp_path / "nolab"
    with pytest.raises(StoreError, match=r"no lab at .*nolab.*--lab") as info:
        Lab(root)
    assert "\n" not in str(info.value)
    assert not root.exists()
    with pytest.raises(StoreError):
        load(root)
    assert not root.exists()


def test_reopen_existing_lab_without_create(lab):
    lab.register([("a", _cfg(0))], "exp")
    assert Lab(lab.root).status("a") == "pending"


def test_registry_is_wal_with_schema_version(lab):
    with sqlite3.connect(lab.root / "registry.sqlite") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] >= 1
    conn.close()


@pytest.mark.parametrize(
    "content", [b"this is not sqlite" * 100, b"SQLite format 3\x00" + b"\xff" * 200]
)
def test_corrupt_registry_raises_and_leaves_file_untouched(tmp_path, content):
    root = tmp_path / "lab"
    root.mkdir()
    reg = root / "registry.sqlite"
    reg.write_bytes(content)
    for create in (False, True):
        with pytest.raises(StoreError, match="registry.sqlite") as info:
            Lab(root, create=create)
        assert "\n" not in str(info.value)
        assert reg.read_bytes() == content
    assert sorted(p.name for p in root.iterdir()) == ["registry.sqlite"]


def test_foreign_sqlite_schema_is_rejected(tmp_path):
    root = tmp_path / "lab"
    root.mkdir()
    reg = root / "registry.sqlite"
    with sqlite3.connect(reg) as conn:
        conn.execute("CREATE TABLE other (x INTEGER)")
    conn.close()
    before = reg.read_bytes()
    with pytest.raises(StoreError, match="schema"):
        Lab(root, create=True)
    assert reg.read_bytes() == before


def test_empty_registry_file_is_initialized_only_with_create(tmp_path):
    root = tmp_path / "lab"
    root.mkdir()
    (root / "registry.sqlite").touch()  # a creation interrupted before the schema was written
    with pytest.raises(StoreError, match="empty"):
        Lab(root)
    assert (root / "registry.sqlite").read_bytes() == b""
    lab = Lab(root, create=True)
    lab.register([("a", _cfg(0))], "exp")
    assert Lab(root).status("a") == "pending"


# --- registry ---------------------------------------------------------------------------------
def test_register_is_idempotent_and_preserves_existing_rows(lab):
    assert lab.register([("a", _cfg(0)), ("b", _cfg(1))], "exp1") == ["a", "b"]
    lab.mark_running(["a"], device="cpu")
    lab.mark_done("a", {"generalized": True})
    before = lab.runs_json()
    ids = lab.register([("a", _cfg(99)), ("b", _cfg(98)), ("c", _cfg(2))], "exp2")
    assert ids == ["a", "b", "c"]
    assert lab.statuses(["a", "b", "c", "zzz"]) == {"a": "done", "b": "pending", "c": "pending"}
    after = {r["run_id"]: r for r in lab.runs_json()}
    assert [after[r["run_id"]] for r in before] == before  # a and b untouched
    assert after["c"]["experiment"] == "exp2"
    assert len(lab.runs()) == 3


def test_status_transitions(lab):
    lab.register([("a", _cfg(0)), ("b", _cfg(1))], "exp")
    assert lab.status("a") == "pending"
    assert lab.status("nope") is None
    lab.mark_running(["a", "b"], device="cuda:0")
    assert lab.statuses(["a", "b"]) == {"a": "running", "b": "running"}
    lab.mark_failed("b", "out of memory", {"epochs_done": 3})
    lab.mark_done("a", {"generalized": True})
    runs = {r["run_id"]: r for r in lab.runs_json()}
    assert runs["a"]["status"] == "done" and runs["a"]["error"] is None
    assert runs["b"]["status"] == "failed" and runs["b"]["error"] == "out of memory"
    assert runs["b"]["summary"] == {"epochs_done": 3}
    assert runs["a"]["code_version"] == code_version()
    # a retried run: running clears the error, a failure without summary keeps the old one
    lab.mark_running(["b"], device="cpu")
    assert lab.runs_json()[1]["error"] is None
    lab.mark_failed("b", "killed")
    assert {r["run_id"]: r for r in lab.runs_json()}["b"]["summary"] == {"epochs_done": 3}
    with pytest.raises(StoreError, match="unknown run"):
        lab.mark_done("zzz", {})


def test_runs_frame_has_config_and_summary_columns(lab):
    lab.register([("a", _cfg(0, 0.5)), ("b", _cfg(1, 1.0))], "exp")
    lab.mark_running(["a"], device="cuda:0")
    lab.mark_done("a", {"generalized": True, "first_adv_100": np.int64(420), "final_acc": 0.99})
    df = lab.runs()
    assert list(df.columns[:9]) == [
        "run_id", "experiment", "task", "status", "error",
        "code_version", "device", "created_at", "updated_at",
    ]  # fmt: skip
    assert list(df.columns[9:]) == ["seed", "ratio", "layers", "generalized", "first_adv_100",
                                    "final_acc"]  # fmt: skip
    a, b = df.set_index("run_id").loc["a"], df.set_index("run_id").loc["b"]
    assert (a["task"], a["status"], a["device"], a["experiment"]) == (
        "mpsp",
        "done",
        "cuda:0",
        "exp",
    )
    assert (a["seed"], a["ratio"], a["layers"]) == (0, 0.5, 2)
    assert (b["seed"], b["ratio"]) == (1, 1.0)
    assert a["generalized"] == True and a["first_adv_100"] == 420  # noqa: E712
    assert a["final_acc"] == pytest.approx(0.99)
    assert pd.isna(b["final_acc"]) and pd.isna(b["device"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00", a["created_at"])


def test_runs_json_shape(lab):
    lab.register([("a", _cfg(0))], "exp")
    lab.mark_running(["a"], device="cpu")
    lab.mark_done("a", {"generalized": False})
    assert lab.runs_json() == [
        {
            "run_id": "a",
            "status": "done",
            "experiment": "exp",
            "config": _cfg(0),
            "summary": {"generalized": False},
            "error": None,
            "code_version": code_version(),
        }
    ]


def test_empty_lab_frames(lab):
    frames = load(lab.root)
    assert isinstance(frames, LabFrames)
    assert frames.runs.empty and "run_id" in frames.runs.columns
    assert frames.metrics.empty
    assert list(frames.metrics.columns) == ["run_id", "epoch", "split", "metric", "value"]


# --- metrics ----------------------------------------------------------------------------------
def test_metrics_round_trip_and_overwrite(lab):
    lab.write_metrics("a", _metrics("a", [0, 10]))
    lab.write_metrics("b", _metrics("b", [0]).drop(columns="run_id"))  # run_id is filled in
    lab.write_metrics("a", _metrics("a", [0, 10, 20]))  # all rows so far replace the old file
    df = lab.read_metrics()
    assert list(df.columns) == ["run_id", "epoch", "split", "metric", "value"]
    assert df["epoch"].dtype == np.int64 and df["value"].dtype == np.float64
    assert pd.api.types.is_string_dtype(df["split"]) and pd.api.types.is_string_dtype(df["metric"])
    got = df.sort_values(["run_id", "epoch", "split", "metric"]).reset_index(drop=True)
    want = pd.concat([_metrics("a", [0, 10, 20]), _metrics("b", [0])])
    want = want.sort_values(["run_id", "epoch", "split", "metric"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    assert set(lab.read_metrics(["b", "missing"])["run_id"]) == {"b"}
    assert len(lab.read_metrics(["a"])) == 12
    assert sorted(p.name for p in (lab.root / "metrics").iterdir()) == ["a.parquet", "b.parquet"]
    frames = load(lab.root)
    assert len(frames.metrics) == 16


def test_metrics_reject_rows_of_other_runs(lab):
    with pytest.raises(ValueError, match="other|run"):
        lab.write_metrics("a", _metrics("b", [0]))


def test_corrupt_metrics_file_raises(lab):
    (lab.root / "metrics" / "a.parquet").write_bytes(b"garbage")
    with pytest.raises(StoreError, match=r"a\.parquet"):
        lab.read_metrics()


# --- checkpoints ------------------------------------------------------------------------------
def test_checkpoint_round_trip_with_generator_state(lab):
    g = torch.Generator().manual_seed(123)
    torch.rand(5, generator=g)
    model = {"w": torch.randn(2, 3), "b": torch.zeros(2, dtype=torch.float64)}
    optim = {  # the shape of an AdamW state_dict, without paying torch.optim's import time
        "state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.randn(2, 3)}},
        "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.98), "params": [0]}],
    }
    state = {"epoch": 7, "model": model, "optim": optim, "rng": g.get_state(), "tag": "x"}
    assert lab.load_checkpoint("a") is None
    lab.save_checkpoint("a", state)
    lab.save_checkpoint("a", state)  # overwrite in place
    assert [p.name for p in (lab.root / "checkpoints").iterdir()] == ["a.pt"]  # no temp files
    back = lab.load_checkpoint("a")
    assert back["epoch"] == 7 and back["tag"] == "x"
    for k, v in model.items():
        assert torch.equal(back["model"][k], v) and back["model"][k].dtype == v.dtype
    assert torch.equal(back["optim"]["state"][0]["exp_avg"], optim["state"][0]["exp_avg"])
    assert back["optim"]["param_groups"] == optim["param_groups"]
    g2 = torch.Generator()
    g2.set_state(back["rng"])
    assert torch.equal(torch.rand(5, generator=g2), torch.rand(5, generator=g))
    lab.delete_checkpoint("a")
    assert lab.load_checkpoint("a") is None


def test_failed_checkpoint_write_leaves_no_temp_and_keeps_old(lab):
    lab.save_checkpoint("a", {"epoch": 1})

    class Boom:
        def __reduce__(self):
            raise RuntimeError("cannot pickle")

    with pytest.raises(RuntimeError):
        lab.save_checkpoint("a", {"epoch": 2, "bad": Boom()})
    assert [p.name for p in (lab.root / "checkpoints").iterdir()] == ["a.pt"]
    assert lab.load_checkpoint("a") == {"epoch": 1}


def test_corrupt_checkpoint_raises_and_is_kept(lab):
    lab.save_checkpoint("a", {"w": torch.arange(1000)})
    path = lab.root / "checkpoints" / "a.pt"
    truncated = path.read_bytes()[:200]
    path.write_bytes(truncated)
    with pytest.raises(StoreError, match=r"a\.pt") as info:
        lab.load_checkpoint("a")
    assert "\n" not in str(info.value)
    assert path.read_bytes() == truncated


# --- code version -----------------------------------------------------------------------------
def test_code_version_format():
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*\+(g[0-9a-f]{4,40}(-dirty)?|unknown)", code_version())
    assert code_version() is code_version()  # cached


def test_describe_outside_git_is_unknown(tmp_path):
    assert describe(tmp_path, "1.2.3") == "1.2.3+unknown"


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_describe_in_git_checkout_clean_and_dirty(tmp_path):
    def git(*args):
        return subprocess.run(
            ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip

    git("init", "-q")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("x = 1\n")
    git("add", ".")
    git("commit", "-q", "-m", "init")
    sha = git("rev-parse", "--short", "HEAD")
    assert describe(tmp_path / "pkg", "1.2.3") == f"1.2.3+g{sha}"
    (tmp_path / "pkg" / "untracked.py").write_text("")
    assert describe(tmp_path / "pkg", "1.2.3") == f"1.2.3+g{sha}"
    (tmp_path / "pkg" / "m.py").write_text("x = 2\n")
    assert describe(tmp_path / "pkg", "1.2.3") == f"1.2.3+g{sha}-dirty"
