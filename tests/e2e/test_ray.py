"""The Ray executor on real Ray (no mocks; DESIGN §4: "Tests start a real local Ray runtime"):

- on a local runtime, a chunk whose worker process is SIGKILLed is retried from its runs' last
  checkpoints, and the sweep ends with the local executor's numbers;
- on a two-node cluster on this machine (a head and a second node, each its own raylet with one
  CPU, both bound to 127.0.0.1), ``rulelab sweep --executor ray --address <head>`` runs its
  chunks on both nodes — checked from the raylet each chunk's worker process is a child of —
  with one worker killed mid-chunk, and ends identical to the local executor: every summary,
  metric row and final checkpoint. The cluster is torn down in any case, and the test checks
  that none of its processes (services, raylets, workers) outlives it;
- an ``--address`` where no cluster answers is one ``error:`` line within seconds.

Ray is in the ``test`` extra, so CI runs these; elsewhere they are skipped where Ray is not
installed (``pip install 'rulelab[ray]'``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

# Every Ray process these tests start (drivers, nodes, workers: they inherit the environment)
# listens and connects on 127.0.0.1: Ray otherwise uses this machine's network address, also
# where a loopback address is given. Read when ray is imported, so set before.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'rulelab[ray]'")

from cli_inproc import run_main  # noqa: E402
from labs import (  # noqa: E402
    TINY,
    assert_same_checkpoints,
    cli,
    env,
    metrics,
    n_checkpoints,
    registry,
    sweep,
    write,
)
from procs import chunk_workers, descendants, mentioning, wait_gone  # noqa: E402
from rulelab.store import Lab  # noqa: E402
from rulelab.sweep import RayExecutor, load_recipe, run_sweep  # noqa: E402
from rulelab.sweep.executors import RayUnavailable  # noqa: E402
from rulelab.sweep.progress import SweepCounts  # noqa: E402

EPOCHS = 100
RECIPE = f"""\
experiment: on-ray
task: mpsp
base: {{{TINY}, epochs: {EPOCHS}}}
grid:
  ratio: [0.6, 0.9]
  weight_decay: [0.1, 0.3]
seeds: 2
execution: {{max_members: 4, checkpoint_every: 25}}
"""


@pytest.fixture
def local_runtime():
    """The executor's own local runtime (``--executor ray`` without ``--address``), one CPU."""
    executor = RayExecutor(num_cpus=1, max_retries=3)
    try:
        executor.start()
    except RayUnavailable as err:  # installed but cannot start here
        pytest.skip(str(err))
    yield executor
    executor.close()


def assert_same_labs(a: Path, b: Path) -> None:
    """Every metric row, registry entry and final checkpoint equal."""
    ma, mb = metrics(a), metrics(b)
    assert ma.groupby("run_id").epoch.nunique().tolist() == [EPOCHS // 5 + 1] * 8
    pd.testing.assert_frame_equal(ma, mb, check_exact=True)
    ra, rb = registry(a), registry(b)
    assert ra == rb and {s for s, _, _ in rb.values()} == {"done"}
    assert_same_checkpoints(a, b)


class EpochLog(SweepCounts):
    """The sweep's progress counts, and every chunk evaluation the driver was told of."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, str]] = []

    def epoch(self, spec, member_epochs, n_generalized, n_failed, at_epoch="") -> None:
        super().epoch(spec, member_epochs, n_generalized, n_failed, at_epoch)
        self.seen.append((spec.index, at_epoch))


@pytest.mark.slow  # 20 s here idle (a Ray runtime takes 5-10 s to start)
def test_ray_sweep_with_a_killed_worker_equals_the_local_sweep(tmp_path, local_runtime):
    """… and the driver hears each remote chunk's evaluations through its progress file
    (rulelab.sweep.live), up to the last epoch, as it would from a local chunk."""
    recipe_path = write(tmp_path, "recipe", RECIPE)
    local = sweep(recipe_path, tmp_path / "local").root

    recipe = load_recipe(recipe_path)
    remote = Lab(tmp_path / "ray", create=True)
    killed: list[int] = []

    def kill_first_chunk() -> None:  # once a chunk has checkpointed, SIGKILL its worker
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            # keep looking until a worker runs a chunk: under load the checkpoint can appear
            # while the worker's title still says it is idle (this once found none)
            workers = chunk_workers() if n_checkpoints(remote.root) else {}
            if workers:
                for pid in workers:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=kill_first_chunk, daemon=True)
    watcher.start()
    progress = EpochLog()
    result = run_sweep(recipe, remote, recipe.execution.merged(threads=1), local_runtime,
                       progress)
    watcher.join(5)
    assert len(killed) == 1, "no chunk worker was found to kill"
    assert result.lost == [] and result.done == 8 and result.failed == 0
    assert_same_labs(local, remote.root)
    assert {(i, f"epoch {EPOCHS}/{EPOCHS}") for i in (0, 1)} <= set(progress.seen)
    assert progress.completed == progress.total == 8 * EPOCHS and progress.done == 8
    assert not (remote.root / "progress").exists()


def test_an_address_nobody_answers_at_is_one_line_in_seconds(tmp_path, capsys, monkeypatch):
    """On the old code ``ray.init`` retried for minutes (still at it after 150 s)."""
    with socket.socket() as s:  # a port just freed: nothing listens there
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    recipe, lab = write(tmp_path, "recipe", RECIPE), tmp_path / "lab"
    t0 = time.monotonic()
    result = run_main(["sweep", recipe, "--lab", lab, "--executor", "ray", "--address", address],
                      capsys, monkeypatch)
    assert time.monotonic() - t0 < 20
    assert result.returncode == 2 and result.stderr == (
        f"error: --address: no Ray cluster answers at {address}: Connection refused; start one "
        "with `ray start --head` or pass its address\n")
    assert not lab.exists()


# --- a two-node cluster ------------------------------------------------------------------------
@contextlib.contextmanager
def two_node_cluster(leftovers: list[int]):
    """A head and a second node on this machine, one CPU each: yields the head's address and
    ``{raylet pid: node id}``. On exit every process of the cluster is stopped; those still
    running after 20 s are appended to ``leftovers``."""
    from ray.cluster_utils import Cluster

    temp_dir = tempfile.mkdtemp(prefix="rl-ray-")  # short: Ray's socket paths must fit 107 bytes
    before = set(descendants())
    cluster = Cluster()
    try:
        try:
            head = cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1", temp_dir=temp_dir,
                                    include_dashboard=False)
        except Exception as err:  # installed but cannot start here
            pytest.skip(f"a Ray head node cannot start: {str(err).splitlines()[0]}")
        second = cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        yield cluster.address, {n.all_processes["raylet"][0].process.pid: n.node_id
                                for n in (head, second)}
    finally:
        # the cluster's services, raylets and their workers (the services name the folder)
        ours = (set(descendants()) - before) | set(mentioning(temp_dir))
        cluster.shutdown()
        leftovers += wait_gone(ours)
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.slow  # 25 s here idle, 40 s with the other core busy
def test_two_node_cluster_sweep_with_a_killed_worker_equals_the_local_executor(tmp_path):
    recipe = write(tmp_path, "recipe", RECIPE)
    local = sweep(recipe, tmp_path / "local").root
    lab, log = tmp_path / "cluster", tmp_path / "sweep.log"
    ran_on: dict[int, str] = {}  # chunk worker pid → node id
    killed: list[str] = []  # node ids of the workers killed mid-chunk
    leftovers: list[int] = []
    with two_node_cluster(leftovers) as (address, raylets), open(log, "w") as out:
        assert len(set(raylets.values())) == 2
        proc = subprocess.Popen(
            cli("sweep", recipe, "--lab", lab, "--executor", "ray", "--address", address,
                "--quiet"), env=env(), stdout=out, stderr=out,
            start_new_session=True)
        try:
            deadline = time.monotonic() + 240
            while proc.poll() is None and time.monotonic() < deadline:
                workers = chunk_workers()
                ran_on.update({pid: raylets[ppid] for pid, ppid in workers.items()
                               if ppid in raylets})
                if not killed and workers and n_checkpoints(lab):  # a chunk is mid-way
                    pid = max(workers)
                    os.kill(pid, signal.SIGKILL)
                    killed.append(raylets.get(workers[pid], "?"))
                time.sleep(0.02)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print(f"chunk workers (pid: node): {ran_on}; killed on node {killed}")
    shown = log.read_text()[-3000:]
    assert proc.returncode == 0, shown
    assert "trained 8 of 8 runs (8 done, 0 failed)" in shown
    assert not leftovers, f"cluster processes still running after shutdown: {leftovers}"
    assert killed, "no chunk worker was found to kill"
    assert set(ran_on.values()) == set(raylets.values()), "the chunks did not run on both nodes"
    assert_same_labs(local, lab)
