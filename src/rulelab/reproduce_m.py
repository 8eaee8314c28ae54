"""``rulelab reproduce coexistence``: study M end to end (SPEC M.4) — preset grid → train →
FF, swap and neuron analyses → findings beside the paper's → one HTML report.

The paper's claims checked (Liu & Lu 2026, see SPEC M.4): noisy labels are fit before clean
ones under full batch (M.4.2); FF's G network is near-perfect on test even at α = 0.8 while R
keeps the memorized noise (M.4.3); swapping ReLU for quadratic or reverse ReLU keeps test
accuracy and drops memorization (M.4.4); an IPR / strength partition helps far less than FF
(M.4.5); test accuracy dips at the interpolation width and rises after it (M.4.1).

Every run prints its scale first (:func:`rulelab.analysis.m_scale.scale_line`: the preset's
name and each departure from the paper's setting, read from the runs' config values). Verdicts
follow :mod:`rulelab.analysis.m_findings`: at the paper's setting every claim gets one; below
it only the scale-free learning order does, and every other row says "reading".
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from rulelab.analysis.m_findings import findings  # noqa: F401 (the findings of this command)
from rulelab.config import ModularRunConfig
from rulelab.grid import expand_grid
from rulelab.reproduce import Preset

_FIXED = dict(op="add", activation="relu", optimizer="adamw", train_frac=0.8)
COEXISTENCE = {
    # For the tests: seconds.
    "tiny": Preset(
        fixed=dict(_FIXED, p=11, epochs=60, eval_every=20, log_eval_steps=20, lr=1e-2,
                   weight_decay=1.0),
        axes=dict(width=[9, 33], noise=[0.0, 0.5]), seeds=range(1),
        note="tiny preset (tests only): P = 11, two widths, 60 steps — it checks the plumbing, "
             "not the science."),
    # Calibrated on the 2-core CPU (1 thread): ≈ 5 min in all when the machine is otherwise idle.
    "quick": Preset(
        fixed=dict(_FIXED, p=31, epochs=1500, eval_every=50, log_eval_steps=100, lr=1e-2,
                   weight_decay=1.0),
        axes=dict(width=[2**j + 1 for j in range(4, 11)], noise=[0.0, 0.5, 0.8]),
        seeds=range(2),
        note="quick preset: P = 31 (not 97/113: a P = 97 step costs ≈ 30× more), train "
             "fraction 0.8 (the authors' 8:2 split), widths 2^j+1 for j = 4..10 (not up to "
             "4097), α ∈ {0, 0.5, 0.8}, 2 seeds, 1,500 full-batch AdamW steps at lr 1e-2, "
             "wd 1.0 (the paper: lr 1e-3, wd 0.1, 200k steps; with those, clean P = 31 needs "
             "far more steps to generalize)."),
    # The paper's scale (SPEC M.2–M.3, research notes): GPU days.
    "paper": Preset(
        fixed=dict(_FIXED, p=113, epochs=200_000, eval_every=1000, log_eval_steps=200, lr=1e-3,
                   weight_decay=0.1),
        axes=dict(width=[2**j + 1 for j in range(4, 13)], noise=[0.0, 0.2, 0.5, 0.8]),
        seeds=range(3),
        note="paper scale: P = 113, widths 17..4097, 200k full-batch AdamW steps (lr 1e-3, "
             "wd 0.1); run it on a GPU (--device cuda)."),
}
# Learning-order window T per preset: its dense-evaluation span (every step up to here), which
# the presets set to the paper's early window (SPEC M.3, M.4.2).
WINDOW_KEY = "log_eval_steps"


def print_findings(console: Console, table: pd.DataFrame) -> None:
    grid = Table(title="study M findings beside the paper's", header_style="bold",
                 show_lines=True)
    for col, ratio in (("claim", 3), ("paper", 3), ("here", 5), ("verdict", 2)):
        grid.add_column(col, ratio=ratio)
    for row in table.itertuples(index=False):
        grid.add_row(*map(str, row))
    console.print(grid)


def print_table(console: Console, title: str, frame: pd.DataFrame) -> None:
    """A frame of readable cells (strings, counts) as a rich table."""
    grid = Table(title=title, header_style="bold")
    for col in frame.columns:
        grid.add_column(str(col))
    for row in frame.itertuples(index=False):
        grid.add_row(*(f"{v:g}" if isinstance(v, float) else str(v) for v in row))
    console.print(grid)


def coexistence(*, scale: str, out: Path | None, lab, device: str, quiet: bool, train,
                console: Console) -> None:
    """Run the study-M preset ``scale`` into ``lab``, analyze, print findings, write a report."""
    from rulelab.analysis.dd_dip import dip_reading
    from rulelab.analysis.m_order import order_display, order_summary, order_table
    from rulelab.analysis.m_scale import scale_line
    from rulelab.analysis.m_tables import dd_table, ff_table, neurons_table, swap_table
    from rulelab.analysis.stored import analyze_stored
    from rulelab.cli_modular import _cli
    from rulelab.store import load

    if scale not in COEXISTENCE:
        raise _cli().UserError(f"--scale: {scale!r} is not allowed; use one of "
                               f"{', '.join(COEXISTENCE)}")
    preset = COEXISTENCE[scale]
    configs = expand_grid(ModularRunConfig, preset.axes, preset.fixed, preset.seeds)
    lab = lab or Path("rulelab-runs") / f"coexistence-{scale}"
    out = out or Path("reports") / f"coexistence-{scale}.html"
    t0 = time.perf_counter()
    the_lab = train(configs, lab=lab, experiment=f"coexistence-{scale}", device=device,
                    max_members=64, checkpoint_every=1000, quiet=quiet)
    t_train = time.perf_counter() - t0
    ids = [c.run_id for c in configs]
    tables = {name: analyze_stored(the_lab, name, fn, task="modular", run_ids=ids)
              for name, fn in (("ff", ff_table), ("swap", swap_table),
                               ("neurons", neurons_table))}
    frames = load(the_lab)
    runs = frames.runs[frames.runs["run_id"].isin(ids)].dropna(axis=1, how="all")
    metrics = frames.metrics[frames.metrics["run_id"].isin(ids)]
    window = preset.fixed[WINDOW_KEY]
    dd, order = dd_table(runs), order_table(runs, metrics, window=window)
    the_lab.write_table("dd", "all", dd)
    the_lab.write_table("order", "all", order)
    found = findings(runs, order, tables["ff"], tables["swap"], tables["neurons"], dd=dd)
    t_all = time.perf_counter() - t0
    line = scale_line(scale, runs)
    console.print(line)
    print_findings(console, found)
    new, old = order_display(order_summary(order))
    print_table(console, f"learning order: early lead over the first {window} steps (runs with "
                "α > 0; points = accuracy points, noisy vs corrupted labels − clean)", new)
    print_table(console, "learning order, old reading: first step at 50% (its own n)", old)
    dips = dip_reading(dd)
    print_table(console, "double descent: the dip in test accuracy vs width",
                dips[[c for c in dips.columns if c in ("noise", "activation", "reading")]])
    console.print(f"wall time: training {t_train:.0f} s, all {t_all:.0f} s; {preset.note}")
    from rulelab.report.figures_m import write_coexistence_report

    path = write_coexistence_report(
        out, title=f"Memorization–generalization coexistence — {scale} reproduction",
        runs=runs, metrics=metrics, tables=dict(tables, dd=dd, order=order, dips=dips),
        found=found, scale=line,
        notes=[("What this reproduction is", preset.note),
               ("Wall time", f"training {t_train:.0f} s, training + analyses {t_all:.0f} s "
                f"on {device} (a resumed run counts only the rest).")])
    console.print(f"report: {path}")
