"""Line numbers for YAML recipes: every key and list item of a composed node tree, so that a
recipe error can say ``file:line: key: message`` (:mod:`rulelab.sweep.recipe`)."""

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
