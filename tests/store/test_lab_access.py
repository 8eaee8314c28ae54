"""Who may read and write a lab, and what a user is told (DESIGN §3; issue 12):

- a read-only lab can be read by every reading command, and writing commands say it is
  read-only (not "corrupt registry");
- a full disk stops ``train`` and ``sweep`` with one line saying so, and once space is freed a
  re-run ends with exactly the runs of an uninterrupted one;
- ``train`` takes the lab's writer lock, as ``sweep`` does: a second writer is refused;
- names typed by users are printed as text, never as rich markup.

Commands run through the real entry point in this process (:func:`run_main`), except the lock
holder, which is a real ``rulelab train`` process. Each test would fail on the code before
issue 12 (noted per test).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pandas as pd
import pytest

from cli_inproc import NoCapture, run_main

TINY = ["--seq-len", "4", "--vocab", "8", "--n-train", "64", "--n-eval", "32", "--epochs", "6",
        "--eval-every", "2", "--layers", "1", "--heads", "1", "--d-model", "16", "--d-mlp", "32"]
RECIPE = ("experiment: t\ntask: mpsp\nbase: {seq_len: 4, vocab: 8, n_train: 64, n_eval: 32, "
          "epochs: 6, eval_every: 2, layers: 1, heads: 1, d_model: 16, d_mlp: 32}\n"
          "grid: {ratio: [0.5, 0.9]}\nseeds: 2\nexecution: {checkpoint_every: 2}\n")
GRID = [*TINY, "--ratio", "0.5", "0.9", "--seeds", "2", "--checkpoint-every", "2"]



@pytest.fixture(autouse=True)
def _cwd(tmp_path, monkeypatch):
    monkeypatch.delenv("RULELAB_HOME", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The reference: the grid trained by ``train`` and by ``sweep``, uninterrupted."""
    base = tmp_path_factory.mktemp("clean")
    (base / "r.yaml").write_text(RECIPE)
    mp = pytest.MonkeyPatch()
    mp.delenv("RULELAB_HOME", raising=False)
    try:
        for argv in (["train", "mpsp", *GRID, "--lab", base / "train"],
                     ["sweep", base / "r.yaml", "--lab", base / "sweep"]):
            assert run_main([*argv, "--quiet"], NoCapture(), mp).returncode == 0
    finally:
        mp.undo()
    return base


def digest(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): b"dir" if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*"))}


def results(lab: Path) -> tuple[pd.DataFrame, list]:
    """Every run's metric rows and (status, summary): what "nothing lost" compares."""
    import rulelab

    frames = rulelab.load(lab)
    metrics = frames.metrics.sort_values(["run_id", "epoch", "split", "metric"])
    with contextlib.closing(sqlite3.connect(lab / "registry.sqlite")) as conn:
        rows = conn.execute("SELECT run_id, status, summary_json FROM runs ORDER BY run_id")
        return metrics.reset_index(drop=True), rows.fetchall()


def one_error(res, *names: str, started: bool = False) -> str:
    """Exit 2 with one ``error:`` line naming ``names``: the only line, or (``started``: the
    command failed while training) the last one, after the header the command began with."""
    shown = f"rc {res.returncode}\nstderr {res.stderr!r}"
    assert res.returncode == 2, shown
    lines = res.stderr.splitlines()
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1 and lines[-1].startswith("error: "), shown
    assert len(lines) == 1 or started, shown
    assert "Traceback" not in res.stdout + res.stderr
    assert all(n in lines[-1] for n in names), shown
    return lines[-1]


# --- read-only labs -----------------------------------------------------------------------------
def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@contextlib.contextmanager
def read_only_view(lab: Path, view: Path) -> Iterator[Path]:
    """``lab`` seen read-only at ``view``: a read-only bind mount as root (chmod does not stop
    root), chmod a-w on a copy otherwise; skips where neither is possible."""
    if os.geteuid() != 0:
        shutil.copytree(lab, view)
        for p in [view, *view.rglob("*")]:
            p.chmod(p.stat().st_mode & ~0o222)
        try:
            yield view
        finally:
            for p in [view, *view.rglob("*")]:
                p.chmod(p.stat().st_mode | 0o200)
        return
    view.mkdir()
    if not (shutil.which("mount") and _mount("--bind", str(lab), str(view))):
        pytest.skip("no read-only bind mount here (needs mount privileges)")
    try:
        if not _mount("-o", "remount,bind,ro", str(view)):
            pytest.skip("cannot remount read-only here")
        yield view
    finally:
        subprocess.run(["umount", str(view)], capture_output=True)


def test_a_read_only_lab_can_be_read(clean, tmp_path, capsys, monkeypatch):
    """A real read-only lab (before: ``runs``, ``status``, ``report`` and ``sweep --dry-run``
    all refused it as a "corrupt lab registry")."""
    lab = tmp_path / "lab"
    shutil.copytree(clean / "train", lab)
    before = digest(lab)
    with read_only_view(lab, tmp_path / "ro") as ro:
        assert not os.access(ro, os.W_OK)
        for argv in (["runs", "--lab", ro], ["runs", "--json", "--lab", ro],
                     ["status", "--lab", ro], ["report", "--lab", ro, "--out", tmp_path / "r.html"],
                     ["sweep", clean / "r.yaml", "--dry-run", "--lab", ro]):
            res = run_main(argv, capsys, monkeypatch)
            assert res.returncode == 0 and res.stderr == "", (argv, res.stderr)
        res = run_main(["analyze", "fingerprints", "--lab", ro], capsys, monkeypatch)
        assert res.returncode == 0, res.stderr
        assert "read-only: the fingerprints table was not stored" in res.stderr  # printed anyway
        # the probe's null band, once per model shape the lab holds (issue 21)
        assert " ".join(res.stdout.split()).count("OV probe null band (") == 1
        line = one_error(run_main(["train", "mpsp", *GRID, "--lab", ro], capsys, monkeypatch),
                         "is read-only; reading commands work, to train use a writable --lab")
        assert "corrupt" not in line
        one_error(run_main(["sweep", clean / "r.yaml", "--lab", ro], capsys, monkeypatch),
                  "is read-only")
    assert digest(lab) == before


# --- a full disk ---------------------------------------------------------------------------------
def _enospc_after(n: int, monkeypatch) -> None:
    """Run files (metrics, checkpoints) fail with ENOSPC from the ``n``-th write on, wrapped the
    way torch and pyarrow wrap it."""
    from rulelab.store import atomic

    real, calls = atomic.atomic_write, [0]

    def write(path, fn):
        calls[0] += 1
        if calls[0] >= n:
            try:
                raise OSError(errno.ENOSPC, "No space left on device")
            except OSError:
                raise RuntimeError("file write failed") from None
        return real(path, fn)

    for module in ("metrics", "checkpoints"):
        monkeypatch.setattr(f"rulelab.store.{module}.atomic_write", write)


@pytest.mark.parametrize("command", ["train", "sweep"])
def test_a_full_disk_is_one_line_and_a_rerun_loses_nothing(command, clean, tmp_path, capsys,
                                                           monkeypatch):
    """Simulated: the write raises ENOSPC mid-training (before: an OSError / RuntimeError
    traceback from ``train`` and ``sweep``, or runs marked failed)."""
    lab = tmp_path / "lab"
    argv = (["train", "mpsp", *GRID, "--quiet", "--lab", lab] if command == "train" else
            ["sweep", clean / "r.yaml", "--quiet", "--lab", lab])
    with monkeypatch.context() as mp:
        _enospc_after(7, mp)
        one_error(run_main(argv, capsys, mp), "no space left on device writing",
                  "free space and re-run: finished runs are kept and unfinished ones resume",
                  started=True)
    res = run_main(argv, capsys, monkeypatch)  # space freed
    assert res.returncode == 0, res.stderr
    got, want = results(lab), results(clean / command)
    pd.testing.assert_frame_equal(got[0], want[0])
    assert got[1] == want[1]


@contextlib.contextmanager
def small_disk(where: Path, kib: int) -> Iterator[Path]:
    where.mkdir()
    if os.geteuid() != 0 or not _mount("-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(where)):
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True)


@pytest.mark.parametrize("command", ["train", "sweep"])
def test_a_really_full_disk(command, clean, tmp_path, capsys, monkeypatch):
    """A real 160 KiB filesystem (the finished grid needs more; reading commands still work
    on it), then 64 MiB."""
    with small_disk(tmp_path / "disk", 160) as disk:
        lab = disk / "lab"
        argv = (["train", "mpsp", *GRID, "--quiet", "--lab", lab] if command == "train" else
                ["sweep", clean / "r.yaml", "--quiet", "--lab", lab])
        line = one_error(run_main(argv, capsys, monkeypatch), started=True)
        assert "no space left on device" in line and "corrupt" not in line, line
        for read in (["runs", "--lab", lab], ["status", "--lab", lab]):  # still readable
            res = run_main(read, capsys, monkeypatch)
            assert res.returncode == 0 and "error" not in res.stderr, res.stderr
        assert _mount("-o", "remount,size=64m", str(disk))
        res = run_main(argv, capsys, monkeypatch)
        assert res.returncode == 0, res.stderr
        got, want = results(lab), results(clean / command)
        pd.testing.assert_frame_equal(got[0], want[0])
        assert got[1] == want[1]


# --- one writer per lab ------------------------------------------------------------------------
def test_a_second_train_on_a_busy_lab_is_refused(tmp_path, capsys, monkeypatch):
    """A real ``rulelab train`` holds the lab; a second one of the same configs is refused
    with one line naming the lock (before: both trained the same runs)."""
    lab = tmp_path / "lab"
    long = [a if a != "6" else "200000" for a in TINY]  # the holder trains for minutes
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("RULELAB_HOME", None)
    holder = subprocess.Popen([sys.executable, "-m", "rulelab.cli", "train", "mpsp", *long,
                               "--quiet", "--lab", str(lab)], env=env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        from rulelab.store.lock import lock_holder

        def registered() -> int:  # the holder takes the lock before it registers its run
            try:
                uri = f"{(lab / 'registry.sqlite').as_uri()}?mode=ro"  # never creates it
                with closing(sqlite3.connect(uri, uri=True)) as db:
                    return db.execute("SELECT count(*) FROM runs").fetchone()[0]
            except sqlite3.Error:  # not created yet
                return 0

        deadline = time.time() + 120
        while (lock_holder(lab) or {}).get("pid") != holder.pid or registered() < 1:
            assert holder.poll() is None and time.time() < deadline, holder.stderr.read()
            time.sleep(0.2)
        before = digest(lab / "metrics"), (registered(),)
        line = one_error(run_main(["train", "mpsp", *long, "--quiet", "--lab", lab], capsys,
                                  monkeypatch), "sweep.lock", f"pid {holder.pid}")
        assert "rulelab train" in line
        res = run_main(["status", "--lab", lab], capsys, monkeypatch)
        assert res.returncode == 0 and f"train running: pid {holder.pid}" in res.stdout
        assert before[1] == (1,)
        # … and, once its chunk trains, the epoch it is at (its progress file, sweep/live.py)
        chunk_line = re.compile(r"^  chunk 1: \S.* × 1 at epoch (\d+)/200000, generalized 0, "
                                r"failed 0$", re.M)
        while not chunk_line.search(res.stdout):
            assert holder.poll() is None and time.time() < deadline, res.stdout
            time.sleep(0.5)
            res = run_main(["status", "--lab", lab], capsys, monkeypatch)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        holder.stderr.close()


# --- user-typed names are text -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["[/bold]", "[link=https://example.com]click[/link]",
                                  "[red]x"])
def test_status_prints_experiment_names_as_text(name, tmp_path, capsys, monkeypatch):
    """A lab written before names were checked (before: ``[/bold]`` crashed ``status``,
    ``[link=…]`` became a hyperlink)."""
    from rulelab.config import stable_hash
    from rulelab.store import Lab

    lab = Lab(tmp_path / "lab", create=True)
    cfg = {"task": "mpsp", "seed": 0}
    lab.register([(stable_hash(cfg), cfg)], name)
    res = run_main(["status", "--lab", lab.root], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    assert name in res.stdout
    one_error(run_main(["train", "mpsp", *TINY, "--experiment", name, "--lab", tmp_path / "n"],
                       capsys, monkeypatch), "--experiment")
    assert not (tmp_path / "n").exists()
