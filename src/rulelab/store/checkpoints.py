"""Training checkpoints: ``checkpoints/<run_id>.pt`` (DESIGN §3).

A checkpoint holds what a resumed run needs to finish with the numbers an uninterrupted run gives
(parameters, optimizer state, RNG state such as ``torch.Generator.get_state()``, the epoch).
Written atomically with ``torch.save`` (temp file, fsync, ``os.replace``). Loaded with
``weights_only=True``: a state may hold tensors, numbers, strings and lists/tuples/dicts of them,
but no arbitrary Python objects (e.g. numpy arrays), so reading a lab never runs foreign code.
"""

from __future__ import annotations

from pathlib import Path

from rulelab.store.atomic import atomic_write
from rulelab.store.errors import StoreError, first_line


def checkpoint_path(directory: Path, run_id: str) -> Path:
    return directory / f"{run_id}.pt"


def save_checkpoint(directory: Path, run_id: str, state: dict) -> None:
    import torch  # lazily: commands that only read the registry should start fast

    atomic_write(checkpoint_path(directory, run_id), lambda f: torch.save(state, f))


def load_checkpoint(directory: Path, run_id: str) -> dict | None:
    """The saved state on the CPU, None if there is none; a damaged file raises StoreError
    and is left in place."""
    import torch
    path = checkpoint_path(directory, run_id)
    if not path.is_file():
        return None
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many types for truncated or foreign files
        raise StoreError(f"corrupt checkpoint {path}: {first_line(err)}") from None


def delete_checkpoint(directory: Path, run_id: str) -> None:
    checkpoint_path(directory, run_id).unlink(missing_ok=True)
