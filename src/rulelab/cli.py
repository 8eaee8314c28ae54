"""``rulelab`` command line: data, train, runs, report, reproduce (typer + rich).

Every command validates all of its input first and reports a bad value as one line naming the
flag and what is allowed (exit code 2), before anything is written.
"""

from __future__ import annotations

import json
import math
import re
import sys
from functools import partial
from pathlib import Path

import typer
from rich.console import Console
from typer.exceptions import Abort, Exit, TyperException

from rulelab.cli_checks import (
    UserError,
    check_experiment,
    check_lab_path,
    check_out,
    check_path_flags,
    print_warnings,
    write_out,
)
from rulelab.config import ConfigError, MPSPRunConfig, make_config
from rulelab.grid import expand_grid, split_multi_value_flags
from rulelab.store import Lab, StoreError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="rulelab: when does a network learn the rule, a shortcut, or noise?")
data_app = typer.Typer(no_args_is_help=True, help="Generate task data.")
train_app = typer.Typer(no_args_is_help=True, help="Train ensembles of runs into a lab.")
reproduce_app = typer.Typer(no_args_is_help=True, help="Reproduce a study end to end.")
app.add_typer(data_app, name="data")
app.add_typer(train_app, name="train")
app.add_typer(reproduce_app, name="reproduce")

MULTI_VALUE_FLAGS = {"--ratio", "--weight-decay", "--lr", "--layers", "--heads", "--data-seed",
                     "--width", "--noise", "--activation", "--optimizer"}
# Wide enough for the rate table when piped (rich would wrap it at 80 columns).
console = Console() if sys.stdout.isatty() else Console(width=140)
err_console = Console(stderr=True)

LabOpt = typer.Option(None, "--lab", help="Lab directory (default $RULELAB_HOME or ./rulelab-runs)")


def _check_device(device: str) -> str:
    import torch

    if not re.fullmatch(r"cpu|cuda(:\d+)?|mps", device):
        raise UserError(f"--device: {device!r} is not allowed; use cpu, cuda or cuda:N")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device: {device!r} is not available on this machine; use cpu")
    return device


def _open_lab(lab: Path | None, *, create: bool) -> Lab:
    try:
        return Lab(lab, create=create)
    except StoreError as e:
        raise UserError(str(e)) from None


def _positive(name: str, value: int, low: int = 1) -> int:
    if value < low:
        raise UserError(f"{name}: {value} is not allowed; it must be ≥ {low}")
    return value


# --- data ------------------------------------------------------------------------------------
@data_app.command("mpsp")
def data_mpsp(
    out: Path = typer.Option(..., "--out", help="Parquet file to write"),
    label_mod: int = typer.Option(2, "--label-mod", help="k ∈ {2, 3}: label = sum mod k"),
    shortcut: str = typer.Option("max", "--shortcut", help="max or first"),
    ratio: float = typer.Option(0.9, "--ratio", help="spurious ratio r ∈ [0, 1]"),
    seq_len: int = typer.Option(10, "--seq-len"),
    vocab: int = typer.Option(64, "--vocab"),
    n_train: int = typer.Option(16384, "--n-train"),
    n_eval: int = typer.Option(4096, "--n-eval"),
    data_seed: int = typer.Option(0, "--data-seed"),
) -> None:
    """Write MPSP train/val/adv examples (SPEC S.1), one row per example."""
    from rulelab.tasks.mpsp import write_parquet

    cfg = make_config(MPSPRunConfig, label_mod=label_mod, shortcut=shortcut, ratio=ratio,
                      seq_len=seq_len, vocab=vocab, n_train=n_train, n_eval=n_eval,
                      data_seed=data_seed)
    check_out("--out", out, ".parquet")
    splits = _mpsp_data(cfg)
    write_out(out, lambda path: write_parquet(splits, path))
    counts = ", ".join(f"{k} {len(v)}" for k, v in splits.items())
    console.print(f"wrote {out} ({counts})", markup=False, highlight=False)


def _mpsp_data(cfg):
    from rulelab.tasks.mpsp import mpsp_from_config

    try:
        return mpsp_from_config(cfg)
    except ValueError as e:
        raise UserError(f"--n-train/--n-eval: {cfg.n_train}/{cfg.n_eval} not allowed with "
                        f"--vocab {cfg.vocab} --seq-len {cfg.seq_len}: "
                        f"{str(e).splitlines()[0]}") from None


# --- train -----------------------------------------------------------------------------------
@train_app.command("mpsp")
def train_mpsp(
    label_mod: int = typer.Option(2, "--label-mod", help="k ∈ {2, 3}"),
    shortcut: str = typer.Option("max", "--shortcut", help="max or first"),
    ratio: list[float] = typer.Option([0.9], "--ratio", help="spurious ratio(s) r ∈ [0, 1]"),
    layers: list[int] = typer.Option([2], "--layers"),
    heads: list[int] = typer.Option([2], "--heads"),
    d_model: int = typer.Option(64, "--d-model"),
    d_mlp: int = typer.Option(128, "--d-mlp"),
    act: str = typer.Option("relu", "--act", help="relu or gelu"),
    no_ln: bool = typer.Option(False, "--no-ln", help="no LayerNorm"),
    seq_len: int = typer.Option(10, "--seq-len"),
    vocab: int = typer.Option(64, "--vocab"),
    n_train: int = typer.Option(16384, "--n-train"),
    n_eval: int = typer.Option(4096, "--n-eval"),
    epochs: int = typer.Option(15000, "--epochs"),
    lr: list[float] = typer.Option([1e-3], "--lr"),
    weight_decay: list[float] = typer.Option([0.1], "--weight-decay"),
    warmup: int = typer.Option(0, "--warmup"),
    seeds: int = typer.Option(1, "--seeds", help="number of model seeds"),
    seed_start: int = typer.Option(0, "--seed-start"),
    data_seed: list[int] = typer.Option([0], "--data-seed"),
    batch_size: int = typer.Option(0, "--batch-size", help="0 = full batch"),
    eval_every: int = typer.Option(10, "--eval-every"),
    device: str = typer.Option("cpu", "--device"),
    max_members: int = typer.Option(64, "--max-members", help="most runs per ensemble"),
    checkpoint_every: int = typer.Option(500, "--checkpoint-every", help="epochs"),
    experiment: str = typer.Option("mpsp", "--experiment"),
    track: str = typer.Option("", "--track", help="analyses during training: "
                              "gradients,fingerprints,ablation"),
    track_every: str = typer.Option("log", "--track-every", help="log or an epoch interval"),
    snapshots: int = typer.Option(0, "--snapshots", help="keep weights at ~N log-spaced epochs"),
    lab: Path | None = LabOpt,
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
) -> None:
    """Train MPSP transformers over a grid of values × seeds, packed into ensembles."""
    _positive("--seeds", seeds)
    _positive("--seed-start", seed_start, 0)
    _positive("--max-members", max_members)
    _positive("--checkpoint-every", checkpoint_every)
    _check_device(device)
    tracked = _check_track(track, track_every)
    _positive("--snapshots", snapshots, 0)
    axes = {"layers": layers, "heads": heads, "ratio": ratio, "weight_decay": weight_decay,
            "lr": lr, "data_seed": data_seed}
    fixed = dict(label_mod=label_mod, shortcut=shortcut, d_model=d_model, d_mlp=d_mlp, act=act,
                 ln=not no_ln, seq_len=seq_len, vocab=vocab, n_train=n_train, n_eval=n_eval,
                 epochs=epochs, warmup=warmup, batch_size=batch_size, eval_every=eval_every)
    configs = expand_grid(MPSPRunConfig, axes, fixed, range(seed_start, seed_start + seeds))
    _train(configs, lab=lab, experiment=experiment, device=device, max_members=max_members,
           checkpoint_every=checkpoint_every, quiet=quiet, track=tracked,
           track_every=track_every, snapshots=snapshots)


def _check_track(track: str, every: str) -> tuple[str, ...]:
    from rulelab.train.tracking import TRACKERS

    names = tuple(n.strip() for n in track.split(",") if n.strip())
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        raise UserError(f"--track: {','.join(unknown)} is not allowed; use a comma list of "
                        f"{', '.join(sorted(TRACKERS))}")
    if every != "log" and not (every.isdigit() and int(every) > 0):
        raise UserError(f"--track-every: {every!r} is not allowed; use log or a positive integer")
    return names


def _train(configs, *, lab, experiment, device, max_members, checkpoint_every, quiet,
           track=(), track_every="log", snapshots=0) -> Lab:
    from rulelab.progress import RichProgress
    from rulelab.sweep.estimate import oversized
    from rulelab.train.ensemble import TrainOptions
    from rulelab.train.runner import RunOptions, memory_cap, run_configs

    check_experiment(experiment)
    check_lab_path(lab)
    for cfg in configs:  # data errors (e.g. a sequence space too small) before any write
        if cfg.task == "mpsp":
            _mpsp_data(cfg)
    too_big = oversized(configs, device)  # before anything is registered or allocated
    if too_big:
        raise UserError(too_big)
    the_lab = _open_lab(lab, create=True)
    cap = memory_cap(configs, device)
    options = RunOptions(TrainOptions(device=device), max_members=min(max_members, cap),
                         checkpoint_every=checkpoint_every, track=track, track_every=track_every,
                         snapshots=snapshots)
    capped = f" (at most {cap} per ensemble: memory)" if cap < max_members else ""

    def header() -> None:
        err_console.print(f"{len(configs)} runs → lab {the_lab.root}{capped}", markup=False,
                          highlight=False)

    try:
        run_configs(configs, the_lab, experiment=experiment, options=options,
                    progress=None if quiet else RichProgress(err_console), on_start=header)
    except StoreError as e:  # a corrupt checkpoint, a full disk, another writer holding the lab
        raise UserError(str(e)) from None
    return the_lab


# --- runs / report ---------------------------------------------------------------------------
def _clean(obj):
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    return obj


@app.command("runs")
def runs_cmd(
    lab: Path | None = LabOpt,
    as_json: bool = typer.Option(False, "--json", help="one JSON object per run"),
) -> None:
    """One row per configuration: seeds, generalization rate, 95% Wilson CI."""
    the_lab = _open_lab(lab, create=False)
    try:
        if as_json:
            print(json.dumps([_clean(r) for r in the_lab.runs_json()], indent=1))
            the_lab.check_metrics_files(the_lab.runs())
            return
        _print_runs(the_lab)
    except StoreError as e:
        raise UserError(str(e)) from None
    finally:
        print_warnings(the_lab)


def _print_runs(the_lab: Lab) -> None:
    """The rate table of ``rulelab runs``; finished runs without a metrics file are named."""
    from rulelab.tables import print_rate_table

    runs = the_lab.runs()
    the_lab.check_metrics_files(runs)
    print_rate_table(console, runs, metrics=partial(the_lab.read_metrics,  # old labs: S.3
                                                    skip_damaged=True))


@app.command("report")
def report_cmd(
    out: Path = typer.Option(Path("report.html"), "--out", help="HTML file to write"),
    lab: Path | None = LabOpt,
) -> None:
    """Write one self-contained HTML report with figures for the lab."""
    from rulelab.report.html import write_report

    check_out("--out", out)
    the_lab = _open_lab(lab, create=False)
    try:
        runs = the_lab.runs()
        the_lab.check_metrics_files(runs)
        metrics = the_lab.read_metrics(skip_damaged=True)  # a damaged file: report the rest
        analyses = {name: the_lab.read_table(name)
                    for name in ("gradients", "ablation", "patching", "fingerprints", "phases")}
        path = write_report(out, title=f"rulelab report — {the_lab.root.name}", runs=runs,
                            metrics=metrics, analyses=analyses)
    except StoreError as e:
        raise UserError(str(e)) from None
    finally:
        print_warnings(the_lab)
    console.print(f"wrote {path}", markup=False, highlight=False)


@reproduce_app.command("shortcut-saturation")
def reproduce_s(
    scale: str = typer.Option("quick", "--scale", help="quick or paper"),
    out: Path = typer.Option(Path("reports/shortcut-saturation.html"), "--out"),
    lab: Path | None = LabOpt,
    device: str = typer.Option("cpu", "--device"),
    quiet: bool = typer.Option(False, "--quiet"),
) -> None:
    """Study S: 1L vs 2L at r = 0.5 and 0.9 over seeds, beside the paper (SPEC S.3)."""
    from rulelab.reproduce import shortcut_saturation

    _check_device(device)
    check_out("--out", out)
    try:
        shortcut_saturation(scale=scale, out=out, lab=lab, device=device, quiet=quiet,
                            train=_train, console=console)
    except StoreError as e:  # reading the lab back or writing the report
        raise UserError(str(e)) from None


from rulelab.cli_modular import data_modular, train_modular  # noqa: E402

data_app.command("modular")(data_modular)
train_app.command("modular")(train_modular)


@reproduce_app.command("coexistence")
def reproduce_m(scale: str = typer.Option("quick", "--scale", help="tiny, quick or paper"),
                out: Path | None = typer.Option(None, "--out", help="default "
                                                "reports/coexistence-<scale>.html"),
                lab: Path | None = LabOpt, device: str = typer.Option("cpu", "--device"),
                quiet: bool = typer.Option(False, "--quiet")) -> None:
    """Study M: FF, swap, partition, learning order and double descent beside the paper."""
    from rulelab.reproduce_m import coexistence

    check_out("--out", out or Path(f"reports/coexistence-{scale}.html"))
    try:
        coexistence(scale=scale, out=out, lab=lab, device=_check_device(device), quiet=quiet,
                    train=_train, console=console)
    except StoreError as e:  # reading the lab back or writing the report
        raise UserError(str(e)) from None


from rulelab.cli_analyze_m import train_digits  # noqa: E402

train_app.command("digits")(train_digits)


from rulelab.cli_analyze import analyze_app  # noqa: E402  (commands register on import)

app.add_typer(analyze_app, name="analyze")


from rulelab.cli_sweep import status_cmd, sweep_cmd  # noqa: E402

app.command("sweep")(sweep_cmd)
app.command("status")(status_cmd)


def main() -> None:
    """Entry point: bad input → ``error: …`` on one line and exit code 2."""
    argv = split_multi_value_flags(sys.argv[1:], MULTI_VALUE_FLAGS)
    try:
        check_path_flags(argv)
        app(args=argv, prog_name="rulelab", standalone_mode=False)
    except (ConfigError, UserError) as e:
        err_console.print(f"error: {e}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except TyperException as e:  # usage errors from parsing (unknown flag, not an integer, …)
        if type(e).__name__ == "NoArgsIsHelpError":
            print(e.format_message())
            sys.exit(0)
        err_console.print(f"error: {e.format_message()}", markup=False, highlight=False,
                          soft_wrap=True)
        sys.exit(getattr(e, "exit_code", 2) or 2)
    except Exit as e:
        sys.exit(e.exit_code)
    except Abort:
        err_console.print("aborted")
        sys.exit(130)

if __name__ == "__main__":  # `python -m rulelab.cli`: run the one canonical module copy
    from rulelab.cli import main as _main

    _main()
