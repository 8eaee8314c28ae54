"""The toy task on the generic loop (:mod:`rulelab.engine.base`): data, model, metrics, summary.

Member ``e`` draws its direction ``w* [d]`` and its examples from a generator seeded with its
``data_seed``, labels ``y = [x·w* > 0]``, and flips the first ``round(noise · n_train)`` training
labels (or raises ``ValueError`` where ``broken``: how a test makes a member fail while its
data is built). The model is ``E`` two-layer ReLU networks ``[E, B, d] → [E, B, 2]``, member
``e`` initialised from its own ``seed``. Metrics per evaluation: ``train`` and ``eval``
``loss`` and ``acc``. A run has *generalized* at the first evaluation with eval accuracy
≥ ``LEARNED``. :func:`build_data`, :func:`build_model` and :func:`evaluate` are module functions,
so a stored run can be rebuilt and evaluated without a trainer.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from rulelab.engine.base import EnsembleTrainerBase
from rulelab.engine.per_example import cross_entropy

LEARNED = 0.9


@dataclass
class ToyData:
    train_x: torch.Tensor  # [E, N, d]
    train_y: torch.Tensor  # [E, N]
    eval_x: torch.Tensor  # [E, T, d]
    eval_y: torch.Tensor  # [E, T]

    def to(self, device) -> ToyData:
        return ToyData(*(t.to(device) for t in asdict(self).values()))


def member_tensors(cfg) -> tuple[torch.Tensor, ...]:
    """One member's ``(train_x, train_y, eval_x, eval_y)``."""
    if cfg.broken:
        raise ValueError("toy data: cannot build the data of a member with broken = true")
    gen = torch.Generator().manual_seed(cfg.data_seed)
    w = torch.randn(cfg.d, generator=gen)
    x = torch.randn(cfg.n_train + cfg.n_eval, cfg.d, generator=gen)
    y = (x @ w > 0).long()
    train_y = y[: cfg.n_train].clone()
    flipped = round(cfg.noise * cfg.n_train)
    train_y[:flipped] = 1 - train_y[:flipped]
    return x[: cfg.n_train], train_y, x[cfg.n_train :], y[cfg.n_train :]


class EnsembleToyMLP(nn.Module):
    """``x [E, B, d]`` → logits ``[E, B, 2]``: ``W₂ ReLU(W₁ x + b₁) + b₂`` per member."""

    def __init__(self, n_members: int, d: int, width: int) -> None:
        super().__init__()
        self.W1 = nn.Parameter(torch.empty(n_members, d, width))
        self.b1 = nn.Parameter(torch.zeros(n_members, width))
        self.W2 = nn.Parameter(torch.empty(n_members, width, 2))
        self.b2 = nn.Parameter(torch.zeros(n_members, 2))

    def init_weights(self, seeds) -> EnsembleToyMLP:
        with torch.no_grad():
            for e, seed in enumerate(seeds):
                gen = torch.Generator().manual_seed(int(seed))
                for W in (self.W1, self.W2):
                    W[e].copy_(torch.randn(W.shape[1:], generator=gen) / math.sqrt(W.shape[1]))
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(torch.bmm(x, self.W1) + self.b1.unsqueeze(1))  # [E, B, width]
        return torch.bmm(h, self.W2) + self.b2.unsqueeze(1)  # [E, B, 2]


@dataclass
class ToySummary:
    generalized: bool = False
    first_epoch_generalized: int | None = None
    final_epoch: int = 0
    final_eval_acc: float = math.nan
    final_train_loss: float = math.nan
    failed_reason: str | None = None

    def update(self, epoch: int, values: dict) -> None:
        self.final_epoch = epoch
        self.final_eval_acc = values["eval", "acc"]
        self.final_train_loss = values["train", "loss"]
        if not self.generalized and self.final_eval_acc >= LEARNED:
            self.generalized, self.first_epoch_generalized = True, epoch

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, cfg=None) -> ToySummary:
        return cls(**d)


def build_data(configs, device) -> ToyData:
    """The members' data stacked on the member axis (what the trainer trains on)."""
    parts = [member_tensors(c) for c in configs]
    return ToyData(*(torch.stack(t) for t in zip(*parts, strict=True))).to(device)


def build_model(configs, data=None) -> EnsembleToyMLP:
    """The ensemble of ``configs``, member ``e`` initialised from ``configs[e].seed``."""
    c = configs[0]
    return EnsembleToyMLP(len(configs), c.d, c.width).init_weights([m.seed for m in configs])


@torch.no_grad()
def evaluate(model: nn.Module, data: ToyData) -> dict[tuple[str, str], torch.Tensor]:
    """``{(split, metric): [E]}``: ``loss`` and ``acc`` on ``train`` and ``eval``."""
    out = {}
    for split, x, y in (("train", data.train_x, data.train_y), ("eval", data.eval_x, data.eval_y)):
        logits = model(x)  # [E, B, 2]
        out[split, "loss"] = cross_entropy(logits, y).double().mean(1).cpu()
        out[split, "acc"] = (logits.argmax(-1) == y).double().mean(1).cpu()
    return out


class ToyTrainer(EnsembleTrainerBase):
    """Trains shape-compatible toy runs (same ``d``, ``width``, sizes, optimizer, epochs)."""

    def build_data(self) -> ToyData:
        return build_data(self.configs, self.device)

    def build_model(self) -> nn.Module:
        return build_model(self.configs, self.data)

    def compute_metrics(self) -> dict[tuple[str, str], torch.Tensor]:
        return evaluate(self.model, self.data)

    def new_summary(self, cfg) -> ToySummary:
        return ToySummary()
