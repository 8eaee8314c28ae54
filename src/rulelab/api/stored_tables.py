"""``lab.analyses[name]``: a stored analysis table with its runs' config columns (issue 10).

Tables live under ``<lab>/analyses/<name>/`` (DESIGN §3), one file per ensemble, epoch or run,
written by ``rulelab analyze`` or by ``--track`` during training. Rows tracked during training
may lack the config columns a post-hoc analysis stores beside each row (``layers``, ``ratio``,
``seed``, …); :func:`rulelab.report.stored_analyses.tidy_analysis` (the report's own reading) joins
them on ``run_id`` without overwriting a column the analysis wrote (gradients' ``eps`` is also
an optimizer field) and tags each row's ``source`` (tracked or post-hoc); both kinds are kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pandas as pd

from rulelab.errors import UserError
from rulelab.report.stored_analyses import tidy_analysis
from rulelab.store import Lab


class UnknownAnalysis(UserError, KeyError):
    """A name with no stored table: a ``KeyError`` for ``in`` / ``.get`` users, one line for
    the command line."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class StoredTables(Mapping):
    """``{analysis name: DataFrame}`` over the tables a lab stores, read on access."""

    def __init__(self, lab: Lab, runs: pd.DataFrame) -> None:
        self.lab = lab
        self.runs = runs  # one row per run: run_id and its config columns

    def names(self) -> list[str]:
        root = self.lab.analyses_dir
        if not root.is_dir():
            return []
        return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.parquet")))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __contains__(self, name: object) -> bool:
        return name in self.names()

    def __getitem__(self, name: str) -> pd.DataFrame:
        names = self.names()
        if name not in names:
            stored = ", ".join(names) if names else "none yet"
            raise UnknownAnalysis(f"no stored analysis {name!r} in {self.lab.root} (stored: "
                                  f"{stored}); run lab.analyze({name!r}, save=True) or "
                                  f"`rulelab analyze {name}` to make it")
        return tidy_analysis(self.lab.read_table(name), self.runs, one_source=False)

    def __repr__(self) -> str:
        return f"StoredTables({', '.join(self.names()) or 'none'})"
