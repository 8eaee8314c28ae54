"""Options and checks shared by every ``rulelab`` command, in one place (SPEC "Cross-cutting":
bad input gets one clear line naming the flag and what is allowed, before any work starts).

Each check raises :class:`rulelab.errors.UserError`, which the entry point prints as
``error: <message>`` with exit code 2. Paths a command will write are checked before any work
(a file target must not be a directory, and its folder must accept new files), and what a
reading command skipped in a damaged lab is printed as ``warning:`` lines.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

import typer

from rulelab.errors import UserError

LabOpt = typer.Option(None, "--lab", help="Lab directory (default $RULELAB_HOME or ./rulelab-runs)")
EpochsOpt = typer.Option("final", "--epochs",
                         help="final, all (every stored snapshot), or a comma list of epochs")
PATH_FLAGS = ("--lab", "--out")  # and each task's path fields (Task.path_fields)
EXPERIMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}")  # as recipe names
DEVICE = re.compile(r"cpu|cuda(:\d+)?|mps")


def positive(flag: str, value: int | float | None, low: int = 1) -> None:
    """``value`` (when given) is at least ``low``."""
    if value is not None and value < low:
        raise UserError(f"{flag}: {value} is not allowed; it must be ≥ {low}")


def usable_devices() -> list[str]:
    """The devices torch can use here: ``cpu``, then ``cuda``, ``cuda:0`` … when CUDA GPUs
    are visible, and ``mps`` when Apple's Metal backend is."""
    import torch

    out = ["cpu"]
    if torch.cuda.is_available():
        out += ["cuda", *(f"cuda:{i}" for i in range(torch.cuda.device_count()))]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append("mps")
    return out


def check_device(device: str, *, here: bool = True) -> str:
    """``--device``: cpu, cuda, cuda:N or mps — and, with ``here``, one torch can use on this
    machine (planning a GPU sweep needs no GPU here; on Ray the GPUs are the workers'). A
    device torch cannot use would otherwise pass and fail every run once training starts."""
    if not DEVICE.fullmatch(device):
        raise UserError(f"--device: {device!r} is not allowed; use cpu, cuda, cuda:N or mps")
    if here:
        usable = usable_devices()
        if device not in usable:
            raise UserError(f"--device: {device!r} is not available on this machine; torch can "
                            f"use {', '.join(usable)}")
    return device


def check_precision(precision: str | None, device: str, *, here: bool = True) -> None:
    """``--precision``: fp32, bf16 or tf32 — bf16 only where this device multiplies in bf16
    natively (emulated bf16 is slower than fp32), tf32 only on a CUDA GPU with TF32 tensor
    cores (:func:`rulelab.hardware.precision_error`); ``here=False`` (a plan for other
    machines) checks the name alone."""
    if precision is None:
        return
    from rulelab.hardware import PRECISIONS, precision_error

    if precision not in PRECISIONS or here:
        why = precision_error(precision, device)
        if why:
            raise UserError(f"--precision: {why}")


def check_epochs(epochs: str) -> str:
    """``--epochs`` of an analysis: final, all, or a comma list of epochs."""
    ok = epochs in ("final", "all") or all(e.strip().isdigit() for e in epochs.split(","))
    if not ok:
        raise UserError(f"--epochs: {epochs!r} is not allowed; use final, all or e.g. 0,100,500")
    return epochs


def check_track(track: str, every: str, trackers, task: str) -> tuple[str, ...]:
    """``--track a,b`` (analyses the task can track) and ``--track-every log|N``."""
    names = tuple(n.strip() for n in track.split(",") if n.strip())
    unknown = [n for n in names if n not in trackers]
    if unknown:
        allowed = (f"a comma list of {', '.join(sorted(trackers))}" if trackers else
                   f"nothing: task {task} has no analyses to track")
        raise UserError(f"--track: {','.join(unknown)} is not allowed; use {allowed}")
    if every != "log" and not (every.isdigit() and int(every) > 0):
        raise UserError(f"--track-every: {every!r} is not allowed; use log or a positive integer")
    return names


def path_flags() -> tuple[str, ...]:
    """``--lab``, ``--out`` and the flags of the path fields every task declares."""
    from rulelab.study_registry import tasks

    return (*PATH_FLAGS, *(t.config.flag(f) for t in tasks().values() for f in t.path_fields))


def check_path_flags(argv: list[str]) -> None:
    """An empty path would silently mean the current directory (``Path("") == Path(".")``)."""
    flags = path_flags()
    for i, tok in enumerate(argv):
        flag, eq, value = tok.partition("=")
        given = value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
        if flag in flags and given == "":
            raise UserError(f"{flag} must be a path; it was given an empty string")


def check_out(flag: str, out: Path, suffix: str | None = None) -> Path:
    """A file the command will write: not a directory, with the right suffix, in a folder
    that accepts new files (probed: see :mod:`rulelab.store.paths`)."""
    from rulelab.store.paths import file_problem

    if out.is_dir():
        raise UserError(f"{flag}: {str(out)!r} is not allowed; it is a directory; give a file "
                        f"name{f' ending in {suffix}' if suffix else ''}")
    if suffix and out.suffix != suffix:
        raise UserError(f"{flag}: {str(out)!r} is not allowed; the file must end in {suffix}")
    why = file_problem(out)
    if why:
        raise UserError(f"{flag}: {str(out)!r} is not allowed; {why}")
    return out


def write_out(out: Path, write: Callable[[Path], object]):
    """``write(out)`` after making its folder; a full disk or a read-only place is one line."""
    from rulelab.store import StoreError
    from rulelab.store.errors import write_errors

    try:
        with write_errors(out):
            out.parent.mkdir(parents=True, exist_ok=True)
            return write(out)
    except StoreError as e:
        raise UserError(str(e)) from None


def lab_dir(lab: Path | None):
    """``--lab`` as typed (None: ``$RULELAB_HOME``, else ``./rulelab-runs``) as the
    :class:`~rulelab.store.LabDir` every function below the command takes: where the flag
    becomes the lab's one type (imported here, lazily: ``--help`` needs no pandas)."""
    from rulelab.store import LabDir

    return LabDir.at(lab)


def check_lab_path(lab) -> None:
    """``--lab`` (a :class:`~rulelab.store.LabDir`) for a command that writes: not a file,
    and creatable where it is missing."""
    from rulelab.store.paths import folder_problem

    root = lab.root
    if root.exists() and not root.is_dir():
        raise UserError(f"--lab: {str(root)!r} is not allowed; it is a file, not a folder")
    why = None if root.exists() else folder_problem(root)
    if why:
        raise UserError(f"--lab: {str(root)!r} is not allowed; {why}")


def check_experiment(name: str) -> str:
    """``--experiment``: a plain name (it is stored, and printed by ``rulelab status``)."""
    if not EXPERIMENT_NAME.fullmatch(name):
        shown = repr(name) if len(name) <= 60 else f"{name[:40]!r}… ({len(name)} characters)"
        raise UserError(f"--experiment: {shown} is not allowed; use up to 100 letters, digits, "
                        "'-', '_' or '.', starting with a letter or digit")
    return name


def open_lab(lab, *, create: bool):
    """The :class:`~rulelab.store.Lab` of ``--lab`` (a :class:`~rulelab.store.LabDir`, made
    where missing with ``create``); a store problem is one line. A folder that holds labs but
    is none (``./rulelab-runs`` after ``make quick``, whose lab is
    ``rulelab-runs/shortcut-saturation-quick``) is refused with the labs it holds."""
    from rulelab.store import Lab, StoreError

    if not create:
        check_holds_labs(lab.root)
    try:
        return Lab(lab, create=create)
    except StoreError as e:
        raise UserError(str(e)) from None


def check_holds_labs(root: Path) -> None:
    """``root`` has no registry but labs inside it: name them and the flag that picks one."""
    if (root / "registry.sqlite").exists():
        return
    from rulelab.store.lab import labs_inside

    labs = labs_inside(root)
    if not labs:
        return
    shown = [shown_path(p) for p in labs[:6]]
    more = f" and {len(labs) - 6} more" if len(labs) > 6 else ""
    raise UserError(f"--lab: no lab at {shown_path(root)}, but it holds {len(labs)}: "
                    f"{', '.join(shown)}{more}; pick one with --lab, e.g. --lab {shown[0]}")


def shown_path(path: Path) -> str:
    """``path`` relative to the working directory when below it, else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def existing_lab(lab):
    """The lab of ``--lab`` (a :class:`~rulelab.store.LabDir`) if it has a registry, else
    None (a dry run writes nothing)."""
    if not lab.registry_path.exists():
        return None
    return open_lab(lab, create=False)


def print_warnings(lab) -> None:
    """Print what a command skipped in a damaged lab (:attr:`Lab.warnings`), one line each."""
    for line in lab.warnings:
        print(f"warning: {line}", file=sys.stderr)
    lab.warnings.clear()


def split_multi_value_flags(argv: list[str], flags: set[str]) -> list[str]:
    """Rewrite ``--ratio 0.5 0.9`` as ``--ratio 0.5 --ratio 0.9`` for the given flags.

    click options take one value per occurrence; researchers type lists after one flag.
    """
    out: list[str] = []
    current: str | None = None
    for tok in argv:
        if tok.startswith("--"):
            name = tok.split("=", 1)[0]
            current = name if (name in flags and "=" not in tok) else None
            out.append(tok)
        elif current is not None and out[-1] != current:
            out.extend([current, tok])
        else:
            out.append(tok)
    return out
