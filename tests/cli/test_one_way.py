"""One value, one way (issue 22 item 3): execution flags generated from ``Settings`` for
``train``, ``sweep`` and ``reproduce`` alike; a run's config built once and handed to the worker
as that object; the lab one type (:class:`LabDir`) from the command line to the store."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import typer

from rulelab.cli.app import build_app
from rulelab.cli.settings_flags import settings_from_flags
from rulelab.config.base import flag_name
from rulelab.errors import UserError
from rulelab.grid import expand
from rulelab.settings import Settings
from rulelab.store import Lab, LabDir
from rulelab.study_registry import study
from rulelab.sweep.driver import chunk_specs, make_plan
from rulelab.sweep.recipe import load_recipe, parse_recipe

COMMANDS = (("train", "mpsp"), ("train", "modular"), ("train", "sparse_parity"), ("sweep",),
            ("reproduce", "shortcut-saturation"), ("reproduce", "coexistence"))


def options_of(path: tuple[str, ...]) -> dict[str, str]:
    """``{flag: help}`` of the command at ``path``."""
    cmd = typer.main.get_command(build_app())
    for name in path:
        cmd = cmd.commands[name]
    return {o: p.help or "" for p in cmd.params for o in p.opts}


@pytest.mark.parametrize("path", COMMANDS)
def test_every_settings_flag_is_generated_with_its_fields_help(path):
    opts = options_of(path)
    for name in Settings.FLAGS:
        flag = flag_name(name)
        assert flag in opts, f"{' '.join(path)} lacks {flag}"
        assert opts[flag].startswith(Settings.model_fields[name].description)
    recipe_default = "(default: the recipe's" in opts["--micro-batch"]
    assert recipe_default == (path[0] != "train")  # train shows the setting's own default


def test_settings_flags_are_checked_by_their_fields_bounds():
    for values, message in (
            ({"micro_batch": 0}, "--micro-batch: 0 is not allowed; it must be ≥ 1"),
            ({"micro_batch": 2_000_000}, "--micro-batch: 2000000 is not allowed; it must be "
                                         "≤ 1,000,000"),
            ({"memory_gib": 0.0}, "--memory-gib: 0.0 is not allowed; it must be > 0"),
            ({"snapshots": -1}, "--snapshots: -1 is not allowed; it must be ≥ 0"),
            ({"device": "tpu"}, "--device: 'tpu' is not allowed; use cpu, cuda, cuda:N or mps"),
            ({"track": "nope"}, "--track: nope is not allowed; use a comma list of a, b")):
        with pytest.raises(UserError) as e:
            settings_from_flags(Settings(), values, trackers={"a": 1, "b": 2}, task="t")
        assert str(e.value) == message


def test_flags_left_unset_keep_the_recipes_settings():
    recipe = Settings(max_members=7, quiet=True, track=("a",), snapshots=3)
    got = settings_from_flags(recipe, {"max_members": None, "quiet": False, "micro_batch": 32,
                                       "track_every": "5"}, trackers={"a": 1}, task="t")
    assert (got.max_members, got.quiet, got.micro_batch) == (7, True, 32)
    assert (got.track, got.track_every, got.snapshots) == (("a",), "5", 3)
    # from Python an explicit False is a value, not a switch left off
    assert settings_from_flags(recipe, {"quiet": False}, off_is_unset=False).quiet is False


def test_a_recipes_runs_are_built_once_in_grid_order():
    text = """experiment: e
task: mpsp
base: {seq_len: 6, vocab: 6, n_train: 64, n_eval: 32, epochs: 2}
grid:
  - {layers: [1, 2], ratio: [0.5]}
  - {layers: [2, 1], ratio: [0.5, 0.9]}   # two of its cells repeat the first sub-grid's
seeds: [3, 1]
"""
    recipe = parse_recipe(text, Path("r.yaml"))
    want = expand(recipe.config_class, recipe.base, recipe.grids, recipe.seeds)
    assert [c.run_id for c in recipe.runs] == [c.run_id for c in want]
    assert len(recipe.runs) == 4 * 2  # 4 distinct cells × 2 seeds
    assert all(a is b for a, b in zip(recipe.configs(), recipe.runs, strict=True))


def test_the_worker_gets_the_recipes_config_objects_and_a_lab_dir(tmp_path):
    recipe = load_recipe(study("shortcut-saturation").recipe_path("quick"))
    plan = make_plan(recipe, None, recipe.execution)
    specs = chunk_specs(plan, Lab(tmp_path / "lab", create=True), recipe.execution)
    built = {id(c) for c in recipe.runs}
    assert sum(len(s.configs) for s in specs) == len(recipe.runs) == 32
    assert all(id(c) in built for s in specs for c in s.configs)  # the same objects
    spec = pickle.loads(pickle.dumps(specs[0]))  # what a Ray worker receives
    assert type(spec.lab) is LabDir and spec.lab.root == tmp_path / "lab"
    assert [c.flat() for c in spec.configs] == [c.flat() for c in specs[0].configs]
    assert spec.run_ids == specs[0].run_ids


def test_lab_dir_is_the_one_type_and_a_lab_is_one(tmp_path, monkeypatch):
    monkeypatch.setenv("RULELAB_HOME", str(tmp_path / "home"))
    assert LabDir.at(None).root == tmp_path / "home"
    monkeypatch.chdir(tmp_path)
    files = LabDir.at("rel")
    assert files.root == tmp_path / "rel" and LabDir.at(files) is files
    lab = Lab(files, create=True)
    assert isinstance(lab, LabDir) and LabDir.at(lab) is lab and lab.root == files.root
    assert not hasattr(files, "register") and not hasattr(files, "mark_done")  # no registry
    files.save_checkpoint("r1", {"epoch": 3})
    assert lab.checkpoints_dir == files.checkpoints_dir
    assert (files.checkpoints_dir / "r1.pt").is_file()
