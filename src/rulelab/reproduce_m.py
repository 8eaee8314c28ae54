"""``rulelab reproduce coexistence``: study M end to end (SPEC M.4) — preset grid → train →
FF, swap and neuron analyses → findings beside the paper's → one HTML report.

The paper's claims checked (Liu & Lu 2026, see SPEC M.4): noisy labels are fit before clean
ones under full batch (M.4.2); FF's G network is near-perfect on test even at α = 0.8 while R
keeps the memorized noise (M.4.3); swapping ReLU for quadratic or reverse ReLU keeps test
accuracy and drops memorization (M.4.4); an IPR / strength partition helps far less than FF
(M.4.5); in the over-parameterized regime test accuracy rises with width (M.4.1).
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

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
REPRODUCED, PARTLY, NOT = "reproduced", "partly", "not reproduced at this scale"


def _mean(frame: pd.DataFrame, **where) -> float:
    for k, v in where.items():
        frame = frame[frame[k] == v]
    return float(frame["acc"].mean()) if len(frame) else float("nan")


def findings(runs: pd.DataFrame, order: pd.DataFrame, ff: pd.DataFrame, swap: pd.DataFrame,
             neurons: pd.DataFrame) -> pd.DataFrame:
    """One row per claim: ``claim, paper, here, verdict`` (SPEC M.4), at the largest width and
    the highest noise level of the lab."""
    from rulelab.analysis.m_tables import best_pruned
    from rulelab.analysis.stats import format_rate

    rows = []
    M, a = int(runs["width"].max()), float(runs["noise"].max())
    at = dict(width=M, noise=a)
    p = int(runs["p"].iloc[0])

    noisy = order[order["noise"] > 0].dropna(subset=["first_train_noisy_50"])
    k, n = int(noisy["noisy_first_50"].sum()), len(noisy)
    both = noisy.dropna(subset=["first_train_clean_50"])
    lead = (both["first_train_clean_50"] - both["first_train_noisy_50"]).median()
    here = (f"noisy-train accuracy reached 50% strictly before clean-train in "
            f"{format_rate(k, n)} of runs with α > 0 (a clean curve that never gets there "
            f"counts as later); median lead {lead:.0f} steps over the {len(both)} runs where "
            f"both got there") if n else "no run with α > 0 reached 50% noisy-train accuracy"
    rows.append(("noisy labels are fit first (M.4.2)", "yes, under full batch (AdamW, Adam, "
                 "Muon)", here, REPRODUCED if n and k >= 0.75 * n else PARTLY if k else NOT))

    g, o = _mean(ff, network="G", subset="test", **at), _mean(ff, network="original",
                                                               subset="test", **at)
    seeds = ff[(ff["network"] == "G") & (ff["subset"] == "test") & (ff["width"] == M)
               & (ff["noise"] == a)]["acc"]
    rows.append((f"FF: G near-perfect on test at heavy noise (M.4.3; here α = {a:g}, M = {M})",
                 "≈100% test at α = 0.8", f"G test {g:.1%} (seeds {seeds.min():.1%}–"
                 f"{seeds.max():.1%}) vs original {o:.1%}",
                 REPRODUCED if g >= 0.95 else PARTLY if g - o >= 0.2 else NOT))

    rn, gn = _mean(ff, network="R", subset="train_noisy", **at), _mean(
        ff, network="G", subset="train_noisy", **at)
    rows.append(("FF: R keeps the memorized noise (M.4.3)", "R fits the noisy labels, G does not",
                 f"noisy-train acc (vs corrupted labels): R {rn:.1%}, G {gn:.1%}",
                 REPRODUCED if rn >= 0.5 and gn <= 0.2 else PARTLY if rn > gn else NOT))

    relu_t, relu_n = (_mean(swap, activation_eval="relu", subset=s, **at)
                      for s in ("test", "train_noisy"))
    parts, ok = [], 0
    for act in ("quadratic", "reverse_relu"):
        t, nz = (_mean(swap, activation_eval=act, subset=s, **at) for s in ("test", "train_noisy"))
        parts.append(f"{act}: test {t:.1%}, noisy {nz:.1%}")
        ok += t >= relu_t - 0.02 and nz <= relu_n - 0.1
    rows.append(("activation swap keeps test, drops memorization (M.4.4)",
                 "ReLU → quadratic / reverse ReLU: test kept or better, noisy acc drops",
                 f"relu: test {relu_t:.1%}, noisy {relu_n:.1%}; " + "; ".join(parts)
                 + (f" (the raw test accuracy is at chance, 1/P = {1 / p:.1%}, so 'kept' "
                    "says little here)" if relu_t < 2 / p else ""),
                 REPRODUCED if ok == 2 else PARTLY if ok else NOT))

    best = best_pruned(neurons[(neurons["width"] == M) & (neurons["noise"] == a)])
    part = best.groupby("score")["acc"].mean() if len(best) else pd.Series(dtype=float)
    part_best = float(part.max()) if len(part) else float("nan")
    top_ff = _mean(neurons, kind="partition", network="top_ff", subset="test", **at)
    rows.append(("partition helps far less than FF (M.4.5)", "IPR / Str subnetworks: marginal "
                 "gains; FF on the top subnetwork < FF on the whole network",
                 f"best top-k subnetwork test {part_best:.1%} (by "
                 f"{part.idxmax() if len(part) else '–'}); FF on top half {top_ff:.1%}; "
                 f"FF on all {g:.1%}",
                 REPRODUCED if part_best <= g - 0.1 and top_ff < g else
                 PARTLY if part_best < g else NOT))

    done = runs[runs["status"].astype(str) == "done"]
    test = done[done["noise"] == a].groupby("width")["final_test_acc"].mean()
    fit = done[done["noise"] == a].groupby("width")["final_noisy_acc"].mean()
    interp = fit.index[fit >= 0.99]
    w0 = int(interp.min()) if len(interp) else None
    gw = ff[(ff["network"] == "G") & (ff["subset"] == "test") & (ff["noise"] == a)]
    gw = gw.groupby("width")["acc"].mean()
    trend = (f"; FF's G test rises {gw.iloc[0]:.0%} → {gw.iloc[-1]:.0%} from M = "
             f"{gw.index[0]} to {gw.index[-1]}") if len(gw) > 1 else ""
    if w0 is None:
        here, verdict = f"no width interpolates the noisy labels at α = {a:g}", NOT
    else:
        rise = float(test.loc[M] - test.loc[w0])
        here = (f"raw test {test.loc[w0]:.1%} at the interpolation width M = {w0}, "
                f"{test.loc[M]:.1%} at M = {M} (chance {1 / p:.1%})" + trend)
        verdict = REPRODUCED if rise >= 0.05 else NOT
    rows.append((f"over-parameterized: wider is better even at α = {a:g} (M.4.1)",
                 "second descent: test rises with width up to M = 4097", here, verdict))
    return pd.DataFrame(rows, columns=["claim", "paper", "here", "verdict"])


def print_findings(console: Console, table: pd.DataFrame) -> None:
    grid = Table(title="study M findings beside the paper's", header_style="bold",
                 show_lines=True)
    for col, ratio in (("claim", 3), ("paper", 3), ("here", 5), ("verdict", 2)):
        grid.add_column(col, ratio=ratio)
    for row in table.itertuples(index=False):
        grid.add_row(*map(str, row))
    console.print(grid)


def coexistence(*, scale: str, out: Path | None, lab, device: str, quiet: bool, train,
                console: Console) -> None:
    """Run the study-M preset ``scale`` into ``lab``, analyze, print findings, write a report."""
    from rulelab.analysis.m_tables import dd_table, ff_table, neurons_table, order_table, swap_table
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
    dd, order = dd_table(runs), order_table(runs, metrics)
    the_lab.write_table("dd", "all", dd)
    the_lab.write_table("order", "all", order)
    found = findings(runs, order, tables["ff"], tables["swap"], tables["neurons"])
    t_all = time.perf_counter() - t0
    print_findings(console, found)
    console.print(f"wall time: training {t_train:.0f} s, all {t_all:.0f} s; {preset.note}")
    from rulelab.report.figures_m import write_coexistence_report

    path = write_coexistence_report(
        out, title=f"Memorization–generalization coexistence — {scale} reproduction",
        runs=runs, metrics=metrics, tables=dict(tables, dd=dd, order=order), found=found,
        notes=[("What this reproduction is", preset.note),
               ("Wall time", f"training {t_train:.0f} s, training + analyses {t_all:.0f} s "
                f"on {device} (a resumed run counts only the rest).")])
    console.print(f"report: {path}")

