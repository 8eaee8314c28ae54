"""A run killed with SIGKILL and resumed ends with the metrics (and tracked analyses) of an
uninterrupted run; on the toy study (tests/toy_study)."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd

from labs import toy_cli, toy_env

ARGS = ["train", "toy", "--width", "32", "--n-train", "512", "--n-eval", "64",
        "--noise", "0.1", "0.2", "--seeds", "2", "--epochs", "400", "--eval-every", "5",
        "--checkpoint-every", "20", "--track", "weights", "--track-every", "log", "--quiet",
        "--workers", "1"]  # one ensemble of 4, killed mid-training (side by side: test_sweep)


def _cli(lab: Path) -> list[str]:
    return toy_cli(*ARGS, "--lab", lab)


def _env() -> dict:
    return toy_env()


def _metrics(lab: Path) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in sorted((lab / "metrics").glob("*.parquet"))]
    df = pd.concat(frames).sort_values(["run_id", "epoch", "split", "metric"])
    return df.reset_index(drop=True)


def test_sigkill_then_resume_equals_uninterrupted(tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    subprocess.run(_cli(whole), check=True, env=_env(), capture_output=True)

    proc = subprocess.Popen(_cli(killed), env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    ckpts = killed / "checkpoints"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(ckpts.glob("*.pt"))) < 4:
        time.sleep(0.05)  # wait until every run has a checkpoint, then kill mid-training
    time.sleep(0.3)
    assert proc.poll() is None, "training finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = _metrics(killed)
    assert partial["epoch"].max() < 400  # it really was interrupted

    subprocess.run(_cli(killed), check=True, env=_env(), capture_output=True)
    a, b = _metrics(whole), _metrics(killed)
    assert len(a) == len(b) == 4 * (400 // 5 + 1) * 4  # loss and acc on train and eval
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    # analyses tracked during training survive the kill the same way
    ga, gb = (_table(lab, "weights") for lab in (whole, killed))
    assert len(ga) == len(gb) > 0 and ga["epoch"].nunique() > 5
    pd.testing.assert_frame_equal(ga, gb, check_exact=True)


def _table(lab: Path, name: str) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in sorted((lab / "analyses" / name).glob("*.parquet"))]
    df = pd.concat(frames).sort_values(["run_id", "epoch", "module"])
    return df.reset_index(drop=True)
