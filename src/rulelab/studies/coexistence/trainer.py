"""Study M's ensemble trainer: noisy modular data, the ensemble MLP, full batch (SPEC M.1–M.3).

Members may differ in data seed, noise α, model seed and optimizer hyperparameters; each gets its
own train set (same size: α only relabels), stacked ``[E, N, 2]``.

Losses (M.2), per member and per example, then a mean over examples:

- ``ce``: cross-entropy of the logits;
- ``mse``: ``Σ_c (f_c(a, b) − 1[c = y])²`` — squared error *summed over the P classes* against
  the one-hot target, then averaged over examples (not averaged over classes as well).

Evaluations follow :func:`.config.eval_steps` (log-spaced early, M.3). Splits:
``train`` (all, training labels), ``train_clean``, ``train_noisy`` (against the corrupted labels:
memorization), ``train_noisy_true`` (the same examples against their true labels) and ``test``;
metrics ``loss`` and ``acc``. A group empty for a member (α = 0) reports NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

from rulelab.engine.base import EnsembleTrainerBase
from rulelab.engine.per_example import cross_entropy, masked_mean, scores
from rulelab.studies.coexistence.config import is_eval_step
from rulelab.studies.coexistence.mlp import EnsembleMLP
from rulelab.studies.coexistence.modular_task import modular_from_config

# A run generalizes when its test accuracy at the final evaluation is at least this.
GENERALIZED_ACC = 0.99


@dataclass
class ModularEnsembleData:
    """Stacked member data: ``x`` are ``[E, N, 2]`` int64 (a, b), labels ``[E, N]``."""

    train_x: torch.Tensor
    train_y: torch.Tensor  # labels trained on (corrupted where noisy)
    train_y_true: torch.Tensor
    noisy: torch.Tensor  # [E, N] bool
    test_x: torch.Tensor  # [E, T, 2]
    test_y: torch.Tensor  # [E, T]

    def to(self, device: torch.device | str) -> ModularEnsembleData:
        return ModularEnsembleData(**{k: v.to(device) for k, v in self.__dict__.items()})


def stack_modular(configs) -> ModularEnsembleData:
    """Build every member's data (cached per task config) and stack them on the member axis."""
    draws = [modular_from_config(c) for c in configs]

    def stack(attr: str) -> torch.Tensor:
        return torch.from_numpy(np.stack([getattr(d, attr) for d in draws]))

    return ModularEnsembleData(
        train_x=stack("x_train"), train_y=stack("y_train"), train_y_true=stack("y_train_true"),
        noisy=stack("noisy"), test_x=stack("x_test"), test_y=stack("y_test"),
    )


def per_example_loss(kind: str, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``logits [E, b, P]``, ``y [E, b]`` → ``[E, b]`` CE, or MSE summed over classes."""
    E, b, P = logits.shape
    if kind == "ce":
        return cross_entropy(logits, y)
    if kind == "mse":
        return (logits - F.one_hot(y, P).to(logits.dtype)).square().sum(-1)
    raise ValueError(f"unknown loss {kind!r}; use ce or mse")


@dataclass
class ModularSummary:
    """Per-member summary over evaluations (SPEC M.3–M.4).

    ``generalized``: test acc ≥ ``GENERALIZED_ACC`` (0.99) at the *latest* (after training, the
    final) evaluation. Learning order (M.4.2): the first evaluated step where clean-train
    accuracy, and noisy-train accuracy against the corrupted labels, reach 0.5 and 0.9 (None if
    never; evaluations are log-spaced early, so early steps are exact to the step).
    """

    generalized: bool = False
    final_test_acc: float = math.nan
    max_test_acc: float = math.nan
    final_test_loss: float = math.nan
    final_train_loss: float = math.nan
    final_clean_acc: float = math.nan
    final_noisy_acc: float = math.nan  # against the corrupted labels (memorization)
    final_noisy_true_acc: float = math.nan  # the noisy examples against their true labels
    final_epoch: int = 0
    first_step_clean_50: int | None = None
    first_step_clean_90: int | None = None
    first_step_noisy_50: int | None = None
    first_step_noisy_90: int | None = None
    first_step_test_99: int | None = None
    failed_reason: str | None = None

    def update(self, epoch: int, metrics: dict[tuple[str, str], float]) -> None:
        test, clean = metrics["test", "acc"], metrics["train_clean", "acc"]
        noisy = metrics["train_noisy", "acc"]
        self.final_epoch = epoch
        self.final_test_acc, self.final_test_loss = test, metrics["test", "loss"]
        self.final_train_loss = metrics["train", "loss"]
        self.final_clean_acc, self.final_noisy_acc = clean, noisy
        self.final_noisy_true_acc = metrics["train_noisy_true", "acc"]
        if not math.isnan(test):
            self.max_test_acc = test if math.isnan(self.max_test_acc) else max(self.max_test_acc,
                                                                               test)
        self.generalized = bool(test >= GENERALIZED_ACC)  # NaN compares False
        for name, value, level in (("clean_50", clean, 0.5), ("clean_90", clean, 0.9),
                                   ("noisy_50", noisy, 0.5), ("noisy_90", noisy, 0.9),
                                   ("test_99", test, GENERALIZED_ACC)):
            if getattr(self, f"first_step_{name}") is None and value >= level:
                setattr(self, f"first_step_{name}", epoch)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, cfg=None) -> ModularSummary:
        return cls(**d)


@torch.no_grad()
def split_metrics(model, data, chunk: int, loss: Callable = cross_entropy
                  ) -> dict[tuple[str, str], torch.Tensor]:
    """``{(split, "loss" | "acc"): [E]}`` float64 on the CPU for study M's splits (module
    docstring; the digits trainer's too): masked per-member means of the per-example
    ``loss(logits, y)`` and correctness, in forwards of ``chunk`` examples per member; NaN
    where a split is empty for a member."""
    [(loss_, correct), (loss_true, correct_true)], _ = scores(
        model, data.train_x, [data.train_y, data.train_y_true], chunk, loss)
    [(test_loss, test_correct)], _ = scores(model, data.test_x, [data.test_y], chunk, loss)
    noisy = data.noisy
    groups = (("train", torch.ones_like(noisy), loss_, correct),
              ("train_clean", ~noisy, loss_, correct),
              ("train_noisy", noisy, loss_, correct),
              ("train_noisy_true", noisy, loss_true, correct_true),
              ("test", torch.ones_like(data.test_y, dtype=torch.bool), test_loss, test_correct))
    out = {}
    for split, mask, l_, c_ in groups:
        out[split, "loss"] = masked_mean(l_.double(), mask)
        out[split, "acc"] = masked_mean(c_.double(), mask)
    return {key: v.cpu() for key, v in out.items()}


def build_data(configs, device) -> ModularEnsembleData:
    """The members' data stacked ``[E, …]`` on ``device`` (trainer and loader, issue 22)."""
    return stack_modular(configs).to(device)


def build_model(configs, data=None) -> EnsembleMLP:
    """The ensemble MLP of shape-compatible configs, each member from its seed."""
    c = configs[0]
    model = EnsembleMLP(len(configs), c.p, c.width, act=c.activation, tied=c.tied, bias=c.bias)
    return model.init_weights([m.seed for m in configs], c.init)


class ModularTrainer(EnsembleTrainerBase):
    """Trains shape-compatible study-M runs (same P, width, φ, optimizer, …) as one ensemble."""

    def build_data(self) -> ModularEnsembleData:
        return build_data(self.configs, self.device)

    def build_model(self) -> EnsembleMLP:
        return build_model(self.configs, self.data)

    def loss(self, x: torch.Tensor, y: torch.Tensor, denom: float) -> torch.Tensor:
        """``[E]`` per-member loss sums of this chunk divided by the batch size (CE or MSE)."""
        return per_example_loss(self.cfg.loss, self.model(x), y).sum(1) / denom

    def is_eval_epoch(self) -> bool:
        return is_eval_step(self.cfg, self.epoch)

    def compute_metrics(self) -> dict[tuple[str, str], torch.Tensor]:
        kind = self.cfg.loss
        return split_metrics(self.model, self.data, self.options.eval_chunk,
                             lambda logits, y: per_example_loss(kind, logits, y))

    def new_summary(self, cfg) -> ModularSummary:
        return ModularSummary()
