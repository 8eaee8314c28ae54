"""``rulelab sweep`` end to end: kill/resume exactness, failing members, dry run, status, bf16.

The kill test runs the real CLI as processes and SIGKILLs the driver at three points (mid
first chunk, just after it, mid second chunk), re-running it each time, and compares every
stored metric and summary with an uninterrupted sweep. On the toy study (tests/toy_study).
"""

from __future__ import annotations

import io
import math
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from rich.console import Console

from labs import (
    TOY_TINY,
    metrics,
    n_checkpoints,
    registry,
    statuses,
    sweep,
    toy_cli,
    toy_env,
    write,
)
from rulelab.store import Lab
from rulelab.sweep import LocalExecutor, load_recipe, run_sweep
from rulelab.sweep.progress import RichSweepProgress, SweepProgress
from rulelab.sweep.status import lab_status

KILL = f"""\
experiment: killed
task: toy
base: {{{TOY_TINY}, epochs: 200}}
grid:
  noise: [0.1, 0.2]
  weight_decay: [0.1, 0.3]
seeds: 2
execution: {{max_members: 4, checkpoint_every: 25}}
"""
# a cell of broken members (their data cannot be built: ValueError) in front of healthy ones
FAULTY = """\
experiment: faulty
task: toy
base: {d: 4, width: 16, n_train: 64, n_eval: 16, epochs: 40, eval_every: 5}
grid: CELLS
seeds: 2
execution: {max_members: 6}
"""
HEALTHY = "[{noise: [0.1, 0.2]}]"
BROKEN = "[{noise: [0.0], broken: [true]}, {noise: [0.1, 0.2]}]"
pytestmark = pytest.mark.usefixtures("toy")  # the in-process sweeps look the task up


@pytest.mark.parametrize("workers", [1, 2])
def test_sweep_killed_at_several_points_then_resumed_equals_uninterrupted(tmp_path, workers):
    """One after another: killed mid chunk 1, after it, mid chunk 2. Side by side (the
    default on a CPU with two cores): killed while both chunks train."""
    recipe = write(tmp_path, "kill", KILL)
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    sweep(recipe, whole)

    points = [
        ("mid chunk 1", lambda: n_checkpoints(killed) >= 1),
        ("after chunk 1", lambda: statuses(killed).count("done") >= 4),
        ("mid chunk 2", lambda: n_checkpoints(killed) >= 8),
    ][: 3 if workers == 1 else 1]
    cmd = toy_cli("sweep", recipe, "--lab", killed, "--quiet", "--workers", workers)
    for name, reached in points:
        log = tmp_path / f"{name}.log"
        with open(log, "w") as err:
            proc = subprocess.Popen(cmd, env=toy_env(), stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not reached() and proc.poll() is None:
            time.sleep(0.02)
        assert proc.poll() is None, (f"the sweep ended (rc {proc.returncode}) before it could "
                                     f"be killed {name}: {log.read_text()[-2000:]}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if name == "mid chunk 1":  # status tells an interrupted sweep from a running one
            status = lab_status(Lab(killed))
            (exp,) = status["experiments"]
            assert status["active_sweep"] is None and exp["done"] == 0
            assert exp["running"] == 4 * workers  # a chunk of 4, or two side by side
    assert len(statuses(killed)) == 8 and statuses(killed).count("done") < 8
    subprocess.run(cmd, env=toy_env(), check=True, capture_output=True)

    a, b = metrics(whole), metrics(killed)
    assert len(a) == len(b) == 8 * (200 // 5 + 1) * 4  # loss and acc on train and eval
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    ra, rb = registry(whole), registry(killed)
    assert ra == rb and {s for s, _, _ in ra.values()} == {"done"}


def test_runs_a_killed_sweep_left_running_are_pending_until_their_chunk_starts(tmp_path):
    """Before, a resumed sweep's status counted every run a killed sweep had left 'running'
    as running, beside those that really ran."""
    recipe = load_recipe(write(tmp_path, "healthy", FAULTY.replace("CELLS", HEALTHY)))
    lab = Lab(tmp_path / "lab", create=True)
    ids = [c.run_id for c in recipe.configs()]
    lab.register([(c.run_id, c.flat()) for c in recipe.configs()], recipe.experiment)
    lab.mark_running(ids, "cpu")  # as a sweep killed mid-chunk leaves them
    seen = []

    class Watch(SweepProgress):
        def chunk_started(self, spec) -> None:
            seen.append(sorted(lab.statuses(ids).values()))

    settings = recipe.execution.merged(max_members=2)
    result = run_sweep(recipe, lab, settings, LocalExecutor(), Watch())
    assert result.done == 4
    assert seen == [["pending", "pending", "running", "running"],
                    ["done", "done", "running", "running"]]


def test_a_failing_member_is_recorded_and_its_chunk_and_sweep_go_on(tmp_path):
    faulty = write(tmp_path, "faulty", FAULTY.replace("CELLS", BROKEN))
    healthy = write(tmp_path, "healthy", FAULTY.replace("CELLS", HEALTHY))
    shown = io.StringIO()
    lab = sweep(faulty, tmp_path / "faulty-lab",
                progress=RichSweepProgress(Console(file=shown, width=200)))
    assert "runs 6/6 gen " in shown.getvalue() and "failed 2" in shown.getvalue()
    runs = registry(lab.root)
    failed = {rid: err for rid, (status, _, err) in runs.items() if status == "failed"}
    assert len(runs) == 6 and len(failed) == 2
    assert all(err.startswith("ValueError: toy data: cannot build the data of a member")
               for err in failed.values())
    # the 4 healthy members end exactly as in a sweep without the failing cell
    ref = sweep(healthy, tmp_path / "healthy-lab")
    a, b = metrics(ref.root), metrics(lab.root)
    pd.testing.assert_frame_equal(a, b[b.run_id.isin(a.run_id)].reset_index(drop=True),
                                  check_exact=True)
    # failed runs are finished: a re-run trains nothing; status lists the reason
    recipe = load_recipe(faulty)
    result = run_sweep(recipe, lab, recipe.execution, LocalExecutor())
    assert result.plan.n_todo == 0
    (exp,) = lab_status(lab)["experiments"]
    assert exp["failed"] == 2 and exp["done"] == 4
    assert list(exp["failed_reasons"].values()) == [2]


def _main(monkeypatch, *args) -> int:
    from rulelab import cli

    monkeypatch.setattr(sys, "argv", ["rulelab", *map(str, args)])
    try:
        cli.main()
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def test_dry_run_writes_nothing_and_status_reports(tmp_path, monkeypatch, capsys):
    recipe = write(tmp_path, "kill", KILL)
    lab = tmp_path / "lab"
    assert _main(monkeypatch, "sweep", recipe, "--lab", lab, "--dry-run") == 0
    out = capsys.readouterr().out
    assert not lab.exists()
    assert "runs        8 in 4 cells" in out and "2 chunks of 4 members" in out
    assert "estimate on this CPU" in out and "on a GPU" in out

    bad = write(tmp_path, "bad", KILL.replace("weight_decay: [0.1, 0.3]", "wieght_decay: [0.1]"))
    assert _main(monkeypatch, "sweep", bad, "--lab", lab) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: {bad}:6: grid.wieght_decay: unknown config key 'wieght_decay' "
                   "(did you mean 'weight_decay'?)")
    assert _main(monkeypatch, "sweep", recipe, "--lab", lab, "--executor", "spark") == 2
    assert "--executor: 'spark' is not allowed" in capsys.readouterr().err
    assert not lab.exists()

    small = write(tmp_path, "small", KILL.replace("epochs: 200", "epochs: 10"))
    assert _main(monkeypatch, "sweep", small, "--lab", lab, "--quiet") == 0
    capsys.readouterr()
    assert _main(monkeypatch, "status", "--lab", lab) == 0
    out = capsys.readouterr().out
    assert "killed" in out and "8" in out and "sweep running" not in out


def test_bf16_autocast_trains_and_is_recorded(tmp_path):
    recipe = write(tmp_path, "bf", KILL.replace("epochs: 200", "epochs: 20").replace(
        "seeds: 2", "seeds: 1"))
    fp32 = sweep(recipe, tmp_path / "fp32")
    bf16 = sweep(recipe, tmp_path / "bf16", precision="bf16")
    assert {r["device"] for r in bf16.runs().to_dict("records")} == {"cpu (bf16)"}
    a, b = metrics(fp32.root), metrics(bf16.root)
    assert all(math.isfinite(v) for v in b.value[b.metric == "loss"])
    at0 = a.epoch == 0  # same initial weights, float32 evaluation
    pd.testing.assert_frame_equal(a[at0], b[at0], check_exact=True)
    assert not a[a.epoch == 20].value.equals(b[b.epoch == 20].value)


def test_a_cuda_plan_needs_no_gpu_for_a_dry_run(tmp_path, monkeypatch, capsys):
    recipe = write(tmp_path, "kill", KILL)
    assert _main(monkeypatch, "sweep", recipe, "--lab", tmp_path / "x", "--dry-run",
                 "--device", "cuda", "--max-members", "512", "--precision", "bf16") == 0
    out = capsys.readouterr().out
    assert "1 shape → 1 chunk of 8 members" in out
    assert "bf16 + 20 ms a pass (the default: the slowest" in out  # the toy declares none
    assert not (tmp_path / "x").exists()
    # tf32, refused on this CPU, plans for the GPU workers (at its rate measured on the H200)
    assert _main(monkeypatch, "sweep", recipe, "--lab", tmp_path / "x", "--dry-run",
                 "--device", "cuda", "--max-members", "512", "--precision", "tf32") == 0
    assert "10.0 TFLOP/s tf32 + 20 ms a pass" in capsys.readouterr().out
    assert not (tmp_path / "x").exists()
