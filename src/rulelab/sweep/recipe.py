"""Experiment recipes: YAML files that read like commented recipes (DESIGN §2; each study's
in ``studies/<name>/recipes/``).

A recipe is a base config, grid axes and seeds::

    experiment: shortcut-saturation-quick   # the name runs are registered under
    task: mpsp                              # a task of a registered study
    base: {seq_len: 6, vocab: 16, epochs: 400}    # fixed config keys, named like the flags
    grid:                                   # every combination of these values …
      layers: [1, 2]
      ratio: [0.5, 0.9]
    seeds: {count: 8, start: 0}             # … × these model seeds (or 8, or [0, 3, 7])
    execution: {max_members: 64, checkpoint_every: 500}

``grid`` may also be a list of such maps: the union of their products (e.g. one sub-grid per
label modulus, each with the ratios around its own chance level). Keys are checked against the
task's config class (the study registry, :mod:`rulelab.study_registry`); every run is built and
validated on load, so a bad recipe fails before anything is written, with one line
``file:line: key: message``. ``execution`` is a :class:`rulelab.settings.Settings`; a recipe made
from ``rulelab train`` flags (:func:`recipe_from_flags`) is the same object without a file.

A recipe's runs are built once, when it is made (issue 22: configs used to be rebuilt four times
in the driver process and once more in the worker): :attr:`Recipe.runs` holds the config
objects, and the planner, the driver, the chunk specs and the worker pass those same objects on.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from rulelab.grid import MAX_RUNS, cells, expand, seed_range_problem
from rulelab.settings import Settings
from rulelab.study_registry import tasks
from rulelab.sweep.overrides import Override, OverrideLines, apply_overrides
from rulelab.sweep.yaml_lines import (
    MAX_BYTES,
    MAX_DEPTH,
    Lines,
    RecipeError,
    check_node_size,
    suggest,
)

TOP_KEYS = ("experiment", "task", "description", "base", "grid", "seeds", "execution")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}")  # experiment names (also --experiment)


@dataclass(frozen=True)
class Recipe:
    """A validated recipe; :meth:`configs` lists its runs (cells × seeds, cell-major)."""

    path: Path | None  # None: made from command-line flags
    experiment: str
    task: str
    description: str
    base: dict
    grids: tuple[dict, ...]
    seeds: tuple[int, ...]
    execution: Settings
    # Every run's config, cell-major, each built once (duplicates once): what travels on.
    runs: tuple = field(repr=False, compare=False)
    overrides: tuple[str, ...] = ()  # key=value overrides applied to the file (as given)

    @property
    def config_class(self) -> type[BaseModel]:
        return tasks()[self.task].config

    def cells(self) -> list[dict]:
        """Grid points (without the seed), in file order; duplicates across sub-grids dropped."""
        return cells(self.grids)

    def configs(self) -> list:
        """Every run, cell-major; runs that coincide (same config) appear once: the configs
        built when the recipe was made (:attr:`runs`), not new ones."""
        return list(self.runs)


def recipe_from_flags(task: str, experiment: str, base: dict, grid: dict,
                      seeds: Sequence[int], execution: Settings) -> Recipe:
    """The recipe of a ``rulelab train`` command line; its runs are built here, once, by
    :func:`rulelab.grid.expand` (a bad value: one line naming the flag)."""
    runs = tuple(expand(tasks()[task].config, base, [grid], seeds))
    return Recipe(None, experiment, task, "", dict(base), (dict(grid),), tuple(seeds),
                  execution, runs)


def load_recipe(path: str | Path, overrides: Sequence[Override] = ()) -> Recipe:
    """Read and validate ``path`` with ``overrides`` applied (:mod:`rulelab.sweep.overrides`);
    raises :class:`RecipeError` (one line) on any problem."""
    path = Path(path)
    try:
        if path.is_file() and path.stat().st_size > MAX_BYTES:
            raise RecipeError(f"{path}: too large for a recipe ({path.stat().st_size:,} bytes; "
                              f"at most {MAX_BYTES:,})")
        data = path.read_bytes()
    except OSError as e:
        raise RecipeError(f"{path}: cannot read the recipe: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecipeError(f"{path}: not a text file (byte {e.start} is not UTF-8); a recipe is "
                          "a YAML file") from None
    return parse_recipe(text, path, overrides)


def parse_recipe(text: str, path: Path, overrides: Sequence[Override] = ()) -> Recipe:
    loader = yaml.SafeLoader(text)
    lines = Lines(path, loader)
    try:
        node = loader.get_single_node()
        if node is not None:
            check_node_size(path, node)  # before anything walks or builds it
        data = loader.construct_document(node) if node is not None else None
        if node is not None:
            lines.index(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise RecipeError(f"{where}: not valid YAML: {getattr(e, 'problem', None) or e}") from None
    except RecursionError:
        raise RecipeError(f"{path}: nested more than {MAX_DEPTH} levels deep") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise RecipeError(f"{path}:1: a recipe is a mapping with keys {', '.join(TOP_KEYS)}")
    if overrides:  # then checked as the file is, naming the override where it is at fault
        data, given = apply_overrides(data, overrides, TOP_KEYS)
        lines = OverrideLines(lines, given)
    for key in data:
        if key not in TOP_KEYS:
            raise lines.error((key,), f"unknown key{suggest(key, TOP_KEYS)}; "
                              f"allowed: {', '.join(TOP_KEYS)}")
    for key in ("experiment", "task"):
        if key not in data:
            raise RecipeError(f"{path}:1: {key}: missing (required)")
    experiment, task = data["experiment"], data["task"]
    if not isinstance(experiment, str) or not NAME.fullmatch(experiment):
        raise lines.error(("experiment",), f"{experiment!r} is not allowed; use up to 100 "
                          "letters, digits, '-', '_' or '.', starting with a letter or digit")
    if task not in tasks():
        raise lines.error(("task",), f"{task!r} is not allowed; use one of "
                          f"{', '.join(sorted(tasks()))}")
    cls = tasks()[task].config
    fields = [f for f in cls.model_fields if f not in ("task", "seed")]
    base = _mapping(data, "base", lines)
    _check_keys(base, ("base",), fields, lines)
    grids = _grids(data, fields, lines)
    for g, grid in enumerate(grids):
        for key in grid:
            if key in base:
                path_ = ("grid", key) if isinstance(data["grid"], dict) else ("grid", g, key)
                raise lines.error(path_, "also set in base; set a key in base or in grid, "
                                  "not both")
    seeds = _seeds(data.get("seeds", 1), lines)
    if why := seed_range_problem(cls, min(seeds), max(seeds) - min(seeds) + 1):
        raise lines.error(("seeds",), why)  # named by the seeds key, not a "seed" field
    n_runs = sum(math.prod(len(v) for v in grid.values()) for grid in grids) * len(seeds)
    if n_runs > MAX_RUNS:
        raise lines.error(("grid",) if "grid" in data else ("seeds",),
                          f"{n_runs:,} runs (cells × seeds) is not allowed; a recipe holds at "
                          f"most {MAX_RUNS:,} runs")
    execution = _execution(data, lines, task)
    description = str(data.get("description") or "")
    if overrides:  # a report quoting the file's description says what was changed
        description = f"{description} (overridden: {', '.join(o.text for o in overrides)})"
    runs = _build_runs(cls, base, grids, seeds, data, lines)
    return Recipe(path, experiment, task, description, base, grids, seeds, execution, runs,
                  tuple(o.text for o in overrides))


# --- parts ------------------------------------------------------------------------------------
def _mapping(data: dict, key: str, lines: Lines) -> dict:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise lines.error((key,), "must be a mapping of config keys to values")
    return dict(value)


def _check_keys(mapping: dict, where: tuple, allowed, lines: Lines) -> None:
    for key in mapping:
        if key == "seed":
            raise lines.error((*where, key), "set model seeds with the top-level seeds key")
        if key not in allowed:
            raise lines.error((*where, key), f"unknown config key{_or_list(key, allowed)}")


def _or_list(key, allowed) -> str:
    """`` 'x' (did you mean 'y'?)`` where a close name exists, else every allowed name."""
    hint = suggest(key, allowed)
    return hint if "did you mean" in hint else f"{hint}; allowed: {', '.join(allowed)}"


def _grids(data: dict, fields, lines: Lines) -> tuple[dict, ...]:
    raw = data.get("grid") or {}
    listed = isinstance(raw, list)
    if not listed and not isinstance(raw, dict):
        raise lines.error(("grid",), "must be a mapping of keys to lists of values, or a list "
                          "of such mappings")
    grids = []
    for g, grid in enumerate(raw if listed else [raw]):
        where = ("grid", g) if listed else ("grid",)
        if not isinstance(grid, dict):
            raise lines.error(where, "each sub-grid must be a mapping of keys to lists")
        _check_keys(grid, where, fields, lines)
        for key, values in grid.items():
            if not isinstance(values, list) or not values:
                raise lines.error((*where, key), "must be a non-empty list of values, e.g. "
                                  "[0.5, 0.9]; put a single value under base")
        grids.append(dict(grid))
    return tuple(grids) or ({},)


def _seeds(raw, lines: Lines) -> tuple[int, ...]:
    def is_int(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if is_int(raw):
        if not 1 <= raw <= MAX_RUNS:
            raise lines.error(("seeds",), f"{raw} is not allowed; give a count from 1 to "
                              f"{MAX_RUNS:,}")
        return tuple(range(raw))
    if isinstance(raw, dict):
        extra = set(raw) - {"count", "start"}
        if extra:
            raise lines.error(("seeds", sorted(extra)[0]), "unknown key; use count and start")
        count, start = raw.get("count"), raw.get("start", 0)
        if not is_int(count) or not 1 <= count <= MAX_RUNS:
            raise lines.error(("seeds", "count"), f"{count!r} is not allowed; give a count "
                              f"from 1 to {MAX_RUNS:,}")
        if not is_int(start) or start < 0:
            raise lines.error(("seeds", "start"), f"{start!r} is not allowed; it must be ≥ 0")
        return tuple(range(start, start + count))
    if isinstance(raw, list) and raw:
        for i, s in enumerate(raw):
            if not is_int(s) or s < 0:
                raise lines.error(("seeds", i), f"{s!r} is not allowed; seeds are integers ≥ 0")
        if len(set(raw)) != len(raw):
            raise lines.error(("seeds",), "lists a seed twice")
        return tuple(raw)
    raise lines.error(("seeds",), "give a count (30), {count: 30, start: 0} or a list [0, 1, 2]")


def _execution(data: dict, lines: Lines, task: str) -> Settings:
    raw = _mapping(data, "execution", lines)
    if isinstance(raw.get("track"), str):
        raw["track"] = [t.strip() for t in raw["track"].split(",") if t.strip()]
    try:
        execution = Settings(**raw)
    except ValidationError as err:
        e = err.errors()[0]
        key = str(e["loc"][0]) if e.get("loc") else _flag_in(e.get("msg", ""))
        if e.get("type") == "extra_forbidden":
            raise lines.error(("execution", key), f"unknown key"
                              f"{_or_list(key, Settings.model_fields)}") from None
        raise lines.error(("execution", key),
                          _value_message(e).removeprefix(f"{key}: ")) from None
    trackers = tasks()[task].trackers
    bad = [t for t in execution.track if t not in trackers]
    if bad:
        allowed = ", ".join(sorted(trackers)) or f"nothing: task {task} has no trackers"
        raise lines.error(("execution", "track"), f"{bad[0]!r} is not allowed; use {allowed}")
    every = execution.track_every
    if every != "log" and not (every.isdigit() and int(every) > 0):
        raise lines.error(("execution", "track_every"), f"{every!r} is not allowed; use log or "
                          "a positive integer")
    return execution


def _build_runs(cls, base: dict, grids: tuple[dict, ...], seeds: tuple[int, ...], data: dict,
                lines: Lines) -> tuple:
    """Every run, built once by :func:`rulelab.grid.expand` (the one time a recipe's configs
    are built), a bad value pointing at its line before any work."""
    listed = isinstance(data.get("grid"), list)
    runs = expand(cls, base, grids, seeds, on_error=lambda err, g, cell: _run_error(
        err, g, grids[g], cell, base, listed, lines))
    for seed in seeds:
        if seed >= 2**31:
            raise lines.error(("seeds",), f"{seed} is not allowed; seeds must be < 2**31")
    return tuple(runs)


def _run_error(err: ValidationError, g: int, grid: dict, cell: dict, base: dict, listed: bool,
               lines: Lines) -> RecipeError:
    """A run that does not build, as one line at the key (and value) at fault."""
    e = err.errors()[0]
    key = str(e["loc"][0]) if e.get("loc") else _flag_in(e.get("msg", ""))
    if key in cell:
        where = ("grid", g, key) if listed else ("grid", key)
        where = (*where, _index(grid[key], cell[key]))
    elif key in base:
        where = ("base", key)
    else:
        where = ("grid", g) if listed and grid else ("grid" if grid else "base",)
    message = _value_message(e).removeprefix(f"{key}: ")
    return lines.error(where, message, key=key)


def _index(values: list, value) -> int:
    for i, v in enumerate(values):
        if v == value and type(v) is type(value):
            return i
    return values.index(value)


def _flag_in(message: str) -> str:
    """The field a cross-field validator names first (``--heads: … is not allowed``)."""
    m = re.search(r"--([a-z0-9-]+)", message)
    return m.group(1).replace("-", "_") if m else ""


def _value_message(e: dict) -> str:
    msg = str(e.get("msg", "invalid value")).removeprefix("Value error, ")
    msg = re.sub(r"--([a-z0-9-]+)", lambda m: m.group(1).replace("-", "_"), msg)
    if e.get("type") != "value_error" and "input" in e and not isinstance(e["input"], dict):
        msg = f"{e['input']!r} is not allowed; {msg[:1].lower()}{msg[1:]}"
    return msg
