"""``lab.compare(a, b)``: two runs side by side (issue 23 item 4) — every config field and
summary field of each, with the fields where they differ first, so "what is different
between these two runs, and what came of it" is one look::

    cmp = lab.compare("ec7154", "3f2b9a")
    cmp[cmp["differs"]]
"""

from __future__ import annotations

import math

import pandas as pd


def same(x, y) -> bool:
    """Equal values, two missing ones (None, NaN) counting as equal."""
    missing = [v is None or (isinstance(v, float) and math.isnan(v)) for v in (x, y)]
    return all(missing) if any(missing) else x == y


def shown(v) -> str | None:
    """A value as text, exactly (``str``): pandas would print the float 1e-08 in a column of
    mixed values as ``0.0``."""
    return None if v is None else str(v)


def compare(row_a: dict, row_b: dict, name_a: str, name_b: str) -> pd.DataFrame:
    """A frame indexed by ``(part, field)`` — part ``config`` then ``summary`` — with columns
    ``name_a``, ``name_b`` (the values as text) and ``differs``; within each part the
    differing fields come first, otherwise the stored field order. ``row_*`` are
    ``lab.runs_json()`` rows."""
    records = []
    for part in ("config", "summary"):
        a, b = row_a.get(part) or {}, row_b.get(part) or {}
        fields = list(dict.fromkeys([*a, *b]))
        rows = [(part, f, shown(a.get(f)), shown(b.get(f)), not same(a.get(f), b.get(f)))
                for f in fields]
        records += sorted(rows, key=lambda r: not r[4])  # stable: differing first
    frame = pd.DataFrame.from_records(records, columns=["part", "field", name_a, name_b,
                                                        "differs"])
    return frame.set_index(["part", "field"])
