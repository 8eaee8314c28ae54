"""Per-member data stacked along the member axis: ``[E, N, n]`` (DESIGN §1).

Members may differ in spurious ratio and data seed, so each member gets its own training set;
sizes are shared (they are shape fields), so the sets stack.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rulelab.studies.shortcut_saturation.task import mpsp_from_config

EVAL_SPLITS = ("train_consistent", "train_anti", "val", "adv")


@dataclass
class EnsembleData:
    """Stacked MPSP splits. ``x`` tensors are ``[E, N, n]`` int64, labels ``[E, N]``."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    train_consistent: torch.Tensor  # [E, N] bool
    val_x: torch.Tensor
    val_y: torch.Tensor
    adv_x: torch.Tensor
    adv_y: torch.Tensor
    # The shortcut label s = max(x) or x_1 mod k of each val / adv example (S.1), computed once
    # with the splits: the phase-1 score (S.4.6) counts predictions equal to it.
    val_s: torch.Tensor | None = None
    adv_s: torch.Tensor | None = None

    @property
    def n_train(self) -> int:
        return self.train_x.shape[1]

    def to(self, device: torch.device | str) -> EnsembleData:
        return EnsembleData(**{k: None if v is None else v.to(device)
                               for k, v in self.__dict__.items()})


def stack_mpsp(configs) -> EnsembleData:
    """Build every member's splits (cached per task config) and stack them."""
    splits = [mpsp_from_config(c) for c in configs]

    def stack(split: str, attr: str) -> torch.Tensor:
        return torch.from_numpy(np.stack([getattr(s[split], attr) for s in splits]))

    return EnsembleData(
        train_x=stack("train", "x"),
        train_y=stack("train", "label"),
        train_consistent=stack("train", "consistent"),
        val_x=stack("val", "x"),
        val_y=stack("val", "label"),
        adv_x=stack("adv", "x"),
        adv_y=stack("adv", "label"),
        val_s=stack("val", "shortcut"),
        adv_s=stack("adv", "shortcut"),
    )
