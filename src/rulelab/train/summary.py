"""Per-member generalization summary over evaluations (SPEC S.3).

A run *generalizes* if adversarial accuracy reaches 100% at any evaluation. We record the first
such epoch, the max and final adv accuracy, and *transient* generalization: it reached 100%
and later fell below ``transient_threshold`` (default 95%).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass
class MemberSummary:
    transient_threshold: float = 0.95
    generalized: bool = False
    first_epoch_100: int | None = None
    max_adv_acc: float = 0.0
    final_adv_acc: float = float("nan")
    final_val_acc: float = float("nan")
    final_train_loss: float = float("nan")
    final_epoch: int = 0
    transient: bool = False
    failed_reason: str | None = None

    def update(self, epoch: int, metrics: dict[tuple[str, str], float]) -> None:
        adv = metrics["adv", "acc"]
        self.final_epoch = epoch
        self.final_adv_acc = adv
        self.final_val_acc = metrics["val", "acc"]
        self.final_train_loss = metrics["train", "loss"]
        if not math.isnan(adv):
            self.max_adv_acc = max(self.max_adv_acc, adv)
        if adv >= 1.0 and not self.generalized:
            self.generalized, self.first_epoch_100 = True, epoch
        if self.generalized and adv < self.transient_threshold:
            self.transient = True

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("transient_threshold")
        return d

    @classmethod
    def from_dict(cls, d: dict, cfg) -> MemberSummary:
        return cls(transient_threshold=cfg.transient_threshold, **d)
