"""The Python API (issue 10): ``rulelab.load(path)`` → :class:`LoadedLab`, and
``rulelab.train(…)``, which trains a lab and returns it loaded (issue 23). The top layer
beside the command line: it may use the studies, the analyses and the engine; nothing below
imports it.

The names are resolved on first use (PEP 562), so that importing one light submodule —
``rulelab.api.find_runs`` for ``rulelab runs`` — does not import torch with the model loader.
"""

from __future__ import annotations

import importlib

_WHERE = {"LoadedLab": "loaded_lab", "load": "loaded_lab", "UnknownAnalysis": "stored_tables",
          "train": "train"}
__all__ = ["LoadedLab", "UnknownAnalysis", "load", "train"]


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
