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


def _run(lab, name: str, analysis, epochs: str, task: str = "mpsp") -> pd.DataFrame:
    from rulelab.analysis.stored import analyze_stored
    from rulelab.cli import UserError
    from rulelab.store import StoreError

    try:
        return analyze_stored(lab, name, analysis, task=task, epochs=_check_epochs(epochs),
                              on_step=lambda m: err_console.print(m, style="dim"))
    except StoreError as e:
        raise UserError(str(e)) from None


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

    frame = _run(_lab(lab), "gradients", lambda tr: gradient_conflict(tr.model, tr.data), epochs)
    overall = frame[frame["module"] == "all"]
    summary = (overall.groupby(["layers", "ratio", "epoch"])
               .agg(n=("run_id", "size"), cos=("cos", "mean"),
                    amplification=("amplification", "mean"), odds=("odds", "mean"))
               .reset_index())
    print_frame("gradient conflict (all parameters; mean over seeds)", summary)


@analyze_app.command("ablation")
def analyze_ablation(lab: Path | None = LabOpt, epochs: str = EpochsOpt) -> None:
    """Zero / mean ablation of each head and MLP at CLS or all positions (SPEC S.4.3)."""
    from rulelab.analysis.ablation import ablation_table

    frame = _run(_lab(lab), "ablation", lambda tr: ablation_table(tr.model, tr.data), epochs)
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
    table = phase_table(the_lab.read_metrics(list(runs["run_id"])))
    cols = [c for c in ("layers", "heads", "ratio", "weight_decay", "seed") if c in runs.columns]
    table = table.merge(runs[["run_id", *cols]], on="run_id", how="left")
    the_lab.write_table("phases", "all", table)
    shown = [*cols, "phase1_epoch", "phase2_onset", "gen_epoch", "transient"]
    print_frame("phases per run", table[[c for c in shown if c in table.columns]])


@analyze_app.command("patching")
def analyze_patching(lab: Path | None = LabOpt, epochs: str = EpochsOpt,
                     n: int = typer.Option(256, "--n", help="adv/twin pairs per member")) -> None:
    """Cross-split patching from aligned twins into adv sequences (SPEC S.4.4)."""
    from rulelab.analysis.s_tables import patching_table

    frame = _run(_lab(lab), "patching", lambda tr: patching_table(tr, n), epochs)
    summary = (frame[frame["kind"].isin(["z_all", "mlp_out_all"])]
               .groupby(["layers", "ratio", "epoch", "kind", "layer", "head"])["value"]
               .mean().reset_index())
    print_frame("patching: normalised logit difference recovered (1 = twin), mean over seeds",
                summary)


@analyze_app.command("fingerprints")
def analyze_fingerprints(lab: Path | None = LabOpt, epochs: str = EpochsOpt) -> None:
    """QK magnitude ρ, attention on x₁ and OV parity ρ per head (SPEC S.4.5)."""
    from rulelab.analysis.s_tables import fingerprint_table

    frame = _run(_lab(lab), "fingerprints", fingerprint_table, epochs)
    summary = (frame.groupby(["layers", "ratio", "epoch", "layer", "head"])
               [["qk_rho", "first_mass", "ov_parity_rho"]].mean().reset_index())
    print_frame("fingerprints per head (mean over seeds)", summary)


from rulelab.cli_analyze_m import register  # noqa: E402  (study M: ff, swap, neurons, order, dd)

register(analyze_app)
