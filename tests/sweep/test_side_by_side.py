"""Chunks trained side by side by the local executor (issue 25): the same numbers as one after
another, the driver's events from its own thread only, the planner cutting ensembles so every
worker gets a chunk, and an error in one chunk stopping the others at their next epoch."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from labs import TOY_TINY, metrics, registry, write
from rulelab.settings import Settings
from rulelab.store import Lab, StoreError
from rulelab.sweep import LocalExecutor, executors, load_recipe, run_sweep
from rulelab.sweep.driver import make_plan
from rulelab.sweep.planner import BALANCE, plan_chunks
from rulelab.sweep.progress import SweepProgress

RECIPE = f"""\
experiment: side
task: toy
base: {{{TOY_TINY}, epochs: 60}}
grid:
  noise: [0.1, 0.2]
  weight_decay: [0.1, 0.3]
seeds: 2
"""
pytestmark = pytest.mark.usefixtures("toy")


class Events(SweepProgress):
    """Records which thread the driver's progress hears from, and the order of chunk events."""

    def __init__(self) -> None:
        self.order: list[tuple[str, int]] = []
        self.threads: set[str] = set()

    def chunk_started(self, spec) -> None:
        self.order.append(("start", spec.index))
        self.threads.add(threading.current_thread().name)

    def chunk_finished(self, spec, outcomes) -> None:
        self.order.append(("end", spec.index))
        self.threads.add(threading.current_thread().name)


def _swept(tmp_path, name: str, workers: int, recipe_text: str = RECIPE, **settings):
    recipe = load_recipe(write(tmp_path, name, recipe_text))
    lab = Lab(tmp_path / name, create=True)
    events = Events()
    result = run_sweep(recipe, lab, recipe.execution.merged(**settings),
                       LocalExecutor(workers, processes=False), events, interleave_seeds=False)
    return lab, result, events


def test_side_by_side_equals_one_after_another(tmp_path):
    one, r1, _ = _swept(tmp_path, "one", 1)
    two, r2, events = _swept(tmp_path, "two", 2)
    assert r1.done == r2.done == 8
    assert [len(c.configs) for c in r1.plan.chunks] == [8]  # one ensemble holds them all
    assert [len(c.configs) for c in r2.plan.chunks] == [4, 4]  # cut: one chunk per worker
    pd.testing.assert_frame_equal(metrics(one.root), metrics(two.root), check_exact=True)
    assert registry(one.root) == registry(two.root)
    # both chunks ran at once, and the driver heard of them in its own thread only
    assert events.order[:2] == [("start", 0), ("start", 1)]
    assert events.threads == {threading.current_thread().name}


def test_side_by_side_as_processes_equals_one_after_another(tmp_path):
    """Worker processes (spawned: the toy study registered in each from the driver's list)."""
    one, _, _ = _swept(tmp_path, "one", 1)
    recipe = load_recipe(write(tmp_path, "proc", RECIPE))
    lab = Lab(tmp_path / "proc", create=True)
    result = run_sweep(recipe, lab, recipe.execution, LocalExecutor(2, processes=True),
                       interleave_seeds=False)
    assert result.done == 8 and [len(c.configs) for c in result.plan.chunks] == [4, 4]
    pd.testing.assert_frame_equal(metrics(one.root), metrics(lab.root), check_exact=True)
    assert registry(one.root) == registry(lab.root)


def test_a_long_plan_trains_as_processes_and_a_short_one_in_threads():
    recipe = load_recipe_text(RECIPE)
    short = make_plan(recipe, None, Settings(), workers=2)
    long = make_plan(load_recipe_text(RECIPE.replace("epochs: 60", "epochs: 1000000")), None,
                     Settings(), workers=2)
    executor = LocalExecutor(2)
    for plan, processes in ((long, True), (short, False)):  # each plan its own choice
        executor.prepare(plan, Settings())
        assert executor.as_processes is processes
    chosen = LocalExecutor(2, processes=False)
    chosen.prepare(long, Settings())
    assert chosen.as_processes is False  # the caller's choice stands


def test_native_full_batch_steps_train_in_threads_however_long_the_plan():
    """Engine 11's step is one native call per member with the GIL released: a long plan of
    full-batch steps (the ladder's 2k rung) takes threads, with no worker start-up; one of
    64-example minibatches (the quick preset: Python between many small passes), engine 10's
    op-by-op steps, or a GPU keep the rule."""
    from rulelab.cli.sweep import recipe_path
    from rulelab.models import tile_step

    if tile_step.native() is None:
        pytest.skip("engine 11's kernel did not build here")
    executor = LocalExecutor(2)
    ladder = load_recipe(recipe_path(Path("shortcut-saturation/ladder-2k")))
    quick = load_recipe(recipe_path(Path("shortcut-saturation/quick")))
    for recipe, settings, processes in ((ladder, Settings(), False),
                                        (ladder, Settings(engine="10"), True),
                                        (quick, Settings(), True)):
        plan = make_plan(recipe, None, settings, workers=2)
        assert plan.seconds(executors.speed_for(settings)) > executors.SPAWN_WORTH_SECONDS
        executor.prepare(plan, settings)
        assert executor.as_processes is processes, (recipe.experiment, settings.engine)
    plan = make_plan(ladder, None, Settings(), workers=2)
    assert not executors.native_steps(plan, Settings(device="cuda"))


def test_side_by_side_the_planner_balances_workers_costliest_first():
    """No chunk costs more than 1/(BALANCE · workers) of the plan (to within one run), and the
    costliest go first: a costly shape does not train alone on one core at the end."""
    recipe = load_recipe_text(RECIPE.replace("width: 16, ", "").replace(
        "grid:", "grid:\n  width: [16, 64]"))
    for workers in (2, 3):
        plan = make_plan(recipe, None, Settings(), workers=workers)
        flops = [c.flops for c in plan.chunks]
        per_run = {len(c.configs): c.flops / len(c.configs) for c in plan.chunks}
        share = sum(flops) / (BALANCE * workers)
        assert all(f <= share + max(per_run.values()) for f in flops)
        assert flops == sorted(flops, reverse=True) and len(plan.chunks) >= BALANCE * workers
        assert sorted(c.index for c in plan.chunks) == list(range(len(plan.chunks)))
    one = make_plan(recipe, None, Settings(), workers=1)  # one after another: uncut
    assert [len(c.configs) for c in one.chunks] == [8, 8]
    configs = recipe.configs()
    chunks, caps = plan_chunks(configs, {}, max_members=64, budget_bytes=2**40, min_chunks=2)
    assert set(caps.values()) == {64}  # the cut is not reported as a memory cap


def test_one_shape_side_by_side_is_cut_in_one_equal_chunk_per_worker():
    """Equal chunks finish together uncut finer: larger ensembles train faster per seed."""
    configs = load_recipe_text(RECIPE).configs()  # 8 runs of one shape
    for workers, sizes in ((2, [4, 4]), (3, [3, 3, 2])):
        chunks, _ = plan_chunks(configs, {}, max_members=64, budget_bytes=2**40,
                                interleave_seeds=False, min_chunks=workers)
        assert [len(c.configs) for c in chunks] == sizes
    chunks, _ = plan_chunks(configs, {}, max_members=3, budget_bytes=2**40,
                            interleave_seeds=False, min_chunks=2)  # the cap: 2 per worker
    assert [len(c.configs) for c in chunks] == [2, 2, 2, 2]


def load_recipe_text(text: str):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        return load_recipe(write(Path(tmp), "r", text))


@pytest.mark.parametrize("error", [StoreError("the lab's disk is full (simulated)"),
                                   KeyboardInterrupt()], ids=["lab error", "Ctrl-C"])
def test_an_error_in_one_chunk_stops_the_others_at_their_next_epoch(tmp_path, monkeypatch,
                                                                    error):
    real = executors.run_chunk

    def run_chunk(spec, progress=None):
        if spec.index == 0:
            time.sleep(0.5)
            raise error
        return real(spec, progress)

    monkeypatch.setattr(executors, "run_chunk", run_chunk)
    long = RECIPE.replace("epochs: 60", "epochs: 100000").replace("eval_every: 5",
                                                                 "eval_every: 100000")
    t = time.monotonic()
    with pytest.raises(type(error)):
        _swept(tmp_path, "err", 2, long)
    # the other chunk stopped at its next epoch (not at its next evaluation, 100,000 away)
    assert time.monotonic() - t < 30
    runs = registry(tmp_path / "err")
    assert {status for status, _, _ in runs.values()} <= {"running", "pending"}
