"""Digits / MNIST learning order: an ensemble of 3-layer MLPs, full batch, AdamW (SPEC M.4.7).

The model is :class:`rulelab.studies.coexistence.feedforward.EnsembleFeedForward` with two hidden
layers of
``hidden`` units: ``x [E, B, D] → logits [E, B, 10]``.

Metrics per evaluation, as study M's trainer (:mod:`.trainer`): ``train``,
``train_clean``, ``train_noisy`` (against the corrupted labels: memorization),
``train_noisy_true`` and ``test``; ``loss`` (cross-entropy) and ``acc``, evaluated every step
by default (``eval_every = 1``: the paper's MNIST reading is at epochs 1 and 2).

Learning order (M.4.2, M.4.7) is read from these metrics by ``rulelab analyze order --window T``
(:mod:`.analyses.early_lead`): the lead of noisy- over clean-train accuracy over the
first T steps, at the first step and at init, and the loss-decrease rates — the paper's claim
is that early lead at low accuracy (MNIST epoch 1: noisy 10.9% vs clean 2.9%). The summary's
``first_step_*`` fields (first step at 50% / 90%) are the old crossing reading, which calls that
pattern "clean first"; they are kept for comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rulelab.engine.base import EnsembleTrainerBase
from rulelab.studies.coexistence.digits_task import N_CLASSES, digits_from_config
from rulelab.studies.coexistence.feedforward import EnsembleFeedForward
from rulelab.studies.coexistence.trainer import ModularSummary, split_metrics

# A digits run "generalizes" when its final test accuracy is at least this (a 3-layer MLP on
# clean 8×8 digits reaches ≈ 97%); only used for the runs table.
DIGITS_GENERALIZED_ACC = 0.9


@dataclass
class DigitsEnsembleData:
    """Member data: ``x [E, N, D]`` (a broadcast view when members share the data draw)."""

    train_x: torch.Tensor
    train_y: torch.Tensor  # [E, N] labels trained on (corrupted where noisy)
    train_y_true: torch.Tensor
    noisy: torch.Tensor  # [E, N] bool
    test_x: torch.Tensor  # [E, T, D]
    test_y: torch.Tensor  # [E, T]


def stack_digits(configs, device: torch.device | str = "cpu") -> DigitsEnsembleData:
    """Every member's data on the member axis; images are shared when the split is."""
    draws = [digits_from_config(c) for c in configs]
    E = len(draws)

    # Images depend on the data seed only through the sklearn split.
    shared = configs[0].source == "mnist" or len({c.data_seed for c in configs}) == 1

    def images(attr: str) -> torch.Tensor:
        if shared:
            x = torch.from_numpy(np.array(getattr(draws[0], attr))).to(device)
            return x.unsqueeze(0).expand(E, *x.shape)  # no copy per member
        return torch.from_numpy(np.stack([getattr(d, attr) for d in draws])).to(device)

    def labels(attr: str) -> torch.Tensor:
        return torch.from_numpy(np.stack([getattr(d, attr) for d in draws])).to(device)

    return DigitsEnsembleData(images("x_train"), labels("y_train"), labels("y_train_true"),
                              labels("noisy"), images("x_test"), labels("y_test"))


class DigitsSummary(ModularSummary):
    """Study M's per-member summary; ``generalized`` means final test acc ≥ 0.9 here."""

    def update(self, epoch: int, metrics: dict[tuple[str, str], float]) -> None:
        super().update(epoch, metrics)
        self.generalized = bool(metrics["test", "acc"] >= DIGITS_GENERALIZED_ACC)


def build_model(configs, data: DigitsEnsembleData) -> EnsembleFeedForward:
    """The ensemble 3-layer MLP of shape-compatible configs, each member from its seed; its
    input width is the data's (64 pixels for scikit-learn's digits, the IDX files' for MNIST)."""
    h = configs[0].hidden
    model = EnsembleFeedForward(len(configs), [data.train_x.shape[-1], h, h, N_CLASSES],
                                act=configs[0].activation)
    return model.init_weights([c.seed for c in configs])


class DigitsTrainer(EnsembleTrainerBase):
    """Trains digits runs that share data source and model shape as one ensemble."""

    def build_data(self) -> DigitsEnsembleData:
        return stack_digits(self.configs, self.device)

    def build_model(self) -> EnsembleFeedForward:
        return build_model(self.configs, self.data)

    def compute_metrics(self) -> dict[tuple[str, str], torch.Tensor]:
        return split_metrics(self.model, self.data, self.options.eval_chunk)  # cross-entropy

    def new_summary(self, cfg) -> DigitsSummary:
        return DigitsSummary()
