"""Line numbers for YAML recipes: every key and list item of a composed node tree, so that a
recipe error can say ``file:line: key: message`` (:mod:`rulelab.sweep.recipe`); and the size
limits that keep a hostile recipe (an alias bomb, deep nesting) from exhausting memory."""

from __future__ import annotations

import difflib
from pathlib import Path

import yaml


class RecipeError(ValueError):
    """A bad recipe, reported as one line: ``file:line: key: message``."""


def suggest(key, allowed) -> str:
    close = difflib.get_close_matches(str(key), list(allowed), n=1)
    return f" {key!r} (did you mean {close[0]!r}?)" if close else f" {key!r}"


class Lines:
    """Line numbers of every key and list item, from the composed YAML node tree."""

    def __init__(self, path: Path, loader: yaml.SafeLoader) -> None:
        self.path, self.loader = path, loader
        self.lines: dict[tuple, int] = {}

    def index(self, node, at: tuple = ()) -> None:
        self.lines.setdefault(at, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, value_node in node.value:
                key = self.loader.construct_object(key_node, deep=True)
                if key in seen:
                    raise RecipeError(f"{self.path}:{key_node.start_mark.line + 1}: "
                                      f"{self.name((*at, key))}: duplicate key")
                seen.add(key)
                self.lines[(*at, key)] = key_node.start_mark.line + 1
                self.index(value_node, (*at, key))
                self.lines[(*at, key)] = key_node.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.index(item, (*at, i))
                self.lines[(*at, i)] = item.start_mark.line + 1

    def line(self, at: tuple) -> int:
        while at and at not in self.lines:
            at = at[:-1]
        return self.lines.get(at, 1)

    @staticmethod
    def name(at: tuple) -> str:
        out = ""
        for part in at:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        return out

    def error(self, at: tuple, message: str, key: str | None = None) -> RecipeError:
        name = self.name(at)
        if key and not name.endswith(key) and key not in name:
            name = f"{name} ({key})" if name else key
        return RecipeError(f"{self.path}:{self.line(at)}: {name}: {message}")


# --- size limits: a recipe is a small file; these refuse what would exhaust memory -----------
MAX_BYTES = 1 << 20  # the file
MAX_DEPTH = 32  # nesting of mappings and lists
MAX_NODES = 100_000  # keys, values and list items with every alias expanded ("billion laughs")


def check_node_size(path: Path, root) -> None:
    """Refuse a composed YAML node graph that is cyclic, nested deeper than ``MAX_DEPTH`` or
    larger than ``MAX_NODES`` once aliases are expanded (counted on the graph, memoized, so
    the check itself stays linear in the file)."""
    memo: dict[int, tuple[int, int]] = {}  # id(node) → (expanded nodes, depth)
    on_path: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        kids = _children(node)
        if done:
            on_path.discard(id(node))
            count = 1 + sum(memo[id(k)][0] for k in kids)
            depth = 1 + max((memo[id(k)][1] for k in kids), default=0)
            if count > MAX_NODES:
                raise RecipeError(f"{path}:{node.start_mark.line + 1}: too large: more than "
                                  f"{MAX_NODES:,} values once aliases are expanded")
            if depth > MAX_DEPTH:
                raise RecipeError(f"{path}:{node.start_mark.line + 1}: nested more than "
                                  f"{MAX_DEPTH} levels deep")
            memo[id(node)] = (count, depth)
            continue
        if id(node) in memo:
            continue
        if id(node) in on_path:
            raise RecipeError(f"{path}:{node.start_mark.line + 1}: an alias refers to a value "
                              "that contains it (a recursive alias)")
        on_path.add(id(node))
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in memo)


def _children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
