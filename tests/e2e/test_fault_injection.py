"""Fault injection: a sweep SIGKILLed at 12 random moments, re-run after each kill, ends
identical to an uninterrupted sweep (DESIGN §3: "a killed sweep resumes where it stopped and
finishes with the numbers an uninterrupted sweep gives") — every summary, every metric row,
every final checkpoint (weights, optimizer and RNG state) — with no temp file left behind and
no run left ``running``.

A seeded RNG draws each kill's moment as a fraction of a window: a sweep's set-up time plus a
share of the work left (measured from the lab's checkpoints) that shrinks with the kills left,
so every kill lands while the sweep still runs, and the kills land at every stage: opening the
lab, registering, planning, building a chunk, training, writing checkpoints and metrics,
recording finished runs. The kill takes the whole
process group. The sweeps killed are real ``rulelab sweep`` processes, forked from a process
that has already imported torch (:mod:`forked_cli`), so a kill lands in the sweep and not in
the import; the final run is a fresh process.

One kill (drawn among the later ones) waits for a write: it freezes the process group as soon
as a temp file appears and kills it if the file is still there, so at least one kill always
lands inside an atomic write. On the old code, which never removed temp files, the final
temp-file check fails (it did, with 2 left); the identity checks guard resume exactness.
"""

from __future__ import annotations

import contextlib
import random
import subprocess
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import torch

from forked_cli import TOY_MODULES, ForkedCLI
from labs import (
    TOY_TINY,
    assert_same_checkpoints,
    metrics,
    registry,
    statuses,
    sweep,
    temp_files,
    toy_cli,
    toy_env,
    write,
)

pytestmark = pytest.mark.slow  # 25 s here idle, 45 s with the other core busy

N_RUNS, EPOCHS, KILLS, SEED = 8, 60, 12, 20240612
RECIPE = f"""\
experiment: faults
task: toy
base: {{{TOY_TINY}, epochs: {EPOCHS}}}
grid:
  noise: [0.1, 0.2]
  weight_decay: [0.1, 0.3]
seeds: 2
execution: {{max_members: 2, checkpoint_every: 3}}
"""


def progress(lab: Path) -> float:
    """The fraction of all epochs the lab's runs could resume from (0 … 1)."""
    done = 0
    for path in (lab / "checkpoints").glob("*.pt"):
        with contextlib.suppress(OSError, RuntimeError, KeyError):  # replaced while read
            done += int(torch.load(path, weights_only=True, mmap=True)["epoch"])
    return done / (N_RUNS * EPOCHS)


def kill_inside_a_write(rulelab: ForkedCLI, lab: Path, stale: list[Path]) -> int:
    """Kill the sweep inside an atomic write: freeze its process group as soon as a new temp
    file appears; if the file is still there, the writer is frozen mid-write: kill it; else
    (the write had just ended) let it go on to its next write."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if set(temp_files(lab)) - set(stale):
            rulelab.pause()
            if set(temp_files(lab)) - set(stale):
                return rulelab.kill()
            rulelab.resume()
        time.sleep(0.0005)
    raise AssertionError("the sweep wrote no file for 120 s")


def test_sweep_killed_at_random_moments_ends_identical_to_an_uninterrupted_one(tmp_path, toy):
    recipe = write(tmp_path, "faults", RECIPE)
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    t0 = time.monotonic()
    sweep(recipe, whole)
    work = time.monotonic() - t0  # the whole sweep's duration, to size the kill windows

    rng = random.Random(SEED)
    in_write = rng.randrange(KILLS // 2, KILLS)  # this kill waits for a write to hit
    argv = ["sweep", recipe, "--lab", killed, "--quiet"]
    log = tmp_path / "killed.log"
    points = []
    with ForkedCLI(toy_env(), TOY_MODULES) as rulelab:
        t0 = time.monotonic()  # a sweep's set-up: the same sweep on the finished lab
        rulelab.start(["sweep", recipe, "--lab", whole, "--quiet"], log)
        assert rulelab.wait() == 0
        setup = time.monotonic() - t0
        for i in range(KILLS):
            window = setup + 1.5 * work * (1 - progress(killed)) / (KILLS - i + 1)
            delay = rng.random() * window
            stale = temp_files(killed)
            t0 = time.monotonic()
            rulelab.start(argv, log)
            if i == in_write:
                rc = kill_inside_a_write(rulelab, killed, stale)
                delay = time.monotonic() - t0
            else:
                time.sleep(delay)
                rc = rulelab.kill()
            assert rc == -9, (f"kill {i + 1} came after the sweep ended (rc {rc}, {delay:.2f} "
                              f"s; work {work:.2f} s, set-up {setup:.2f} s; before: {points})")
            points.append((round(delay, 3), round(progress(killed), 3),
                           dict(Counter(statuses(killed))), len(temp_files(killed))))
    print(f"uninterrupted: {work:.1f} s, set-up {setup:.2f} s; kills (delay s, progress, "
          "statuses, temp files):",
          *points, sep="\n  ")
    assert len(points) == KILLS >= 10
    assert points[in_write][-1] >= 1  # a kill inside a write left its temp file
    assert 0 < progress(killed) < 1 and statuses(killed).count("done") < N_RUNS
    assert len({p for _, p, _, _ in points}) >= KILLS // 3  # at several stages of training

    subprocess.run(toy_cli(*argv), env=toy_env(), check=True, capture_output=True, timeout=300)

    assert temp_files(killed) == []
    ra, rb = registry(whole), registry(killed)
    assert ra == rb and {s for s, _, _ in rb.values()} == {"done"} and len(rb) == N_RUNS
    a, b = metrics(whole), metrics(killed)
    assert a.groupby("run_id").epoch.nunique().tolist() == [EPOCHS // 5 + 1] * N_RUNS
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert_same_checkpoints(whole, killed)
