"""The Ray executor on a real local Ray runtime (no mocks): same numbers as the local executor,
and a chunk whose worker process is SIGKILLed is retried from its runs' last checkpoints.

Skipped, with the reason, where Ray is not installed (``pip install 'rulelab[ray]'``).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'rulelab[ray]'")

from rulelab.store import Lab  # noqa: E402
from rulelab.sweep import LocalExecutor, RayExecutor, Settings, load_recipe, run_sweep  # noqa: E402

pytestmark = pytest.mark.slow  # a Ray runtime takes ~10 s to start here

RECIPE = """\
experiment: on-ray
task: mpsp
base: {layers: 1, heads: 1, d_model: 16, d_mlp: 16, seq_len: 5, vocab: 12, n_train: 96,
       n_eval: 32, eval_every: 5, epochs: 200}
grid:
  ratio: [0.6, 0.9]
  weight_decay: [0.1, 0.3]
seeds: 2
execution: {max_members: 4, checkpoint_every: 25}
"""
TASK_TITLE = b"ray::rulelab-chunk"  # Ray names a worker process after the task it runs


@pytest.fixture(scope="module")
def ray_runtime():
    try:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    except Exception as err:  # installed but cannot start here
        pytest.skip(f"a local Ray runtime cannot start: {str(err).splitlines()[0]}")
    yield ray
    ray.shutdown()


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def chunk_workers() -> list[int]:
    """Our own descendants (the Ray runtime this test started) now running a chunk task."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if not f.read().startswith(TASK_TITLE):
                    continue
            p = pid
            while p > 1 and p != me:
                p = _parent(p)
        except OSError:
            continue
        if p == me:
            found.append(pid)
    return found


def metrics(lab: Path) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in sorted((lab / "metrics").glob("*.parquet"))]
    df = pd.concat(frames).sort_values(["run_id", "epoch", "split", "metric"])
    return df.reset_index(drop=True)


def test_ray_sweep_with_a_killed_worker_equals_the_local_sweep(tmp_path, ray_runtime):
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE)
    recipe = load_recipe(path)
    local = Lab(tmp_path / "local", create=True)
    run_sweep(recipe, local, Settings.from_recipe(recipe), LocalExecutor())

    remote = Lab(tmp_path / "ray", create=True)
    killed: list[int] = []

    def kill_first_chunk() -> None:  # once chunk 1 has checkpointed, SIGKILL its worker
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if list((remote.root / "checkpoints").glob("*.pt")):
                for pid in chunk_workers():
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=kill_first_chunk, daemon=True)
    watcher.start()
    result = run_sweep(recipe, remote, Settings.from_recipe(recipe, threads=1),
                       RayExecutor(max_retries=3))
    watcher.join(5)
    assert len(killed) == 1, "no chunk worker was found to kill"
    assert result.lost == [] and result.done == 8 and result.failed == 0

    a, b = metrics(local.root), metrics(remote.root)
    assert len(a) == 8 * (200 // 5 + 1) * 10
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    ra = {r["run_id"]: (r["status"], r["summary"]) for r in local.runs_json()}
    rb = {r["run_id"]: (r["status"], r["summary"]) for r in remote.runs_json()}
    assert ra == rb
