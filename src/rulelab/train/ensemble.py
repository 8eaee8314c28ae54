"""The ensemble training loop for study S (SPEC S.3, DESIGN §1).

``E`` runs that share shapes train in one forward/backward pass. The loss is the sum over
members of each member's mean loss, so every member gets exactly its own gradient; nothing
reduces across members, and a member whose loss goes NaN is frozen and marked failed alone.

Full batch (the default) is computed in micro-batches whose gradients accumulate into the
same full-batch gradient: the per-step working set then stays cache-sized (a pure speed lever;
the update is the full-batch AdamW update).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from rulelab.models.transformer import EnsembleTransformer
from rulelab.optim.adamw import BatchedAdamW
from rulelab.train.data import stack_mpsp
from rulelab.train.evaluate import evaluate
from rulelab.train.summary import MemberSummary

MetricRow = tuple[int, str, str, float]  # (epoch, split, metric, value)


@dataclass
class TrainOptions:
    """Execution knobs that do not change what is computed (beyond float rounding)."""

    device: str = "cpu"
    # Examples per member per forward chunk. Fixed per member (not per ensemble) so a member
    # sums its gradient in the same order whatever ensemble it sits in: bitwise equivalence.
    micro_batch: int = 512
    eval_chunk: int = 2048


class EnsembleTrainer:
    """Trains ``configs`` (shape-compatible MPSP runs) as one ensemble."""

    def __init__(self, configs, options: TrainOptions | None = None) -> None:
        keys = {c.shape_key() for c in configs}
        if len(keys) != 1:
            raise ValueError("members of one ensemble must share every shape field")
        self.configs = list(configs)
        self.options = options or TrainOptions()
        cfg, E = self.configs[0], len(self.configs)
        self.cfg, self.n_members = cfg, E
        self.device = torch.device(self.options.device)
        self.data = stack_mpsp(self.configs).to(self.device)
        self.model = EnsembleTransformer(cfg, E).init_weights([c.seed for c in self.configs])
        self.model.to(self.device)
        self.opt = BatchedAdamW(
            self.model.parameters(),
            n_members=E,
            lr=[c.lr for c in self.configs],
            weight_decay=[c.weight_decay for c in self.configs],
            beta1=[c.beta1 for c in self.configs],
            beta2=[c.beta2 for c in self.configs],
            eps=[c.eps for c in self.configs],
            warmup=[c.warmup for c in self.configs],
        )
        # Minibatch order: one generator per member, independent of the ensemble it sits in.
        self.generators = [
            torch.Generator().manual_seed(int(np.random.SeedSequence([c.seed, 7]).generate_state(1)[0]))
            for c in self.configs
        ]
        self.summaries = [MemberSummary(c.transient_threshold) for c in self.configs]
        self.rows: list[list[MetricRow]] = [[] for _ in self.configs]
        self.epoch = 0
        self.micro_batch = self.options.micro_batch

    # --- one epoch ----------------------------------------------------------------------------
    def _loss(self, x: torch.Tensor, y: torch.Tensor, denom: float) -> torch.Tensor:
        """``[E]`` per-member loss sums of this chunk divided by the batch size ``denom``."""
        logits = self.model(x)  # [E, b, k]
        E, b, k = logits.shape
        ce = F.cross_entropy(logits.reshape(E * b, k), y.reshape(-1), reduction="none")
        return ce.view(E, b).sum(1) / denom

    def _backward_batch(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Accumulate the mean-loss gradient of batch ``x [E, B, n]`` in micro-batches."""
        B = x.shape[1]
        total = torch.zeros(self.n_members, dtype=torch.float64, device=self.device)
        for s in range(0, B, self.micro_batch):
            loss = self._loss(x[:, s : s + self.micro_batch], y[:, s : s + self.micro_batch], B)
            loss.sum().backward()
            total += loss.detach().double()
        return total

    def train_epoch(self) -> torch.Tensor:
        """One epoch (one step at full batch). Returns the ``[E]`` mean train loss of its last step."""
        cfg, data = self.cfg, self.data
        N = data.n_train
        if cfg.steps_per_epoch == 1:
            batches = [(data.train_x, data.train_y)]
        else:
            # [E, N] per-member permutations, from each member's own generator.
            perm = torch.stack([torch.randperm(N, generator=g) for g in self.generators])
            perm = perm.to(self.device)
            member = torch.arange(self.n_members, device=self.device).unsqueeze(1)
            batches = [
                (data.train_x[member, idx], data.train_y[member, idx])
                for idx in perm.split(cfg.batch_size, dim=1)
            ]
        for x, y in batches:
            self.opt.zero_grad()
            loss = self._backward_batch(x, y)
            bad = ~torch.isfinite(loss).cpu() & self.opt.active
            if bad.any():
                self._fail(bad, f"loss became non-finite at epoch {self.epoch + 1}")
            self.opt.step()
        self.epoch += 1
        return loss

    def _fail(self, members: torch.Tensor, reason: str) -> None:
        self.opt.deactivate(members)
        for e in torch.nonzero(members).flatten().tolist():
            self.summaries[e].failed_reason = reason

    # --- evaluation ---------------------------------------------------------------------------
    def evaluate(self) -> dict[tuple[str, str], torch.Tensor]:
        """Evaluate all members and append the rows of the members still active."""
        metrics = evaluate(self.model, self.data, self.options.eval_chunk)
        for e, summary in enumerate(self.summaries):
            if summary.failed_reason is not None:
                continue
            values = {key: float(v[e]) for key, v in metrics.items()}
            summary.update(self.epoch, values)
            self.rows[e].extend((self.epoch, s, m, v) for (s, m), v in values.items())
        return metrics

    def is_eval_epoch(self) -> bool:
        return self.epoch % self.cfg.eval_every == 0 or self.epoch == self.cfg.epochs

    def fit(self, on_epoch: Callable[[EnsembleTrainer, bool], None] | None = None) -> None:
        """Train to ``cfg.epochs``, evaluating at epoch 0, every ``eval_every`` and at the end.

        ``on_epoch(trainer, evaluated)`` runs after the initial evaluation and every epoch.
        """
        if self.epoch == 0 and not any(self.rows):
            self.evaluate()
            if on_epoch:
                on_epoch(self, True)
        self.model.train()
        while self.epoch < self.cfg.epochs:
            self.train_epoch()
            evaluated = self.is_eval_epoch()
            if evaluated:
                self.evaluate()
            if on_epoch:
                on_epoch(self, evaluated)

    # --- per-member state (checkpoints) ------------------------------------------------------
    def member_state(self, e: int) -> dict:
        return {
            "epoch": self.epoch,
            "params": {n: p[e].detach().cpu().clone() for n, p in self.model.named_parameters()},
            "optim": self.opt.member_state(e),
            "generator": self.generators[e].get_state(),
            "summary": self.summaries[e].as_dict(),
            "rows": list(self.rows[e]),
        }

    def load_member_state(self, e: int, state: dict) -> None:
        if self.epoch not in (0, state["epoch"]) or (e > 0 and state["epoch"] != self.epoch):
            raise ValueError("members of one ensemble must resume from the same epoch")
        self.epoch = int(state["epoch"])
        with torch.no_grad():
            for n, p in self.model.named_parameters():
                p[e].copy_(state["params"][n])
        self.opt.load_member_state(e, state["optim"])
        self.generators[e].set_state(state["generator"])
        self.summaries[e] = MemberSummary.from_dict(state["summary"], self.cfg.transient_threshold)
        self.rows[e] = list(state["rows"])
