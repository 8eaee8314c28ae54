"""Study M commands: ``rulelab analyze ff|swap|neurons|order|dd`` and ``rulelab train digits``.

The analyze commands register on :data:`rulelab.cli_analyze.analyze_app` through
:func:`register` (called at the end of that module); ``train digits`` is registered in
:mod:`rulelab.cli`. Helpers of both modules are imported inside the commands, so importing this
module never triggers an import cycle. Each analysis is stored under
``<lab>/analyses/<name>/`` and summarized (mean over seeds) in a rich table.
"""

from __future__ import annotations

from pathlib import Path

import typer

from rulelab.cli_checks import print_warnings

LabOpt = typer.Option(None, "--lab", help="Lab directory (default $RULELAB_HOME or ./rulelab-runs)")
EpochsOpt = typer.Option("final", "--epochs",
                         help="final, all (every stored snapshot), or a comma list of epochs")


def _cli():
    from rulelab.cli_modular import _cli

    return _cli()


def _ca():
    import rulelab.cli_analyze as ca

    return ca


def _show(title: str, frame) -> None:
    """``print_frame`` with integer-valued columns (width, epoch, …) shown as integers."""
    frame = frame.copy()
    for col in ("width", "hidden", "epoch", "p", "n"):
        if col in frame.columns:
            frame[col] = frame[col].map(lambda v: v if v != v else int(v))  # NaN stays
    _ca().print_frame(title, frame)


def analyze_ff(lab: Path | None = LabOpt, epochs: str = EpochsOpt) -> None:
    """Frequency filtering: original vs G (dominant frequency) vs R (residual) (SPEC M.4.3)."""
    from rulelab.analysis.m_tables import ff_summary, ff_table

    ca = _ca()
    frame = ca._run(lab, "ff", ff_table, epochs, task="modular")
    _show("FF: test accuracy (mean over seeds)", ff_summary(frame, "test"))
    if (frame["noise"] > 0).any():
        _show("FF: noisy-train accuracy vs the corrupted labels (memorization)",
                       ff_summary(frame[frame["noise"] > 0], "train_noisy"))
    cols = [c for c in ("phase_error", "phase_error_weighted") if c in frame.columns]
    phase = frame.groupby(["noise", "width"])[cols].mean().reset_index()
    _show("phase-sum error |φa ± φb − φc| (radians, mean over seeds; over neurons: plain, and "
          "weighted by each neuron's power at its frequency)", phase)


def analyze_swap(lab: Path | None = LabOpt, epochs: str = EpochsOpt) -> None:
    """Activation swap: trained weights scored with every activation (SPEC M.4.4)."""
    from rulelab.analysis.m_tables import swap_summary, swap_table

    ca = _ca()
    frame = ca._run(lab, "swap", swap_table, epochs, task="modular")
    _show("swap: test accuracy (mean over seeds)", swap_summary(frame, "test"))
    if (frame["noise"] > 0).any():
        _show("swap: noisy-train accuracy vs the corrupted labels",
                       swap_summary(frame[frame["noise"] > 0], "train_noisy"))


def analyze_neurons(
    lab: Path | None = LabOpt,
    epochs: str = EpochsOpt,
    k_frac: float = typer.Option(0.5, "--k-frac", help="share of neurons in the top (rule) "
                                 "subnetwork; the rest form the bottom one, in [0, 1]"),
) -> None:
    """IPR and strength scores, top-k / bottom partition, pruning curves (SPEC M.4.5)."""
    from rulelab.analysis.m_tables import best_pruned, neurons_table, partition_summary

    ca = _ca()
    if not 0.0 <= k_frac <= 1.0:
        raise _cli().UserError(f"--k-frac: {k_frac} is not allowed; it must lie in [0, 1]")
    frame = ca._run(lab, "neurons", lambda tr: neurons_table(tr, k_frac), epochs,
                    task="modular")
    _show(f"partition (k = {k_frac:g}·M): test accuracy (mean over seeds)",
                   partition_summary(frame, "test"))
    best = best_pruned(frame).groupby(["score", "noise", "width"])["acc"].mean().reset_index()
    _show("best top-first pruned subnetwork: test accuracy", best)


def analyze_order(
    lab: Path | None = LabOpt,
    window: float = typer.Option(
        100, "--window", help="T: read the early lead over the first T steps (> 0); "
        "the paper's modular window is ≈ 200 steps, its MNIST reading epochs 1–2"),
) -> None:
    """Learning order (SPEC M.4.2): the early lead of noisy- over clean-train accuracy over the
    first T steps (mean lead, first-evaluation lead, loss-decrease rates; every run with α > 0
    counts), beside the old first-step-at-50% reading with its own n."""
    from rulelab.analysis.m_order import order_display, order_summary, order_table

    ca = _ca()
    if not window > 0 or window != window or window == float("inf"):
        raise _cli().UserError(f"--window: {window} is not allowed; give a number of steps > 0")
    the_lab = ca._lab(lab)
    runs = the_lab.runs()
    runs = runs[runs["task"].isin(["modular", "digits"])] if "task" in runs else runs
    if runs.empty:
        raise _cli().UserError(f"--lab: {the_lab.root} has no modular or digits runs to analyze")
    runs = _finished(the_lab, runs, "modular or digits")
    table = order_table(runs, the_lab.read_metrics(list(runs["run_id"])), window=window)
    the_lab.write_table("order", "all", table)
    new, old = order_display(order_summary(table))
    _show(f"learning order: early lead over the first {window:g} steps (runs with α > 0; "
          "points = noisy-train acc vs corrupted labels − clean-train acc)", new)
    _show("learning order, old reading: first step at 50% (its own n)", old)


def analyze_dd(lab: Path | None = LabOpt) -> None:
    """Double descent: final test accuracy vs width with seed spread, and its dip (SPEC M.4.1)."""
    from rulelab.analysis.dd_dip import DIP_COLUMNS, dip_reading
    from rulelab.analysis.m_tables import dd_table

    ca = _ca()
    the_lab = ca._lab(lab)
    runs = the_lab.runs()
    runs = runs[runs["task"] == "modular"] if "task" in runs else runs
    if runs.empty:
        raise _cli().UserError(f"--lab: {the_lab.root} has no modular runs to analyze")
    runs = _finished(the_lab, runs, "modular")
    table = dd_table(runs.dropna(axis=1, how="all"))
    the_lab.write_table("dd", "all", table)
    _show("double descent: final test accuracy vs width (over seeds)", table)
    dips = dip_reading(table)
    _show("double descent: the dip (called only beyond the seed spread)",
          dips[[c for c in dips.columns if c not in DIP_COLUMNS or c == "reading"]])


def _finished(the_lab, runs, what: str):
    """The finished (done or failed) rows of ``runs``; unfinished ones are named in one
    warning line, and none finished is one error line."""
    unfinished = runs[~runs["status"].isin(["done", "failed"])]
    ids = ", ".join(unfinished["run_id"].head(5)) + (
        f" and {len(unfinished) - 5} more" if len(unfinished) > 5 else "")
    if len(unfinished) == len(runs):
        raise _cli().UserError(f"--lab: {the_lab.root} has no finished {what} runs to analyze "
                               f"({len(runs)} unfinished: {ids}); finish them first")
    if len(unfinished):
        the_lab.warn(f"{len(unfinished)} unfinished {what} run(s) left out: {ids}")
        print_warnings(the_lab)
    return runs[runs["status"].isin(["done", "failed"])]


def register(app: typer.Typer) -> None:
    """Add the study-M analyses to the ``analyze`` app."""
    for name, fn in (("ff", analyze_ff), ("swap", analyze_swap), ("neurons", analyze_neurons),
                     ("order", analyze_order), ("dd", analyze_dd)):
        app.command(name)(fn)


def train_digits(
    noise: list[float] = typer.Option([0.05, 0.2], "--noise", help="label-noise level(s) α"),
    mnist_dir: Path | None = typer.Option(None, "--mnist-dir", help="folder with MNIST IDX files "
                                          "(train-images-idx3-ubyte[.gz] …); default: "
                                          "scikit-learn's bundled 8×8 digits"),
    n_train: int = typer.Option(0, "--n-train", help="use the first N training images; 0 = all"),
    hidden: int = typer.Option(256, "--hidden", help="width of both hidden layers"),
    activation: str = typer.Option("relu", "--activation", help="relu, gelu or tanh"),
    lr: list[float] = typer.Option([1e-3], "--lr"),
    weight_decay: list[float] = typer.Option([0.01], "--weight-decay"),
    epochs: int = typer.Option(200, "--epochs", help="full-batch steps"),
    eval_every: int = typer.Option(1, "--eval-every"),
    seeds: int = typer.Option(1, "--seeds", help="number of model seeds"),
    seed_start: int = typer.Option(0, "--seed-start"),
    data_seed: list[int] = typer.Option([0], "--data-seed"),
    device: str = typer.Option("cpu", "--device"),
    max_members: int = typer.Option(64, "--max-members", help="most runs per ensemble"),
    checkpoint_every: int = typer.Option(100, "--checkpoint-every", help="steps"),
    experiment: str = typer.Option("digits", "--experiment"),
    lab: Path | None = LabOpt,
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
) -> None:
    """Digits / MNIST learning order: a 3-layer MLP, full batch, label noise (SPEC M.4.7)."""
    from rulelab.config.digits import DigitsRunConfig
    from rulelab.grid import expand_grid
    from rulelab.tasks.digits import digits_from_config

    cli = _cli()
    for flag, value, low in (("--seeds", seeds, 1), ("--seed-start", seed_start, 0),
                             ("--max-members", max_members, 1), ("--n-train", n_train, 0),
                             ("--checkpoint-every", checkpoint_every, 1)):
        cli._positive(flag, value, low)
    cli._check_device(device)
    axes = {"noise": noise, "lr": lr, "weight_decay": weight_decay, "data_seed": data_seed}
    fixed = dict(source="mnist" if mnist_dir else "sklearn", n_train=n_train, hidden=hidden,
                 mnist_dir=str(mnist_dir) if mnist_dir else None, activation=activation,
                 epochs=epochs, eval_every=eval_every)
    configs = expand_grid(DigitsRunConfig, axes, fixed, range(seed_start, seed_start + seeds))
    try:
        digits_from_config(configs[0])  # missing files or scikit-learn: one line, before writes
    except (OSError, ValueError, ImportError) as e:
        flag = "--mnist-dir" if mnist_dir else "--source"
        raise cli.UserError(f"{flag}: {e}") from None
    cli._train(configs, lab=lab, experiment=experiment, device=device, max_members=max_members,
               checkpoint_every=checkpoint_every, quiet=quiet)
