"""Training checkpoints: ``checkpoints/<run_id>.pt`` (DESIGN §3).

A checkpoint holds what a resumed run needs to finish with the numbers an uninterrupted run gives
(parameters, optimizer state, RNG state such as ``torch.Generator.get_state()``, the epoch).
Written atomically with ``torch.save`` (temp file, fsync, ``os.replace``). Loaded with
``weights_only=True``: a state may hold tensors, numbers, strings and lists/tuples/dicts of them,
but no arbitrary Python objects (e.g. numpy arrays), so reading a lab never runs foreign code.

A file that does not load, or loads but is not a state of this shape (a dict with the
``required`` keys, an integer ``epoch`` and a dict of tensors as ``params``), raises a
:class:`StoreError` naming the file, which is left in place.
"""

from __future__ import annotations

import pickle
from pathlib import Path

from rulelab.store.atomic import atomic_write
from rulelab.store.errors import StoreError, first_line, write_errors

STATE_KEYS = ("epoch", "params", "optim", "generator", "summary", "rows")  # a run's checkpoint
SNAPSHOT_KEYS = ("epoch", "params")  # weights kept at one epoch


def checkpoint_path(directory: Path, run_id: str) -> Path:
    return directory / f"{run_id}.pt"


def save_checkpoint(directory: Path, run_id: str, state: dict) -> None:
    import torch  # lazily: commands that only read the registry should start fast

    path = checkpoint_path(directory, run_id)
    with write_errors(path):
        atomic_write(path, lambda f: torch.save(state, f))


def load_checkpoint(directory: Path, run_id: str,
                    required: tuple[str, ...] = STATE_KEYS) -> dict | None:
    """The saved state on the CPU, None if there is none; a damaged or foreign file raises
    StoreError and is left in place."""
    import torch
    path = checkpoint_path(directory, run_id)
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many types for truncated or foreign files
        why = ("not a file of tensors the safe loader accepts" if isinstance(
            err, pickle.UnpicklingError) else first_line(err)[:200])
        raise StoreError(f"corrupt checkpoint {path}: {why}; move it away to train that run "
                         "from the start") from None
    why = state_problem(state, required)
    if why:
        raise StoreError(f"checkpoint {path} is not a rulelab state ({why}); move it away to "
                         "train that run from the start")
    return state


def state_problem(state: object, required: tuple[str, ...]) -> str | None:
    """Why ``state`` is not a checkpoint with the ``required`` keys (None when it is)."""
    import torch

    if not required:
        return None
    if not isinstance(state, dict):
        return f"holds a {type(state).__name__}, not a dict"
    missing = [k for k in required if k not in state]
    if missing:
        return f"no {', '.join(repr(k) for k in missing)}"
    epoch = state.get("epoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        return f"epoch {epoch!r} is not an integer ≥ 0"
    params = state.get("params")
    if "params" in required and not (
            isinstance(params, dict) and all(isinstance(v, torch.Tensor) for v in params.values())):
        return "params is not a dict of tensors"
    return None


def delete_checkpoint(directory: Path, run_id: str) -> None:
    checkpoint_path(directory, run_id).unlink(missing_ok=True)
