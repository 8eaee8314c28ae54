"""``key=value`` overrides of a recipe (issue 23), as Hydra users write them::

    rulelab sweep shortcut-saturation/quick base.epochs=50 seeds.count=2
    rulelab sweep my.yaml grid.ratio=[0.5,0.7,0.9] execution.max_members=16
    rulelab reproduce shortcut-saturation --scale quick epochs=50   # a bare config key

A key is a dotted path into the recipe (``base.epochs``, ``seeds.count``, ``grid.0.ratio``); a
bare config key (``epochs``) means ``base.epochs``, or ``grid.epochs`` when its value is a
list. A value is read as YAML (``50``, ``0.5``, ``[1, 2]``, ``max``). An override replaces the
key where the recipe set it: ``base.layers=2`` takes ``layers`` out of the grid, and
``grid.layers=[1,2]`` out of base (the file could not set it in both). The overridden recipe
is then checked exactly as a file is (:func:`rulelab.sweep.recipe.parse_recipe`), and a problem
with an overridden key names the override instead of a line of the file.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

import yaml

from rulelab.sweep.yaml_lines import Lines, RecipeError, suggest

KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")


@dataclass(frozen=True)
class Override:
    """One override: ``text`` as given, the ``path`` it sets, the ``value``."""

    text: str
    path: tuple
    value: object


def parse_override(item: str) -> Override:
    """``"base.epochs=50"`` → an :class:`Override` (one :class:`RecipeError` line if not)."""
    key, eq, raw = item.partition("=")
    key = key.strip()
    if not eq or not KEY.fullmatch(key):
        raise RecipeError(f"{item!r} is not a key=value override; write e.g. base.epochs=50, "
                          "seeds.count=2 or grid.ratio=[0.5,0.9]")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as e:
        raise RecipeError(f"{item}: the value is not valid YAML "
                          f"({getattr(e, 'problem', None) or e})") from None
    return make_override(key, value, text=item)


def make_override(key: str, value, *, text: str | None = None) -> Override:
    """An override of dotted ``key`` by a Python ``value`` (``rulelab.train(overrides=…)``)."""
    if not isinstance(key, str) or not KEY.fullmatch(key):
        raise RecipeError(f"overrides: {key!r} is not allowed; keys are dotted paths such as "
                          "'base.epochs' or 'seeds.count'")
    path = tuple(int(p) if p.isdigit() else p for p in key.split("."))
    return Override(text or f"{key}={value!r}", path, value)


def resolve_path(o: Override, top_keys) -> tuple:
    """The path ``o`` sets: a bare config key goes to base (or grid, for a list)."""
    if len(o.path) == 1 and o.path[0] not in top_keys:
        return ("grid" if isinstance(o.value, list) else "base", o.path[0])
    if o.path[0] not in top_keys:
        raise RecipeError(f"{o.text}: unknown key{suggest(o.path[0], top_keys)}; use one of "
                          f"{', '.join(top_keys)}, a dotted path below them, or a config key")
    return o.path


def apply_overrides(data: dict, overrides, top_keys) -> tuple[dict, dict[tuple, str]]:
    """A copy of a recipe's ``data`` with ``overrides`` applied, and ``{path: text}`` of the
    keys they set (for :class:`OverrideLines`)."""
    data = copy.deepcopy(data)
    given: dict[tuple, str] = {}
    for o in overrides:
        path = resolve_path(o, top_keys)
        if path[0] == "seeds" and len(path) > 1 and isinstance(data.get("seeds"), int):
            data["seeds"] = {"count": data["seeds"]}  # seeds: 8 read as {count: 8}
        if path[0] == "grid" and isinstance(data.get("grid"), list) and len(path) == 2 \
                and isinstance(path[1], str):
            targets = [("grid", g, path[1]) for g in range(len(data["grid"]))]
        else:
            targets = [path]
        for target in targets:
            _set(data, target, o)
        if len(path) == 2 and path[0] in ("base", "grid") and isinstance(path[1], str):
            _drop_elsewhere(data, path[0], path[1])
        given[path] = o.text
    return data, given


def _set(data: dict, path: tuple, o: Override) -> None:
    node = data
    for i, part in enumerate(path):
        if isinstance(node, dict) and isinstance(part, int):
            raise RecipeError(f"{o.text}: {Lines.name(path[:i]) or 'the recipe'} is a mapping, "
                              "not a list: name its key, not an index")
        if i == len(path) - 1:
            break
        child = _get(node, part)
        if child is None and isinstance(node, dict):
            child = node[part] = {}
        if not isinstance(child, dict | list):
            where = Lines.name(path[: i + 1])
            raise RecipeError(f"{o.text}: {where} is {child!r}, not a mapping or a list; set "
                              f"{where} itself")
        node = child
    last = path[-1]
    if isinstance(node, list) and (not isinstance(last, int) or not 0 <= last < len(node)):
        raise RecipeError(f"{o.text}: {Lines.name(path[:-1])} has {len(node)} item(s); "
                              f"use an index from 0 to {len(node) - 1}")
    node[last] = o.value


def _get(node, part):
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return None


def _drop_elsewhere(data: dict, where: str, key: str) -> None:
    """An overridden config key is set in one place only: out of grid when set in base, out of
    base when set in grid."""
    if where == "base":
        grids = data.get("grid")
        for grid in grids if isinstance(grids, list) else [grids]:
            if isinstance(grid, dict):
                grid.pop(key, None)
    elif isinstance(data.get("base"), dict):
        data["base"].pop(key, None)


class OverrideLines(Lines):
    """Line numbers of the file, except that a problem with an overridden key names the
    override (``base.epochs=0: 0 is not allowed; …``)."""

    def __init__(self, lines: Lines, given: dict[tuple, str]) -> None:
        super().__init__(lines.path, lines.loader)
        self.lines, self.given = lines.lines, given

    def error(self, at: tuple, message: str, key: str | None = None) -> RecipeError:
        for path, text in reversed(self.given.items()):
            n = min(len(at), len(path))
            if at[:n] == path[:n] and (n == len(path) or key in (None, path[-1])):
                inner = "" if at == path else f"{self.name(at)}: "
                return RecipeError(f"{text}: {inner}{message}")
        return super().error(at, message, key)
