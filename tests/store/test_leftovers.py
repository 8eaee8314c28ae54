"""Temp files left by killed writers are removed by the next writing command, never by a
reading one, and never while a live writer still holds them (DESIGN §3, atomic writes).

On the old code nothing removed them: a killed run's ``checkpoints/.<id>.pt.*.tmp`` stayed
forever, so the sweep/train cases below fail there. Runs train the toy study (tests/toy_study).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cli_inproc import run_main
from labs import temp_files
from rulelab.store import Lab
from rulelab.store.atomic import remove_stale_temp_files

# A writer that stops in the middle of atomic_write (temp file created, locked, half written)
# until it reads a line on stdin; killed there, it leaves its temp file as a crash would.
WRITER = """\
import sys
from pathlib import Path
from rulelab.store.atomic import atomic_write

def write(f):
    f.write(b"first half")
    print("writing", flush=True)
    sys.stdin.readline()
    f.write(b", second half")

atomic_write(Path(sys.argv[1]), write)
"""
TINY = ["--width", "16", "--n-train", "64", "--n-eval", "32", "--epochs", "4", "--eval-every", "2"]
RECIPE = """\
experiment: leftovers
task: toy
base: {width: 16, n_train: 64, n_eval: 32, epochs: 4, eval_every: 2}
seeds: 2
"""


class Writer:
    """A real process that stops inside :func:`atomic_write` of ``target``."""

    def __init__(self, target: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def stopped(self) -> Writer:
        """Wait until it has stopped mid-write."""
        assert self.proc.stdout.readline() == b"writing\n"
        return self

    def kill(self) -> None:
        self.stopped()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def finish(self) -> None:
        self.proc.communicate(b"go\n", timeout=30)
        assert self.proc.returncode == 0


def leave_temp_files(lab: Path) -> list[Path]:
    """Temp files as killed writers leave them: real killed processes (locked files whose lock
    died with them) and a bare file as the old, lock-free writer left it."""
    targets = [lab / "checkpoints" / "r1.pt", lab / "metrics" / "r1.parquet",
               lab / "analyses" / "gradients" / "k.parquet", lab / "snapshots" / "r1" / "5.pt"]
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
    for writer in [Writer(target) for target in targets]:  # started at once: faster
        writer.kill()
    (lab / "checkpoints" / ".r2.pt.abcd_123.tmp").write_bytes(b"old writer's leftover")
    stray = temp_files(lab)
    assert len(stray) == 5 and not any(t.exists() for t in targets)
    return stray


def test_cleanup_removes_dead_writers_temp_files_and_keeps_live_ones(tmp_path):
    lab = tmp_path / "lab"
    dead = leave_temp_files(lab)
    live = Writer(lab / "checkpoints" / "live.pt").stopped()
    (live_tmp,) = set(temp_files(lab)) - set(dead)
    others = [lab / "notes.tmp", lab / "checkpoints" / ".hidden"]  # not ours: kept
    for p in others:
        p.write_text("x")

    assert sorted(remove_stale_temp_files(lab)) == dead
    assert temp_files(lab) == [live_tmp] and all(p.exists() for p in others)
    live.finish()  # the live writer completes as if nothing happened
    assert (lab / "checkpoints" / "live.pt").read_bytes() == b"first half, second half"
    assert temp_files(lab) == []


def _train(lab: Path) -> list[str]:
    return ["train", "toy", *TINY, "--seeds", "2", "--lab", lab, "--quiet"]


def _sweep(lab: Path) -> list[str]:
    return ["sweep", lab.parent / "recipe.yaml", "--lab", lab, "--quiet"]


@pytest.mark.parametrize("writer", [_sweep, _train], ids=["sweep", "train"])
def test_reading_commands_keep_temp_files_and_the_next_writer_removes_them(
        writer, tmp_path, capsys, monkeypatch, toy):
    (tmp_path / "recipe.yaml").write_text(RECIPE)
    lab = tmp_path / "lab"
    assert run_main(writer(lab), capsys, monkeypatch).returncode == 0
    stray = leave_temp_files(lab)

    # reading commands may run while a sweep writes: they never remove anything
    for argv in (["runs", "--lab", lab], ["runs", "--json", "--lab", lab],
                 ["status", "--lab", lab], [*_sweep(lab), "--dry-run"]):
        result = run_main(argv, capsys, monkeypatch)
        assert result.returncode == 0, (argv, result.stderr)
        assert temp_files(lab) == stray, argv
    Lab(lab)  # nor does opening the lab

    before = {r["run_id"]: r for r in Lab(lab).runs_json()}
    assert run_main(writer(lab), capsys, monkeypatch).returncode == 0
    assert temp_files(lab) == []  # fails on the old code: the files stayed
    assert {r["run_id"]: r for r in Lab(lab).runs_json()} == before  # nothing else changed
