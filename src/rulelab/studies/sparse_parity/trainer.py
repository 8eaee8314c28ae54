"""The sparse-parity ensemble trainer on the generic loop (:mod:`rulelab.engine.base`).

An epoch is one pass over the training set (see :mod:`.config`): ``samples = fresh`` has none,
and an epoch is one step on ``batch_size`` new examples from each member's own generator (the
paper's online SGD); ``samples = fixed`` passes over the member's N examples in shuffled
minibatches (the base's :meth:`~rulelab.engine.base.EnsembleTrainerBase.batches`). Both use the
base's per-member generators (seeded from the member's ``seed``, checkpointed with it), so a
member's batches — and therefore its whole run — do not depend on the ensemble it sits in
(SPEC "Cross-cutting").

Metrics per evaluation (``(split, metric)``):

- ``eval``: ``loss``, ``acc`` on the fixed evaluation set; ``corr_s`` and ``fourier_gap`` (see
  :mod:`.metrics`);
- ``train``: ``loss``, ``acc`` on the fixed training set (``samples = fixed`` only);
- ``weights``: ``support_mass`` and ``rel_change`` (``‖W₁ − W₁(0)‖/‖W₁(0)‖``) of the MLP's first
  layer (NaN for the transformer, whose bits enter through shared token embeddings), and
  ``null_band``: the 95% band of the largest rise in share of the off-support k-subsets so far
  (:mod:`.hidden_null`; its running state is checkpointed with the member).
"""

from __future__ import annotations

import torch

from rulelab.engine.base import EnsembleTrainerBase
from rulelab.studies.sparse_parity.data import ParityEnsembleData, build_data, fresh_batch
from rulelab.studies.sparse_parity.hidden_null import NullBand, null_subsets
from rulelab.studies.sparse_parity.metrics import (
    characters,
    coordinate_mass,
    correct,
    correlations,
    per_example_loss,
    relative_change,
    support_mass,
)
from rulelab.studies.sparse_parity.model import EnsembleParityMLP, build_model
from rulelab.studies.sparse_parity.summary import SparseParitySummary
from rulelab.studies.sparse_parity.task import other_subsets


class SparseParityTrainer(EnsembleTrainerBase):
    """Trains shape-compatible sparse-parity runs (same n, k, model shape, optimizer, batch)."""

    def build_data(self) -> ParityEnsembleData:
        return build_data(self.configs, self.device)

    def build_model(self) -> torch.nn.Module:
        model = build_model(self.configs, self.data)
        W1 = model.first_layer()
        self.w1_init = None if W1 is None else W1.detach().clone().to(self.device)
        self.null_band = None if W1 is None else NullBand(torch.stack([torch.from_numpy(
            null_subsets(c.n_bits, c.k, s.tolist(), c.data_seed))
            for c, s in zip(self.configs, self.data.support.cpu(), strict=True)]))
        return model

    @property
    def aligned_loss(self) -> bool:
        """Engine 4 (the MLP's, :mod:`.model`): the logistic loss on member-aligned rows
        (:func:`.metrics.aligned_rows`), so that a member equals its solo run bitwise."""
        return self.engine_version == EnsembleParityMLP.eager_engine

    def loss(self, x: torch.Tensor, y: torch.Tensor, denom: float) -> torch.Tensor:
        """``[E]`` per-member loss sums of this chunk divided by the batch size."""
        return per_example_loss(self.cfg.loss, self.model(x), y,
                                aligned=self.aligned_loss).sum(1) / denom

    def batches(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The epoch's batches ``x [E, B, n]``, ``y [E, B]``: one fresh batch, or a shuffled
        pass over the fixed set."""
        c = self.cfg
        if c.samples == "fixed":
            return super().batches()
        x, y = fresh_batch(self.generators, self.data.support.cpu(), c.batch_size, c.n_bits)
        return [(x.to(self.device), y.to(self.device))]

    # --- evaluation ---------------------------------------------------------------------------
    @torch.no_grad()
    def outputs(self, x: torch.Tensor) -> torch.Tensor:
        """``f [E, T]`` on ``x [E, T, n]`` in evaluation chunks."""
        chunk = self.options.eval_chunk
        return torch.cat([self.model(x[:, s : s + chunk]) for s in range(0, x.shape[1], chunk)],
                         1)

    def _other_characters(self) -> list[torch.Tensor]:
        """Per member, ``χ_T`` of the evaluation set for the other k-subsets ``[T, C]``;
        computed once and shared by members with the same data seed."""
        if not hasattr(self, "_chi_others"):
            cache: dict[int, torch.Tensor] = {}
            for e, cfg in enumerate(self.configs):
                if cfg.data_seed not in cache:
                    subsets = other_subsets(cfg.n_bits, cfg.k, self.data.support[e].tolist(),
                                            cfg.data_seed)
                    cache[cfg.data_seed] = characters(self.data.eval_x[e], subsets)
            self._chi_others = [cache[c.data_seed] for c in self.configs]
        return self._chi_others

    @torch.no_grad()
    def compute_metrics(self) -> dict[tuple[str, str], torch.Tensor]:
        d, kind = self.data, self.cfg.loss
        out: dict[tuple[str, str], torch.Tensor] = {}
        splits = [("eval", d.eval_x, d.eval_y)]
        if d.train_x is not None:
            splits.append(("train", d.train_x, d.train_y))
        for split, x, y in splits:
            f = self.outputs(x)
            loss = per_example_loss(kind, f, y, aligned=self.aligned_loss)
            out[split, "loss"] = loss.double().mean(1)
            out[split, "acc"] = correct(f, y).double().mean(1)
            if split == "eval":
                corr_s, gap = correlations(f, y, self._other_characters())
                out["eval", "corr_s"], out["eval", "fourier_gap"] = corr_s, gap
        W1 = self.model.first_layer()
        nan = torch.full((self.n_members,), float("nan"), dtype=torch.float64)
        out["weights", "support_mass"] = nan if W1 is None else support_mass(W1, d.support)
        out["weights", "rel_change"] = nan if W1 is None else relative_change(W1, self.w1_init)
        out["weights", "null_band"] = nan if W1 is None else self.null_band.update(
            coordinate_mass(W1))
        return {key: v.cpu() for key, v in out.items()}

    # --- the null band's running state travels with the member's checkpoint ------------------
    def member_state(self, e: int) -> dict:
        state = super().member_state(e)
        if self.null_band is not None:
            state["null_band"] = self.null_band.state(e)
        return state

    def load_member_state(self, e: int, state: dict) -> None:
        super().load_member_state(e, state)
        if self.null_band is not None and (state.get("null_band") is not None
                                           or state["epoch"] > 0):
            self.null_band.load(e, state.get("null_band"))

    def new_summary(self, cfg) -> SparseParitySummary:
        return SparseParitySummary(steps_per_epoch=cfg.steps_per_epoch)
