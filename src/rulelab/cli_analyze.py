"""``rulelab analyze …``: analyses over a lab's stored runs (SPEC S.4, M.4).

Each command loads the finished runs' ensembles (final weights, or weight snapshots with
``--epochs all``), runs one analysis over all members at once, stores a tidy table under
``<lab>/analyses/<name>/`` and prints a short summary.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

analyze_app = typer.Typer(no_args_is_help=True, help="Analyses on stored runs.")
console = Console(width=140)
err_console = Console(stderr=True)

LabOpt = typer.Option(None, "--lab", help="Lab directory (default $RULELAB_HOME or ./rulelab-runs)")
EpochsOpt = typer.Option("final", "--epochs",
                         help="final, all (every stored snapshot), or a comma list of epochs")


def _lab(lab: Path | None):
    from rulelab.cli import _open_lab

    return _open_lab(lab, create=False)


def _check_epochs(epochs: str) -> str:
    from rulelab.cli import UserError

    ok = epochs in ("final", "all") or all(e.strip().isdigit() for e in epochs.split(","))
    if not ok:
        raise UserError(f"--epochs: {epochs!r} is not allowed; use final, all or e.g. 0,100,500")
    return epochs


def _run(lab: Path | None, name: str, analysis, epochs: str, task: str = "mpsp"
         ) -> pd.DataFrame:
    """Validate ``--epochs``, then open the lab (nothing is opened for a bad flag), analyse
    and store; damaged rows or files met on the way are printed as warnings."""
    from rulelab.analysis.stored import analyze_stored
    from rulelab.cli_checks import UserError, print_warnings
    from rulelab.store import StoreError

    epochs = _check_epochs(epochs)
    the_lab = _lab(lab)
    try:
        return analyze_stored(the_lab, name, analysis, task=task, epochs=epochs,
                              on_step=lambda m: err_console.print(m, style="dim",
                                                                  markup=False))
    except StoreError as e:
        raise UserError(str(e)) from None
    finally:
        print_warnings(the_lab)


def print_frame(title: str, frame: pd.DataFrame, digits: int = 3) -> None:
    """A DataFrame as a rich table (numbers rounded)."""
    table = Table(title=title, header_style="bold")
    for c in frame.columns:
        table.add_column(str(c), justify="right")
    for _, row in frame.iterrows():
        table.add_row(*[f"{v:.{digits}g}" if isinstance(v, float) else str(v) for v in row])
    console.print(table)


@analyze_app.command("gradients")
def analyze_gradients(lab: Path | None = LabOpt, epochs: str = EpochsOpt) -> None:
    """cos(g+, g−) and ‖g−‖/‖g+‖ per module (SPEC S.4.1–2), beside r/(1−r)."""
    from rulelab.analysis.gradients import gradient_conflict

    frame = _run(lab, "gradients", lambda tr: gradient_conflict(tr.model, tr.data), epochs)
    print_gradient_summary(frame)


def print_gradient_summary(frame: pd.DataFrame, by=("layers", "ratio", "epoch")) -> None:
    """Median readings per group with ε and the identity-dominated count (issue 8)."""
    from rulelab.analysis.identity import EPS_IDENTITY, identity_bounds
    from rulelab.analysis.s_tables import gradient_summary

    summary = gradient_summary(frame, by)
    if "eps" in summary.columns:  # mark readings the identity g = r·g+ + (1−r)·g− pins down
        pinned = summary["eps"] < EPS_IDENTITY
        for col in ("cos", "amplification"):
            summary[col] = [f"{v:.3g}{' †' if p else ''}" for v, p in
                            zip(summary[col], pinned, strict=True)]
    summary = summary.drop(columns=["norm_plus", "norm_minus"], errors="ignore").rename(
        columns={"example_norm_plus": "‖∇ℓ_i‖ S+", "example_norm_minus": "‖∇ℓ_i‖ S−"})
    print_frame("gradient conflict and amplification (all parameters; median over seeds)",
                summary)
    lo, hi, cmax = identity_bounds(EPS_IDENTITY)
    console.print(f"† identity-dominated (median ε = ‖g‖/(r‖g+‖) < {EPS_IDENTITY}): "
                  f"g = r·g+ + (1−r)·g− alone puts ‖g−‖/‖g+‖ within {lo:.2f}–{hi:.2f} × r/(1−r) "
                  f"and cos(g+, g−) ≤ {cmax:.3f}, so these readings do not show a mechanism. "
                  "identity_dominated: runs with ε below the threshold; ‖∇ℓ_i‖: mean "
                  "per-example gradient norm per group.", style="dim")


@analyze_app.command("ablation")
def analyze_ablation(lab: Path | None = LabOpt, epochs: str = EpochsOpt) -> None:
    """Zero / mean ablation of each head and MLP at CLS or all positions (SPEC S.4.3)."""
    from rulelab.analysis.ablation import ablation_table

    frame = _run(lab, "ablation", lambda tr: ablation_table(tr.model, tr.data), epochs)
    mean = frame[(frame["method"] == "mean") & (frame["where"] == "cls")]
    summary = (mean.groupby(["layers", "ratio", "epoch", "layer", "component"])
               [["d_val_acc", "d_adv_acc"]].mean().reset_index())
    print_frame("mean ablation at CLS: Δ accuracy (mean over seeds)", summary)


@analyze_app.command("phases")
def analyze_phases(lab: Path | None = LabOpt) -> None:
    """Phase-1 and phase-2 onset epochs and transient flags from stored curves (SPEC S.4.6)."""
    from rulelab.analysis.phases import phase_table

    the_lab = _lab(lab)
    runs = the_lab.runs()
    table = phase_table(the_lab.read_metrics(list(runs["run_id"])), runs=runs)  # k, r per run
    cols = [c for c in ("layers", "heads", "ratio", "weight_decay", "seed") if c in runs.columns]
    table = table.merge(runs[["run_id", *cols]], on="run_id", how="left")
    the_lab.write_table("phases", "all", table)
    shown = [*cols, "phase1_epoch", "phase1_map", "phase2_onset", "phase2_censored", "gen_epoch",
             "transient"]
    print_frame("phases per run", table[[c for c in shown if c in table.columns]])


@analyze_app.command("patching")
def analyze_patching(lab: Path | None = LabOpt, epochs: str = EpochsOpt,
                     n: int = typer.Option(256, "--n", help="adv/twin pairs per member")) -> None:
    """Cross-split patching from aligned twins into adv sequences (SPEC S.4.4)."""
    from rulelab.analysis.s_tables import patching_table
    from rulelab.cli import UserError

    if not 1 <= n <= 1_000_000:
        raise UserError(f"--n: {n} is not allowed; use 1 to 1000000 pairs per member")
    frame = _run(lab, "patching", lambda tr: patching_table(tr, n), epochs)
    print_patching_summary(frame, lab)


def print_patching_summary(frame: pd.DataFrame, lab: Path | None) -> None:
    """Medians over runs, split by whether each run generalized (issue 8)."""
    from rulelab.analysis.patching import REL_GAP
    from rulelab.analysis.s_tables import patching_summary
    from rulelab.train.summary_frames import upgrade_runs

    the_lab = _lab(lab)
    runs = upgrade_runs(the_lab.runs(), the_lab.read_metrics)
    summary = patching_summary(frame, runs).drop(columns=["pos"])
    print_frame("patching: normalised logit difference recovered (1 = twin), median over runs "
                "by outcome", summary)
    console.print(f"outcome: the run's generalized flag (val and adv 100% at one evaluation); "
                  f"n_nan: runs without a score (twin–original gap < {REL_GAP:g} × "
                  "(|LD_twin| + |LD_orig|))", style="dim")


@analyze_app.command("fingerprints")
def analyze_fingerprints(lab: Path | None = LabOpt, epochs: str = EpochsOpt) -> None:
    """QK magnitude ρ, attention on x₁ and OV parity ρ per head (SPEC S.4.5)."""
    from rulelab.analysis.s_tables import fingerprint_table

    frame = _run(lab, "fingerprints", fingerprint_table, epochs)
    cols = [c for c in ("qk_rho", "first_mass", "ov_parity_rho", "ov_probe_acc") if c in frame]
    summary = (frame.groupby(["layers", "ratio", "epoch", "layer", "head"])[cols]
               .mean().reset_index())
    print_frame("fingerprints per head (mean over seeds)", summary)
    console.print("ov_parity_rho reads the head's direct path to the logits; ov_probe_acc: "
                  "held-out-value linear probe of v mod k on what the head writes (any "
                  "reader; chance ≈ 1/k)", style="dim")


from rulelab.cli_analyze_m import register  # noqa: E402  (study M: ff, swap, neurons, order, dd)

register(analyze_app)
