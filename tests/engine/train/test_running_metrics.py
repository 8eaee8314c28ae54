"""Metrics of a running chunk are readable while it trains (issue 23 item 4).

Before, a run's metrics file was written only at checkpoints (every 500 epochs or 5 min by
default) and at the chunk's end, so ``rulelab.load`` showed nothing of a short running chunk.
Now the chunk flushes every member's rows after an evaluation (at most every few seconds,
:mod:`rulelab.engine.live_metrics`). Checked three ways: in this process, reading the lab from
inside the chunk's own progress callback (each evaluation visible at once when the throttle is
off; nothing visible with the flush off: the control); with a real ``rulelab train`` process
killed mid-chunk (its metrics up to the last flush stay readable, ``show`` says it is
interrupted, and the resumed lab ends with exactly the uninterrupted metrics and checkpoints);
and the throttle's own timing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

import rulelab
from cli_inproc import run_main
from labs import (
    TOY_TINY,
    assert_same_checkpoints,
    metrics,
    statuses,
    sweep,
    toy_cli,
    toy_env,
    write,
)
from rulelab.engine import live_metrics
from rulelab.engine.runner import EpochProgress
from rulelab.sweep.progress import SweepProgress

EPOCHS = 40
RECIPE = f"""experiment: live
task: toy
base: {{{TOY_TINY}, epochs: {EPOCHS}}}
grid: {{noise: [0.1, 0.2]}}
seeds: 1
execution: {{checkpoint_every: 100000}}
"""
pytestmark = pytest.mark.usefixtures("toy")  # on the toy study (tests/toy_study)


class Reader(SweepProgress):
    """At every evaluation the chunk reports, load the lab as a notebook would."""

    def __init__(self, lab: Path) -> None:
        self.lab, self.seen = lab, []

    def epoch_callbacks(self, spec):
        reader = self

        class Callbacks(EpochProgress):
            def update(self, epoch, n_generalized, n_failed) -> None:
                loaded = rulelab.load(reader.lab)
                last = loaded.metrics.groupby("run_id")["epoch"].max().to_dict()
                reader.seen.append((epoch, dict(loaded.runs["status"]), last,
                                    loaded.running.to_dict(), repr(loaded)))

        return Callbacks()


def test_each_evaluation_is_readable_while_the_chunk_trains(tmp_path, monkeypatch):
    monkeypatch.setattr(live_metrics, "FLUSH_SECONDS", 0.0)
    monkeypatch.setattr(live_metrics, "BUDGET", 0.0)
    reader = Reader(tmp_path / "lab")
    sweep(write(tmp_path, "r", RECIPE), tmp_path / "lab", progress=reader)
    evaluated = [e for e, *_ in reader.seen]
    assert evaluated == list(range(0, EPOCHS + 1, 5))  # eval_every 5, one chunk of 2 runs
    for epoch, status, last, running, text in reader.seen:
        assert set(status.values()) == {"running"} and len(status) == 2
        assert last == dict.fromkeys(status, epoch)  # every run, up to this very evaluation
        assert running == dict.fromkeys(status, epoch)
        assert f"2 running, metrics to epoch {epoch}" in text
    done = rulelab.load(tmp_path / "lab")
    assert set(done.runs["status"]) == {"done"} and done.running.empty


def test_without_the_flush_a_running_chunk_shows_nothing(tmp_path, monkeypatch):
    """The control: the same reading with the flush off sees no metrics until the end — and
    the finished lab's metrics are the flushing lab's, row for row (no number changed)."""
    monkeypatch.setattr(live_metrics.MetricFlush, "maybe", lambda self, write: False)  # old
    reader = Reader(tmp_path / "off")
    sweep(write(tmp_path, "r", RECIPE), tmp_path / "off", progress=reader)
    assert len(reader.seen) == EPOCHS // 5 + 1 and all(last == {} for _, _, last, *_ in
                                                        reader.seen)
    monkeypatch.undo()
    monkeypatch.setattr(live_metrics, "FLUSH_SECONDS", 0.0)
    monkeypatch.setattr(live_metrics, "BUDGET", 0.0)
    sweep(write(tmp_path, "r", RECIPE), tmp_path / "on")
    pd.testing.assert_frame_equal(metrics(tmp_path / "off"), metrics(tmp_path / "on"))
    assert len(metrics(tmp_path / "on")) > 0


TRAIN = ["train", "toy", "--width", "16", "--n-train", "96", "--n-eval", "32",
         "--eval-every", "5", "--epochs", "1000", "--checkpoint-every", "50", "--seeds", "1",
         "--quiet"]
FLUSHING = ("import sys, toy_study.registered; from rulelab.engine import live_metrics as m; "
            "m.FLUSH_SECONDS = 0.0; "
            "m.BUDGET = 0.0; from rulelab.cli import main; sys.argv = ['rulelab', *sys.argv[1:]];"
            " main()")


def flushed_epoch(lab: Path) -> int:
    paths = list((lab / "metrics").glob("*.parquet"))
    try:
        return max(int(pd.read_parquet(p)["epoch"].max()) for p in paths) if paths else -1
    except (OSError, ValueError):  # replaced while read
        return -1


@pytest.mark.slow
def test_a_killed_train_keeps_its_flushed_metrics_and_resumes_exactly(tmp_path, capsys,
                                                                       monkeypatch):
    lab, whole = tmp_path / "lab", tmp_path / "whole"
    proc = subprocess.Popen([sys.executable, "-c", FLUSHING, *TRAIN, "--lab", str(lab)],
                            env=toy_env(), start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    try:  # past a few checkpoints (every 50 epochs), long before the end (1000)
        while flushed_epoch(lab) < 120 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
        loaded = rulelab.load(lab)  # read while the process trains
        assert set(loaded.runs["status"]) == {"running"}
        assert 120 <= loaded.metrics["epoch"].max() < 1000
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    after = rulelab.load(lab)
    last, (rid,) = int(after.metrics["epoch"].max()), after.runs.index
    checkpoint = torch.load(lab / "checkpoints" / f"{rid}.pt", weights_only=True)["epoch"]
    assert last >= loaded.metrics["epoch"].max() and last >= checkpoint >= 50
    assert statuses(lab) == ["running"]
    assert set(after.metrics["epoch"]) == set(range(0, last + 1, 5))  # no gap, no partial file
    res = run_main(["show", rid[:6], "--lab", lab], capsys, monkeypatch)
    assert res.returncode == 0, res.stderr
    assert (f"running (interrupted: no sweep holds the lab; re-run its sweep to resume it); "
            f"metrics through epoch {last} of 1000") in res.stdout
    assert "checkpoint (resumes from it)" in res.stdout
    for target in (lab, whole):  # resume the killed lab; train another without a kill
        done = subprocess.run(toy_cli(*TRAIN, "--lab", target), env=toy_env(),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
    pd.testing.assert_frame_equal(metrics(lab), metrics(whole))
    assert_same_checkpoints(lab, whole)
    assert statuses(lab) == ["done"]


def test_the_flush_waits_its_interval_and_its_cost_budget(monkeypatch):
    now = [100.0]
    flush = live_metrics.MetricFlush(clock=lambda: now[0])
    calls = []

    def write() -> None:
        calls.append(now[0])
        now[0] += 0.25  # a flush that takes 0.25 s: the next one waits 50 × 0.25 = 12.5 s

    now[0] = 104.9  # the first flush waits FLUSH_SECONDS from the chunk's start too
    assert not flush.maybe(write)
    now[0] = 100.0 + live_metrics.FLUSH_SECONDS
    assert flush.maybe(write) and calls == [105.0]
    now[0] = 105.25 + 12.4
    assert not flush.maybe(write)
    now[0] = 105.25 + 12.5
    assert flush.maybe(write) and len(calls) == 2
    flush.written()  # a checkpoint wrote them: the interval restarts from now
    now[0] += 9.9
    assert not flush.maybe(write)
    monkeypatch.setattr(live_metrics, "BUDGET", 0.0)  # only FLUSH_SECONDS (5 s) then
    now[0] += 0.1
    assert flush.due() and len(calls) == 2
