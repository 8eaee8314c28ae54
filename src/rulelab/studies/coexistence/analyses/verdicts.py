"""Study M's verdict words and the two rules that give them (SPEC M.4): a scale-free share read
by its 95% Wilson interval against 50%, and a reading at the paper's setting. Its own module so
that the readers (:mod:`.order`, :mod:`.findings`) share it without importing each other."""

from __future__ import annotations

from rulelab.analysis.stats import wilson

REPRODUCED, PARTLY, NOT = "reproduced", "partly", "not reproduced"
INCONCLUSIVE, READING = "inconclusive", "reading"
MIN_RUNS = 3  # at the paper's setting, a verdict needs at least this many runs


def scale_free_verdict(k: int, n: int) -> str:
    """Verdict of a scale-free share: by where its 95% Wilson interval lies against 50%."""
    if n == 0:
        return INCONCLUSIVE
    lo, hi = wilson(k, n)
    return REPRODUCED if lo > 0.5 else NOT if hi < 0.5 else INCONCLUSIVE


def paper_verdict(k: int, n: int) -> str:
    """Verdict at the paper's setting: all of ≥ MIN_RUNS runs, some, none."""
    if n < MIN_RUNS:
        return f"{INCONCLUSIVE} (n = {n} < {MIN_RUNS})"
    return REPRODUCED if k == n else NOT if k == 0 else PARTLY
