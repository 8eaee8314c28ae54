"""Study S's analysis tables as its figures group them (SPEC S.4): config columns by run,
configuration groups with their labels, generalization epochs, one epoch per run. Shared by
the trajectory figures (:mod:`.figures`) and the final-epoch readings
(:mod:`.final_readings`)."""

from __future__ import annotations

import pandas as pd

from rulelab.studies.shortcut_saturation.labels import config_label

CONFIG = ("layers", "heads", "ratio", "weight_decay", "seed")


def with_config(table: pd.DataFrame | None, runs: pd.DataFrame | None) -> pd.DataFrame:
    """``table`` with the config columns, taken from ``runs`` by run_id where missing."""
    table = pd.DataFrame() if table is None else table
    add = [c for c in CONFIG if c not in table and runs is not None and c in runs]
    if add and "run_id" in table and "run_id" in runs:
        table = table.merge(runs[["run_id", *add]].drop_duplicates("run_id"), "left", "run_id")
    return table


def config_groups(t: pd.DataFrame, drop=("seed",)) -> list[tuple[str, pd.DataFrame]]:
    """Rows grouped by config (minus ``drop``), each with a label."""
    cols = [c for c in CONFIG if c in t.columns and c not in drop]
    shown = [c for c in cols if c == "ratio" or t[c].nunique() > 1]
    groups = t.groupby(cols, sort=True, dropna=False) if cols else [((), t)]
    return [(config_label(g.iloc[0], shown), g) for _, g in groups]


def has_columns(t: pd.DataFrame, *cols: str) -> bool:
    return not t.empty and set(cols) <= set(t.columns)


def won(g: pd.DataFrame, gen: dict) -> str:  # "k/n" runs of g that generalized
    return f"{sum(i in gen for i in g['run_id'].unique())}/{g['run_id'].nunique()}"


def gen_epochs(runs: pd.DataFrame | None) -> dict[str, float]:
    """run_id → first epoch with val and adv accuracy at 100%, for the runs that generalized."""
    if runs is None or not has_columns(runs, "run_id", "first_epoch_generalized"):
        return {}
    first = pd.to_numeric(runs["first_epoch_generalized"], errors="coerce")
    return dict(zip(runs["run_id"][first.notna()], first[first.notna()], strict=True))


def at_epoch(t: pd.DataFrame, epoch: int | None) -> pd.DataFrame:
    """Per run, the rows at its last stored epoch (None) or its stored epoch nearest ``epoch``."""
    if epoch is None:
        return t[t["epoch"] == t.groupby("run_id")["epoch"].transform("max")]
    dist = (t["epoch"] - epoch).abs()
    best = t["epoch"].where(dist == dist.groupby(t["run_id"]).transform("min"))
    return t[t["epoch"] == best.groupby(t["run_id"]).transform("min")]  # ties: the earlier
