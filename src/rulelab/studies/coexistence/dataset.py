"""Study M's data outside training (SPEC M.1, M.4.7): ``rulelab data modular``, and the flags
and checks of the digits task. Light: numpy only, no torch."""

from __future__ import annotations

from pathlib import Path

from rulelab.errors import UserError

MODULAR_DATA_FIELDS = ("op", "p", "drop_zero", "train_frac", "noise", "noise_mode", "data_seed")
DIGITS_AXES = ("noise", "lr", "weight_decay", "data_seed")


def modular_data(cfg):
    """The train/test pairs of ``cfg`` with their label noise (cached)."""
    from rulelab.studies.coexistence.modular_task import modular_from_config

    return modular_from_config(cfg)


def write_modular(data, out: Path) -> str:
    """``rulelab data modular``: one row per pair (SPEC M.1)."""
    from rulelab.studies.coexistence.modular_task import write_parquet

    write_parquet(data, out)
    return (f"wrote {out} (train {len(data.y_train)}, of which noisy {data.n_noisy}; "
            f"test {len(data.y_test)})")


def digits_flags(values: dict) -> dict:
    """``--mnist-dir DIR`` reads MNIST from DIR; without it, scikit-learn's bundled digits."""
    return {**values, "source": "mnist" if values.get("mnist_dir") else "sklearn"}


def check_digits(configs) -> None:
    """The images can be read (files, scikit-learn): one line before anything is written."""
    from rulelab.studies.coexistence.digits_task import digits_from_config

    try:
        digits_from_config(configs[0])
    except (OSError, ValueError, ImportError) as e:
        if configs[0].source == "mnist":
            raise UserError(f"--mnist-dir: {e}") from None
        raise UserError(f"scikit-learn's digits (used without --mnist-dir): {e}") from None
