"""``rulelab data modular`` and ``rulelab train modular`` (study M, SPEC M.1–M.3).

Registered on the ``data`` / ``train`` apps in :mod:`rulelab.cli`. This module does not import
:mod:`rulelab.cli` at import time (that module imports this one); the shared helpers are
imported inside the commands. Every value is validated (all grid configs built) before any
lab is opened or any file written.
"""

from __future__ import annotations

from pathlib import Path

import typer

from rulelab.cli_checks import check_out, write_out
from rulelab.config import ModularRunConfig, make_config
from rulelab.grid import expand_grid


def _cli():
    """:mod:`rulelab.cli`, imported lazily: it imports this module."""
    import rulelab.cli

    return rulelab.cli


LabOpt = typer.Option(None, "--lab", help="Lab directory (default $RULELAB_HOME or ./rulelab-runs)")


def data_modular(
    out: Path = typer.Option(..., "--out", help="Parquet file to write"),
    op: str = typer.Option("add", "--op", help="add, sub or mul: c = a ∘ b mod P"),
    p: int = typer.Option(97, "--p", help="modulus P ≥ 2 (prime for mul)"),
    drop_zero: bool = typer.Option(False, "--drop-zero", help="mul only: a, b ∈ [1, P)"),
    train_frac: float = typer.Option(0.5, "--train-frac", help="share of pairs in train, (0, 1]"),
    noise: list[float] = typer.Option([0.0], "--noise", help="α ∈ [0, 1]: share corrupted"),
    noise_mode: str = typer.Option("wrong", "--noise-mode", help="wrong, uniform or symmetric"),
    data_seed: list[int] = typer.Option([0], "--data-seed"),
) -> None:
    """Write modular-arithmetic train/test pairs with label noise (SPEC M.1), one row each."""
    from rulelab.tasks.modular import modular_from_config, write_parquet

    for flag, values in (("--noise", noise), ("--data-seed", data_seed)):
        if len(values) != 1:  # lists are split into repeated flags (MULTI_VALUE_FLAGS)
            raise _cli().UserError(f"{flag}: {len(values)} values given; data modular writes "
                                   "one data set, give one value")
    cfg = make_config(ModularRunConfig, op=op, p=p, drop_zero=drop_zero, train_frac=train_frac,
                      noise=noise[0], noise_mode=noise_mode, data_seed=data_seed[0])
    check_out("--out", out, ".parquet")
    data = modular_from_config(cfg)
    write_out(out, lambda path: write_parquet(data, path))
    _cli().console.print(f"wrote {out} (train {len(data.y_train)}, of which noisy {data.n_noisy}; "
                         f"test {len(data.y_test)})", markup=False, highlight=False)


def train_modular(
    op: str = typer.Option("add", "--op", help="add, sub or mul"),
    p: int = typer.Option(97, "--p", help="modulus P ≥ 2 (prime for mul)"),
    drop_zero: bool = typer.Option(False, "--drop-zero", help="mul only: a, b ∈ [1, P)"),
    train_frac: float = typer.Option(0.5, "--train-frac"),
    noise: list[float] = typer.Option([0.0], "--noise", help="label-noise level(s) α ∈ [0, 1]"),
    noise_mode: str = typer.Option("wrong", "--noise-mode", help="wrong, uniform or symmetric"),
    data_seed: list[int] = typer.Option([0], "--data-seed"),
    width: list[int] = typer.Option([257], "--width", help="hidden width(s) M (paper 2^j+1)"),
    activation: list[str] = typer.Option(
        ["relu"], "--activation",
        help="relu, quadratic, gelu, leaky_relu, reverse_relu or abs"),
    tied: bool = typer.Option(False, "--tied", help="U = V"),
    no_bias: bool = typer.Option(False, "--no-bias", help="no output bias μ"),
    init: str = typer.Option("inv_sqrt", "--init", help="inv_sqrt (1/√M) or doshi"),
    loss: str = typer.Option("ce", "--loss", help="ce or mse (on one-hot targets)"),
    optimizer: list[str] = typer.Option(["adamw"], "--optimizer", help="adamw, adam, sgd, muon"),
    lr: list[float] = typer.Option([1e-3], "--lr"),
    weight_decay: list[float] = typer.Option([0.1], "--weight-decay"),
    beta1: float = typer.Option(0.9, "--beta1"),
    beta2: float = typer.Option(0.98, "--beta2"),
    eps: float = typer.Option(1e-8, "--eps"),
    momentum: float | None = typer.Option(None, "--momentum",
                                          help="default 0.9 for sgd, 0.95 for muon"),
    nesterov: bool | None = typer.Option(None, "--nesterov/--no-nesterov",
                                         help="default on for muon, off for sgd"),
    ns_steps: int = typer.Option(5, "--ns-steps", help="Newton–Schulz steps (muon)"),
    epochs: int = typer.Option(20000, "--epochs", help="full-batch steps"),
    eval_every: int = typer.Option(100, "--eval-every"),
    log_eval_steps: int = typer.Option(100, "--log-eval-steps",
                                       help="every step up to here, then log-spaced; 0 = off"),
    seeds: int = typer.Option(1, "--seeds", help="number of model seeds"),
    seed_start: int = typer.Option(0, "--seed-start"),
    device: str = typer.Option("cpu", "--device"),
    max_members: int = typer.Option(64, "--max-members", help="most runs per ensemble"),
    checkpoint_every: int = typer.Option(1000, "--checkpoint-every", help="steps"),
    experiment: str = typer.Option("modular", "--experiment"),
    lab: Path | None = LabOpt,
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
) -> None:
    """Train modular-arithmetic MLPs over a grid of values × seeds (SPEC M.2–M.3).

    Runs that share every shape field (P, width, activation, optimizer, …) train as one
    ensemble; different widths are separate ensembles.
    """
    cli = _cli()
    cli._positive("--seeds", seeds)
    cli._positive("--seed-start", seed_start, 0)
    cli._positive("--max-members", max_members)
    cli._positive("--checkpoint-every", checkpoint_every)
    cli._check_device(device)
    axes = {"width": width, "activation": activation, "optimizer": optimizer, "noise": noise,
            "weight_decay": weight_decay, "lr": lr, "data_seed": data_seed}
    fixed = dict(op=op, p=p, drop_zero=drop_zero, train_frac=train_frac, noise_mode=noise_mode,
                 tied=tied, bias=not no_bias, init=init, loss=loss, beta1=beta1, beta2=beta2,
                 eps=eps, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps,
                 epochs=epochs, eval_every=eval_every, log_eval_steps=log_eval_steps)
    configs = expand_grid(ModularRunConfig, axes, fixed, range(seed_start, seed_start + seeds))
    cli._train(configs, lab=lab, experiment=experiment, device=device, max_members=max_members,
           checkpoint_every=checkpoint_every, quiet=quiet)
