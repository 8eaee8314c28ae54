"""How study S's configurations read in legends, titles and tables: ``"2L·2H r=0.9 wd=0.1"``.

Kept apart from the figures so that the terminal views (``rulelab runs``) need no matplotlib.
"""

from __future__ import annotations

import pandas as pd

from rulelab.report.views import fmt

ARCH = ("layers", "heads")
# How a config value reads in a legend or title; other columns read "name=value".
SHORT = {"ratio": "r={}", "weight_decay": "wd={}", "label_mod": "k={}", "shortcut": "{}",
         "seq_len": "n={}", "vocab": "V={}", "n_train": "N={}", "d_model": "d={}",
         "lr": "lr={}", "data_seed": "data={}"}


def config_label(row: pd.Series, cols: list[str]) -> str:
    """``"2L·2H r=0.9 wd=0.1"``: architecture first, then the given config columns."""
    parts = []
    if all(c in row.index for c in ARCH):
        parts.append(f"{fmt(row['layers'])}L·{fmt(row['heads'])}H")
    for c in cols:
        if c in ARCH or c not in row.index:
            continue
        parts.append(SHORT.get(c, c + "={}").format(fmt(row[c])))
    return " ".join(parts) or "all runs"
