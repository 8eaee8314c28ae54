"""``rulelab sweep RECIPE`` and ``rulelab status`` (DESIGN §3–4; recipes in ``experiments/``).

Registered on the main app in :mod:`rulelab.cli`. Everything is validated (the recipe, every
run, the flags, the executor) before the lab is opened for writing; ``--dry-run`` writes
nothing at all.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import typer

from rulelab.cli_checks import check_lab_path, print_warnings


def _cli():
    """:mod:`rulelab.cli`, imported lazily: it imports this module."""
    import rulelab.cli

    return rulelab.cli

LabOpt = typer.Option(None, "--lab", help="Lab directory (default $RULELAB_HOME or ./rulelab-runs)")


def sweep_cmd(
    recipe: Path = typer.Argument(..., help="YAML recipe, e.g. experiments/shortcut_saturation/"
                                  "quick.yaml"),
    lab: Path | None = LabOpt,
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan; write nothing"),
    executor: str = typer.Option("local", "--executor", help="local or ray"),
    address: str | None = typer.Option(None, "--address", help="Ray cluster (auto, ray://…); "
                                       "default: start a local Ray runtime"),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda or cuda:N"),
    precision: str | None = typer.Option(None, "--precision", help="fp32 or bf16 (autocast); "
                                         "default: the recipe's, else fp32"),
    max_members: int | None = typer.Option(None, "--max-members",
                                           help="most runs per chunk (default: the recipe's)"),
    checkpoint_every: int | None = typer.Option(None, "--checkpoint-every", help="epochs"),
    micro_batch: int | None = typer.Option(None, "--micro-batch", help="examples per member "
                                           "per pass (default: the recipe's, else 512)"),
    memory_gib: float | None = typer.Option(None, "--memory-gib", help="memory budget per "
                                            "chunk (default: from free RAM / GPU memory)"),
    cpus_per_chunk: int = typer.Option(1, "--cpus-per-chunk", help="Ray: CPUs (and torch "
                                       "threads) per chunk"),
    gpus_per_chunk: float | None = typer.Option(None, "--gpus-per-chunk",
                                                help="Ray: GPUs per chunk (default 1 on cuda)"),
    quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
) -> None:
    """Run a recipe: every run trained once, packed into ensembles; re-run to resume."""
    from rulelab.sweep import Settings, load_recipe, make_plan, run_sweep
    from rulelab.sweep.estimate import speed
    from rulelab.sweep.planner import describe_plan
    from rulelab.sweep.recipe import RecipeError

    cli = _cli()
    if executor not in ("local", "ray"):
        raise cli.UserError(f"--executor: {executor!r} is not allowed; use local or ray")
    if precision not in (None, "fp32", "bf16"):
        raise cli.UserError(f"--precision: {precision!r} is not allowed; use fp32 or bf16")
    for flag, value in (("--max-members", max_members), ("--checkpoint-every", checkpoint_every),
                        ("--micro-batch", micro_batch), ("--cpus-per-chunk", cpus_per_chunk)):
        if value is not None:
            cli._positive(flag, value)
    if memory_gib is not None and not memory_gib > 0:
        raise cli.UserError(f"--memory-gib: {memory_gib} is not allowed; it must be > 0")
    if gpus_per_chunk is not None and gpus_per_chunk < 0:
        raise cli.UserError(f"--gpus-per-chunk: {gpus_per_chunk} is not allowed; it must be ≥ 0")
    if address is not None and executor != "ray":
        raise cli.UserError("--address: only with --executor ray")
    if dry_run or (executor == "ray" and device.startswith("cuda")):
        # planning a GPU sweep needs no GPU here; on Ray the GPUs are the workers'
        if not re.fullmatch(r"cpu|cuda(:\d+)?|mps", device):
            raise cli.UserError(f"--device: {device!r} is not allowed; use cpu, cuda or cuda:N")
    else:
        cli._check_device(device)
    try:
        the_recipe = load_recipe(recipe)
    except RecipeError as e:
        raise cli.UserError(str(e)) from None
    _check_data_space(the_recipe, cli)
    settings = Settings.from_recipe(
        the_recipe, device=device, precision=precision, max_members=max_members,
        checkpoint_every=checkpoint_every, micro_batch=micro_batch, memory_gib=memory_gib,
        threads=cpus_per_chunk if executor == "ray" else None)
    from rulelab.store import StoreError
    from rulelab.sweep.estimate import oversized

    too_big = oversized(the_recipe.configs(), device, settings.micro_batch, settings.eval_chunk)
    if too_big:
        raise cli.UserError(f"{recipe}: {too_big.replace('--', '').replace('-', '_')}")

    if dry_run:
        existing = _existing_lab(lab, cli)
        try:
            plan = make_plan(the_recipe, existing, settings)
        except StoreError as e:  # e.g. a damaged checkpoint met while reading resume epochs
            raise cli.UserError(str(e)) from None
        cli.console.print(f"plan for {recipe} (dry run: nothing written)", markup=False)
        for line in describe_plan(plan, cpu=speed("cpu"), gpu=speed("cuda", settings.precision)):
            cli.console.print(line, markup=False, highlight=False)
        return

    from rulelab.sweep.executors import RayUnavailable
    from rulelab.sweep.progress import RichSweepProgress, SweepProgress

    check_lab_path(lab)
    runner = _executor(executor, address, device, cpus_per_chunk, gpus_per_chunk, cli)
    try:
        if executor == "ray":
            runner.start()  # a cluster that cannot be reached fails before the lab is written
        the_lab = cli._open_lab(lab, create=True)
        progress = SweepProgress() if quiet else RichSweepProgress(cli.err_console)
        header = (f"{the_recipe.experiment}: {len(the_recipe.configs())} runs → lab "
                  f"{the_lab.root} ({executor} executor, {settings.device_label})")
        result = run_sweep(the_recipe, the_lab, settings, runner, progress, on_start=lambda:
                           cli.err_console.print(header, markup=False, highlight=False))
    except (StoreError, RayUnavailable) as e:
        raise cli.UserError(str(e)) from None
    finally:
        if executor == "ray":
            runner.close()
    plan = result.plan
    cli.err_console.print(
        f"trained {result.done + result.failed} of {plan.n_todo} runs "
        f"({result.done} done, {result.failed} failed); {plan.n_done} were done before",
        markup=False, highlight=False)
    if result.failed:
        cli.err_console.print("failure reasons: rulelab status", markup=False)
    if result.lost:
        cli.err_console.print(f"{len(result.lost)} chunk(s) lost ({result.lost[0]}); their runs "
                              "are pending again: re-run the sweep to retry them", markup=False)
        sys.exit(1)


def status_cmd(
    lab: Path | None = LabOpt,
    as_json: bool = typer.Option(False, "--json", help="one JSON object"),
) -> None:
    """Progress per experiment: done / running / pending / failed, and generalized runs."""
    from rulelab.store import StoreError
    from rulelab.sweep.status import lab_status, print_status

    cli = _cli()
    the_lab = cli._open_lab(lab, create=False)
    try:
        status = lab_status(the_lab)
    except StoreError as e:
        raise cli.UserError(str(e)) from None
    finally:
        print_warnings(the_lab)
    if as_json:
        print(json.dumps(status, indent=1))
        return
    print_status(cli.console, status)


def _check_data_space(recipe, cli) -> None:
    """Study S data must fit its sequence space (cheap arithmetic, before any work)."""
    if recipe.task != "mpsp":
        return
    for c in recipe.configs():
        need, space = c.n_train + 2 * c.n_eval, c.vocab**c.seq_len
        if need > space:
            raise cli.UserError(
                f"{recipe.path}: n_train/n_eval: {c.n_train}/{c.n_eval} not allowed with vocab "
                f"{c.vocab} and seq_len {c.seq_len}: n_train + 2·n_eval = {need} > "
                f"{c.vocab}**{c.seq_len} = {space} distinct sequences")


def _existing_lab(lab: Path | None, cli):
    from rulelab.store import Lab, StoreError, resolve_lab

    if not (resolve_lab(lab) / "registry.sqlite").exists():
        return None
    try:
        return Lab(lab, create=False)
    except StoreError as e:
        raise cli.UserError(str(e)) from None


def _executor(name: str, address, device: str, cpus: int, gpus: float | None, cli):
    from rulelab.sweep.executors import LocalExecutor, RayExecutor, RayUnavailable, import_ray

    if name == "local":
        return LocalExecutor()
    try:
        import_ray()
    except RayUnavailable as e:
        raise cli.UserError(f"--executor ray: {e}") from None
    if gpus is None:
        gpus = 1.0 if device.startswith("cuda") else 0.0
    return RayExecutor(address, cpus_per_chunk=cpus, gpus_per_chunk=gpus)
