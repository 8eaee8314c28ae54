"""Evaluation of every member on train-consistent, train-anti, val and adv (SPEC S.3).

All members are evaluated in the same forward passes; the consistent / anti groups differ in
size per member (members differ in ``r``), so group metrics are masked means over ``[E, N]``.
A group that is empty for a member (``r = 0`` or ``r = 1``) reports NaN for that member.

On val and adv, ``shortcut_acc`` is the fraction of predictions equal to the shortcut label s
(not the true label): the phase-1 score of SPEC S.4.6 ("the shortcut's prediction is ≥ 99%
accurate on val ∪ adv"), which for k = 3 cannot be derived from the accuracies.
"""

from __future__ import annotations

import torch

from rulelab.engine.per_example import masked_mean, scores
from rulelab.studies.shortcut_saturation.data import EnsembleData


@torch.no_grad()
def evaluate(model, data: EnsembleData, chunk: int = 2048) -> dict[tuple[str, str], torch.Tensor]:
    """Returns ``{(split, metric): [E] tensor}`` for metrics ``loss`` and ``acc``, and
    ``shortcut_acc`` on val and adv when ``data`` carries the shortcut labels.

    ``train`` (the whole training set) is included too: its loss is the training objective.
    """
    out: dict[tuple[str, str], torch.Tensor] = {}
    [(loss, correct)], _ = scores(model, data.train_x, [data.train_y], chunk)
    correct = correct.float()
    cons = data.train_consistent
    everything = torch.ones_like(cons)
    for split, mask in (("train", everything), ("train_consistent", cons), ("train_anti", ~cons)):
        out[split, "loss"] = masked_mean(loss, mask)
        out[split, "acc"] = masked_mean(correct, mask)
    for split, x, y, s in (("val", data.val_x, data.val_y, data.val_s),
                           ("adv", data.adv_x, data.adv_y, data.adv_s)):
        [(loss, correct)], pred = scores(model, x, [y], chunk)
        out[split, "loss"] = loss.mean(1)
        out[split, "acc"] = correct.float().mean(1)
        if s is not None:
            out[split, "shortcut_acc"] = (pred == s).float().mean(1)
    return {key: v.double().cpu() for key, v in out.items()}
