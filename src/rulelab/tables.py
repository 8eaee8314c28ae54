"""Terminal tables: one row per configuration with its generalization rate (SPEC S.3)."""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.table import Table

from rulelab.analysis.stats import cell_columns, format_rate, rate_table


def _fmt(v) -> str:
    if isinstance(v, float):
        return "–" if pd.isna(v) else f"{v:g}"
    return str(v)


def paper_rate(paper: dict | None, layers, ratio) -> str:
    """``paper = {"2L": {0.9: 0.77}, …}`` → ``"77%"`` for this cell, else ``"–"``."""
    if not paper:
        return "–"
    points = paper.get(f"{int(layers)}L", {})
    hit = [v for r, v in points.items() if abs(float(r) - float(ratio)) < 1e-9]
    return f"{hit[0]:.0%}" if hit else "–"


def print_rate_table(console: Console, runs: pd.DataFrame, *, paper: dict | None = None) -> None:
    """Configurations × (seeds, generalized k/n, rate with 95% Wilson CI, mean max adv).

    One table per task; study M counts a run as generalized at ≥ 99% final test accuracy.
    """
    if runs.empty:
        console.print("no runs in this lab yet")
        return
    if "task" in runs.columns and runs["task"].nunique() > 1:
        for _, part in runs.groupby("task"):
            print_rate_table(console, part.dropna(axis=1, how="all"), paper=paper)
        return
    task = runs["task"].iloc[0] if "task" in runs.columns else "mpsp"
    title = ("generalization rate (adv acc reached 100%)" if task == "mpsp"
             else "generalization rate (final test acc ≥ 99%)")
    by = cell_columns(runs)
    table = rate_table(runs, by)
    unfinished = ~runs["status"].isin(["done", "failed"])
    status = unfinished.groupby([runs[c] for c in by], dropna=False).sum()
    grid = Table(title=title, header_style="bold")
    for c in by:
        grid.add_column(c, justify="right")
    grid.add_column("rate [95% CI] (k/n)", justify="right")
    has_adv = "mean_max_adv" in table.columns
    if has_adv:
        grid.add_column("mean max adv", justify="right")
    grid.add_column("failed", justify="right")
    grid.add_column("unfinished", justify="right")
    if paper:
        grid.add_column("paper", justify="right")
    for _, row in table.iterrows():
        key = tuple(row[c] for c in by)
        cells = [_fmt(row[c]) for c in by]
        cells.append(format_rate(int(row["k"]), int(row["n"])))
        if has_adv:
            adv = row["mean_max_adv"]
            cells.append("–" if pd.isna(adv) else f"{adv:.1%}")
        cells.append(str(int(row["n_failed"])))
        cells.append(str(int(status.get(key if len(key) > 1 else key[0], 0))) if by else "0")
        if paper:
            cells.append(paper_rate(paper, row.get("layers", 0), row.get("ratio", -1)))
        grid.add_row(*cells)
    console.print(grid)
