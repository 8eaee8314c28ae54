"""Study S's data outside training (SPEC S.1): the check run before anything is written, and
``rulelab data mpsp``. Light: numpy only, no torch."""

from __future__ import annotations

from pathlib import Path

from rulelab.errors import UserError
from rulelab.studies.shortcut_saturation.task import mpsp_from_config, write_parquet


def splits(cfg):
    """The MPSP splits of ``cfg`` (cached), or one line naming the flags that cannot hold them."""
    need, space = cfg.n_train + 2 * cfg.n_eval, cfg.vocab**cfg.seq_len
    why = (f"n_train + 2·n_eval = {need} > {cfg.vocab}**{cfg.seq_len} = {space} distinct "
           "sequences") if need > space else None
    if why is None:
        try:
            return mpsp_from_config(cfg)
        except ValueError as e:
            why = str(e).splitlines()[0]
    raise UserError(f"--n-train/--n-eval: {cfg.n_train}/{cfg.n_eval} not allowed with --vocab "
                    f"{cfg.vocab} --seq-len {cfg.seq_len}: {why}")


def check(configs) -> None:
    """Every run's data can be drawn (the sequence space holds its splits): before any write."""
    for cfg in {tuple(getattr(c, f) for f in DATA_FIELDS): c for c in configs}.values():
        splits(cfg)


DATA_FIELDS = ("label_mod", "shortcut", "ratio", "seq_len", "vocab", "n_train", "n_eval",
               "data_seed")


def write(data, out: Path) -> str:
    """``rulelab data mpsp``: the train/val/adv examples (:func:`splits`), one row each."""
    write_parquet(data, out)
    return f"wrote {out} ({', '.join(f'{k} {len(v)}' for k, v in data.items())})"
