"""Study S's rate tables (SPEC S.3): ``generalized`` (val and adv both 100% at one evaluation)
per cell, the paper's adv-only reading beside it, and the mean max adv accuracy with its
per-seed range. Cells are keyed layers, heads, the other varying config columns, then r."""

from __future__ import annotations

import pandas as pd

from rulelab.analysis.stats import rate_table, spread_table, varying_columns

ADV_ONLY = "adv_generalized"  # the paper's text: adv accuracy reached 100% (S.3)
FLIPPED = ("the readings differ: for k = 2 a model that learned the flipped shortcut 1 − s "
           "scores adv 100% with val 0% (adv-only counts it, val and adv does not)")


def cell_columns(runs: pd.DataFrame) -> list[str]:
    """Columns that define a rate cell: layers, heads, other varying config columns, ratio."""
    arch = [c for c in ("layers", "heads") if c in runs.columns]
    others = [c for c in varying_columns(runs) if c not in (*arch, "ratio")]
    return arch + others + (["ratio"] if "ratio" in runs.columns else [])


def adv_rate_table(runs: pd.DataFrame, by: list[str], flag: str = "generalized"
                   ) -> pd.DataFrame:
    """:func:`~rulelab.analysis.stats.rate_table` and, when ``runs`` has ``max_adv_acc``, its
    mean over the finished seeds with their range (``mean_max_adv, max_adv_min,
    max_adv_max``)."""
    table = rate_table(runs, by, flag)
    if "max_adv_acc" in runs.columns:
        spread = spread_table(runs, by, "max_adv_acc")
        table["mean_max_adv"] = spread["mean"].to_numpy()
        table["max_adv_min"] = spread["min"].to_numpy()
        table["max_adv_max"] = spread["max"].to_numpy()
    return table


def readings_table(runs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """:func:`adv_rate_table` of ``generalized`` (val and adv 100% at one evaluation, S.3) with
    the paper's adv-only reading beside it as ``k_adv, rate_adv, ci_low_adv, ci_high_adv``
    when ``runs`` has ``adv_generalized``."""
    table = adv_rate_table(runs, by)
    if ADV_ONLY in runs.columns:
        adv = rate_table(runs, by, flag=ADV_ONLY)
        for c in ("k", "rate", "ci_low", "ci_high"):
            table[f"{c}_adv"] = adv[c].to_numpy()
    return table


def readings_differ(table: pd.DataFrame) -> bool:
    """Whether the adv-only reading counts differently from ``generalized`` in any cell."""
    return "k_adv" in table.columns and bool((table["k_adv"] != table["k"]).any())
