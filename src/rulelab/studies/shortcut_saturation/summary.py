"""Per-member generalization summary over evaluations (SPEC S.3).

A run *generalizes* when val and adv accuracy are both 100% at the same evaluation
(``generalized``, first such epoch ``first_epoch_generalized``). The paper's text defines it by
adv accuracy alone; for k = 2 a model that learned the *flipped* shortcut ``1 − s`` scores adv
100% and val 0%, and at r < ½ that is exactly what training rewards — so the paper's reading is
kept as its own columns, ``adv_generalized`` and ``first_epoch_adv_100``. We also record the
max and final adv accuracy and *transient* generalization: generalized, and at a later
evaluation adv fell below ``transient_threshold`` (default 95%).

Summaries written before this criterion (issue 8) carry ``first_epoch_100`` and an adv-only
``generalized``: :func:`upgrade_summary` maps them (the old ``generalized`` becomes
``adv_generalized``; the new one is False where adv never reached 100%, else unknown — None —
until it is recomputed from the metric rows with :meth:`MemberSummary.replay`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields

GENERALIZED_ACC = 1.0  # S.3: "100%" accuracy
LEGACY_FIRST = "first_epoch_100"  # the pre-issue-8 key (adv-only first epoch)


@dataclass
class MemberSummary:
    transient_threshold: float = 0.95
    generalized: bool | None = False  # val and adv both 100% at one evaluation (None: unknown)
    first_epoch_generalized: int | None = None
    adv_generalized: bool = False  # the paper's text: adv reached 100% at some evaluation
    first_epoch_adv_100: int | None = None
    max_adv_acc: float = 0.0
    final_adv_acc: float = float("nan")
    final_val_acc: float = float("nan")
    final_train_loss: float = float("nan")
    final_epoch: int = 0
    transient: bool = False  # generalized, then adv < transient_threshold at a later evaluation
    failed_reason: str | None = None

    def update(self, epoch: int, metrics: dict[tuple[str, str], float]) -> None:
        adv, val = metrics["adv", "acc"], metrics["val", "acc"]
        self.final_epoch = epoch
        self.final_adv_acc = adv
        self.final_val_acc = val
        self.final_train_loss = metrics["train", "loss"]
        if not math.isnan(adv):
            self.max_adv_acc = max(self.max_adv_acc, adv)
        if adv >= GENERALIZED_ACC and not self.adv_generalized:
            self.adv_generalized, self.first_epoch_adv_100 = True, epoch
        if self.generalized and adv < self.transient_threshold:
            self.transient = True
        if adv >= GENERALIZED_ACC and val >= GENERALIZED_ACC and not self.generalized:
            self.generalized, self.first_epoch_generalized = True, epoch

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("transient_threshold")
        return d

    @classmethod
    def from_dict(cls, d: dict, cfg) -> MemberSummary:
        """A summary from its stored dict; an old (adv-only) dict is mapped by
        :func:`upgrade_summary`, and keys this class does not know are ignored."""
        known = {f.name for f in fields(cls)} - {"transient_threshold"}
        d = {k: v for k, v in upgrade_summary(d).items() if k in known}
        return cls(transient_threshold=cfg.transient_threshold, **d)

    @classmethod
    def replay(cls, rows: Iterable[tuple], transient_threshold: float = 0.95,
               failed_reason: str | None = None) -> MemberSummary:
        """Recompute a summary from stored metric rows ``(epoch, split, metric, value)``.

        Evaluations are replayed in epoch order; one that lacks val or adv accuracy is skipped.
        """
        by_epoch: dict[int, dict[tuple[str, str], float]] = {}
        for epoch, split, metric, value in rows:
            by_epoch.setdefault(int(epoch), {})[str(split), str(metric)] = float(value)
        s = cls(transient_threshold)
        for epoch in sorted(by_epoch):
            m = by_epoch[epoch]
            if ("val", "acc") in m and ("adv", "acc") in m:
                s.update(epoch, {("train", "loss"): float("nan"), **m})
        s.failed_reason = failed_reason
        return s


def is_legacy(d: dict) -> bool:
    """A summary written before the val-and-adv criterion (it has ``first_epoch_100``)."""
    return LEGACY_FIRST in d and "adv_generalized" not in d


def upgrade_summary(d: dict) -> dict:
    """Map an old summary dict to the current keys (a current one is returned as is).

    Old ``generalized`` (adv reached 100%) → ``adv_generalized``; old ``first_epoch_100`` →
    ``first_epoch_adv_100``. The new ``generalized`` needs val and adv at 100% together, so it
    is False where adv never reached 100% and None (unknown) otherwise; ``transient`` (defined
    on the new event) likewise. Recompute from metrics with :meth:`MemberSummary.replay`.
    """
    if not is_legacy(d):
        return dict(d)
    out = {k: v for k, v in d.items() if k != LEGACY_FIRST}
    adv = bool(d.get("generalized"))
    out.update(adv_generalized=adv, first_epoch_adv_100=d.get(LEGACY_FIRST),
               generalized=False if not adv else None, first_epoch_generalized=None,
               transient=False if not adv else None)
    return out


def generalized_of(summary: dict) -> bool | None:
    """The S.3 ``generalized`` of a stored summary dict; None when it cannot be known (an old
    summary whose adv reached 100%: recompute it from the run's metrics)."""
    if not is_legacy(summary):
        return bool(summary.get("generalized"))
    value = upgrade_summary(summary)["generalized"]
    return None if value is None else bool(value)
