"""Tables on the terminal (rich): the rate table of ``rulelab runs`` and the summaries the
analyses print. User-given text (config values, names) is printed as text, never as markup."""

from __future__ import annotations

import sys

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rulelab.report.rates import rate_tables

# Wide enough for the rate table when piped (rich would wrap it at 80 columns).
console = Console() if sys.stdout.isatty() else Console(width=140)
err_console = Console(stderr=True)


def print_rate_table(out: Console, runs: pd.DataFrame, *, metrics=None) -> None:
    """Configurations × (generalized k/n with 95% Wilson CI, the view's columns, failed,
    unfinished), one table per task, each under its view's lines and above its notes."""
    tables = rate_tables(runs, metrics)
    if not tables:
        out.print("no runs in this lab yet")
    for t in tables:
        for line in t.above:
            out.print(line, markup=False, highlight=False)
        grid = Table(title=escape(t.title), header_style="bold")
        for h in t.head:
            grid.add_column(escape(h), justify="right")
        for row in t.rows:
            grid.add_row(*map(escape, row))
        out.print(grid)
        for line in t.notes:
            out.print(line, markup=False, highlight=False)


def print_run_list(out: Console, runs: pd.DataFrame, config_columns: list[str],
                   short: dict[str, str]) -> None:
    """``rulelab runs --ids``: one row per run (:func:`rulelab.report.run_list.run_list`)."""
    from rulelab.report.run_list import run_list

    if runs.empty:
        out.print("no runs match" if short else "no runs in this lab yet")
        return
    head, rows = run_list(runs, config_columns, short)
    grid = Table(title=f"{len(rows)} run{'s' if len(rows) != 1 else ''}", header_style="bold")
    for h in head:
        grid.add_column(escape(h), justify="left" if h == "id" else "right")
    for row in rows:
        grid.add_row(*map(escape, row))
    out.print(grid)
    out.print(f"a run is named by its id or any unique prefix: lab.model({rows[0][0]!r}), "
              f"rulelab export tl {rows[0][0]}", markup=False, highlight=False, style="dim")


def print_frame(title: str, frame: pd.DataFrame, digits: int = 3, *,
                out: Console | None = None) -> None:
    """A DataFrame as a rich table (floats to ``digits`` significant digits)."""
    table = Table(title=escape(title), header_style="bold")
    for c in frame.columns:
        table.add_column(escape(str(c)), justify="right")
    for row in frame.itertuples(index=False):  # iterrows would turn an int column to floats
        table.add_row(*[escape(cell_text(v, digits)) for v in row])
    (out or console).print(table)


def cell_text(v, digits: int = 3) -> str:
    """A table cell: floats to ``digits`` significant digits, whole numbers in full (a width
    of 1025 or epoch 1500, never ``1.02e+03``, issue 23)."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.{digits}g}" if isinstance(v, float) else str(v)


def progress_line(message: str) -> None:
    """A dim progress line on stderr (e.g. each ensemble an analysis went through)."""
    err_console.print(message, style="dim", markup=False)
