"""A run's summary re-derived from its stored metric rows (issue 24): the trainer builds the
summary by feeding each evaluation to ``summary.update(epoch, {(split, metric): value})``, and
the metrics file holds exactly those values, so replaying them gives the summary bitwise —
what ``verify`` compares a stored summary with, and what ``verify --repair`` writes back.
"""

from __future__ import annotations

import math

import pandas as pd

from rulelab.engine.runner import trainer_class
from rulelab.study_registry import config_from_flat


def new_summary(config):
    """The empty summary a run of ``config`` starts from (its task's trainer's
    ``new_summary``, which reads only the config: no data or model is built)."""
    cls = trainer_class(config.task)
    return cls.new_summary(object.__new__(cls), config)


def replay(flat_config: dict, rows: pd.DataFrame, failed_reason: str | None) -> dict:
    """The summary of a run of ``flat_config`` whose metric rows are ``rows`` (columns
    ``epoch, split, metric, value``). Why a run failed is not in its metrics: the caller passes
    it (the registry's ``error`` of a failed run, else None)."""
    summary = new_summary(config_from_flat(flat_config))
    by_epoch: dict[int, dict[tuple[str, str], float]] = {}
    for epoch, split, metric, value in rows[["epoch", "split", "metric", "value"]].itertuples(
            index=False):
        by_epoch.setdefault(int(epoch), {})[str(split), str(metric)] = float(value)
    for epoch in sorted(by_epoch):
        summary.update(epoch, by_epoch[epoch])
    summary.failed_reason = failed_reason
    return summary.as_dict()


def same(a: object, b: object) -> bool:
    """Equal, with NaN equal to NaN (summaries hold NaN for "never evaluated")."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def disagreement(flat_config: dict, stored: dict, replayed: dict) -> list[str]:
    """The keys where a stored summary differs from the replayed one. A key whose stored value
    the summary class itself reads differently (an older summary's meaning, mapped by its
    ``from_dict``) cannot be compared and is skipped."""
    config = config_from_flat(flat_config)
    try:
        known = type(new_summary(config)).from_dict(dict(stored), config).as_dict()
    except (TypeError, ValueError, KeyError):
        known = stored
    return [k for k in stored if k in replayed and same(stored[k], known.get(k))
            and not same(stored[k], replayed[k])]
