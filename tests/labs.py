"""Helpers shared by the sweep, kill-and-resume, fault-injection and Ray tests: run a sweep,
run the CLI as a process, and read back a lab (metrics, registry, checkpoints, temp files) to
compare two labs exactly."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import pandas as pd
import torch

from rulelab.store import Lab
from rulelab.store.atomic import TEMP_NAME
from rulelab.sweep import LocalExecutor, load_recipe, run_sweep

# a tiny MPSP model and data set: a run of 200 epochs trains in about a second
TINY = ("layers: 1, heads: 1, d_model: 16, d_mlp: 16, seq_len: 5, vocab: 12, n_train: 96, "
        "n_eval: 32, eval_every: 5")
# a toy run (tests/toy_study) of the same sizes: 200 epochs train in a fraction of a second
TOY_TINY = "d: 4, width: 16, n_train: 96, n_eval: 32, eval_every: 5"


def tiny_mpsp(experiment: str, extra: str = "") -> str:
    """A recipe of 4 tiny MPSP runs (1L/2L × 2 seeds, 10 epochs, evaluated every 5) for tests
    that need a real lab in seconds; ``extra`` adds YAML lines (e.g. an execution block)."""
    return (f"experiment: {experiment}\ntask: mpsp\n"
            "base: {heads: 1, d_model: 16, d_mlp: 16, seq_len: 5, vocab: 12, n_train: 96,\n"
            "       n_eval: 32, eval_every: 5, epochs: 10}\n"
            f"grid: {{layers: [1, 2]}}\nseeds: 2\n{extra}")


def tiny_lab(root: Path, experiment: str, extra: str = "") -> Path:
    """:func:`tiny_mpsp` swept into ``root/lab``; returns the lab's path."""
    sweep(write(root, "r", tiny_mpsp(experiment, extra)), root / "lab")
    return root / "lab"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def loaded_copy(lab_path: Path, tmp_path: Path):
    """``rulelab.load`` of a fresh copy of ``lab_path`` under ``tmp_path`` (a test may write)."""
    import shutil

    import rulelab

    copy = tmp_path / "lab"
    shutil.copytree(lab_path, copy)
    return rulelab.load(copy)


def sweep(recipe_path: Path, lab_path: Path, progress=None, **overrides) -> Lab:
    """Run the recipe into ``lab_path`` in this process with the local executor."""
    recipe = load_recipe(recipe_path)
    lab = Lab(lab_path, create=True)
    run_sweep(recipe, lab, recipe.execution.merged(**overrides), LocalExecutor(), progress)
    return lab


def cli(*args) -> list[str]:
    """``rulelab ARGS`` as a command line for a fresh process."""
    return [sys.executable, "-m", "rulelab.cli", *map(str, args)]


def env() -> dict:
    """The environment for CLI processes: one thread, no inherited lab."""
    env = {k: v for k, v in os.environ.items() if k != "RULELAB_HOME"}
    return {**env, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


TESTS = Path(__file__).resolve().parent  # holds toy_study, the test-only study
TOY_MAIN = "import toy_study.registered; from rulelab.cli import main; main()"


def toy_cli(*args) -> list[str]:
    """``rulelab ARGS`` as a command line for a fresh process that knows the toy study (run it
    with :func:`toy_env`)."""
    return [sys.executable, "-c", TOY_MAIN, *map(str, args)]


def toy_env() -> dict:
    """:func:`env` with ``tests/`` on the path, so a child process can import ``toy_study``."""
    base = env()
    path = os.pathsep.join(p for p in (str(TESTS), base.get("PYTHONPATH")) if p)
    return {**base, "PYTHONPATH": path}


def metrics(lab: Path) -> pd.DataFrame:
    """Every stored metric row of the lab, in a canonical order."""
    frames = [pd.read_parquet(p) for p in sorted((lab / "metrics").glob("*.parquet"))]
    df = pd.concat(frames).sort_values(["run_id", "epoch", "split", "metric"])
    return df.reset_index(drop=True)


def registry(lab: Path) -> dict:
    """``{run_id: (status, summary, error)}``."""
    return {r["run_id"]: (r["status"], r["summary"], r["error"])
            for r in Lab(lab).runs_json()}


def statuses(lab: Path) -> list[str]:
    """Run statuses read without opening the lab for writing; [] while it cannot be read
    (e.g. not created yet by a sweep being watched)."""
    path = lab / "registry.sqlite"
    if not path.exists():
        return []
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as conn:
            return [s for (s,) in conn.execute("SELECT status FROM runs")]
    except sqlite3.Error:
        return []


def run_ids(lab: Path) -> list[str]:
    """The registry's run ids, sorted."""
    from contextlib import closing

    with closing(sqlite3.connect(lab / "registry.sqlite")) as conn:
        return [r[0] for r in conn.execute("SELECT run_id FROM runs ORDER BY run_id")]


def execute_sql(lab: Path, sql: str, *args) -> None:
    """Run one statement on the registry and commit: how tests damage a lab's rows."""
    from contextlib import closing

    with closing(sqlite3.connect(lab / "registry.sqlite")) as conn, conn:
        conn.execute(sql, args)


def n_checkpoints(lab: Path) -> int:
    return len(list((lab / "checkpoints").glob("*.pt")))


def temp_files(lab: Path) -> list[Path]:
    """Temp files of interrupted atomic writes anywhere in the lab."""
    return sorted(p for p in lab.rglob("*") if TEMP_NAME.fullmatch(p.name))


def assert_same_checkpoints(a: Path, b: Path) -> None:
    """The final checkpoints of two labs hold bitwise equal states (weights, optimizer, RNG)."""
    names = sorted(p.name for p in (a / "checkpoints").glob("*.pt"))
    assert names == sorted(p.name for p in (b / "checkpoints").glob("*.pt")) and names
    for name in names:
        sa, sb = (torch.load(lab / "checkpoints" / name, weights_only=True) for lab in (a, b))
        _assert_equal(sa, sb, name)


def _assert_equal(x, y, where: str) -> None:
    if isinstance(x, dict):
        assert isinstance(y, dict) and x.keys() == y.keys(), where
        for k in x:
            _assert_equal(x[k], y[k], f"{where}[{k!r}]")
    elif isinstance(x, list | tuple):
        assert type(x) is type(y) and len(x) == len(y), where
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            _assert_equal(u, v, f"{where}[{i}]")
    elif isinstance(x, torch.Tensor):
        assert isinstance(y, torch.Tensor), where
        torch.testing.assert_close(x, y, rtol=0, atol=0, equal_nan=True, msg=where)
    else:
        assert x == y or (x != x and y != y), where  # NaN == NaN here


def state_at(trainer, epoch: int, member: int = 0) -> dict:
    """Member ``member``'s checkpoint state as ``trainer.fit`` reaches ``epoch`` (the trainer
    stops there): what a kill at that epoch leaves for a test to resume from."""

    class _Stop(Exception):
        pass

    saved: dict = {}

    def stop(tr, _evaluated) -> None:
        if tr.epoch == epoch:
            saved.update(tr.member_state(member))
            raise _Stop

    try:
        trainer.fit(on_epoch=stop)
    except _Stop:
        return saved
    raise AssertionError(f"the trainer ended before epoch {epoch}")
