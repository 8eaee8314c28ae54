"""Study S's ensemble trainer: MPSP data, the ensemble transformer, AdamW (SPEC S.1–S.3)."""

from __future__ import annotations

from rulelab.models.transformer import EnsembleTransformer
from rulelab.optim.adamw import BatchedAdamW
from rulelab.train.base import EnsembleTrainerBase, MetricRow, TrainOptions
from rulelab.train.data import stack_mpsp
from rulelab.train.evaluate import evaluate
from rulelab.train.summary import MemberSummary, is_legacy

__all__ = ["EnsembleTrainer", "MetricRow", "TrainOptions"]


class EnsembleTrainer(EnsembleTrainerBase):
    """Trains shape-compatible MPSP runs as one ensemble."""

    def build_data(self):
        return stack_mpsp(self.configs).to(self.device)

    def build_model(self) -> EnsembleTransformer:
        return EnsembleTransformer(self.cfg, self.n_members).init_weights(
            [c.seed for c in self.configs]
        )

    def build_optimizer(self) -> BatchedAdamW:
        def each(field: str) -> list:
            return [getattr(c, field) for c in self.configs]

        return BatchedAdamW(
            self.model.parameters(), n_members=self.n_members, lr=each("lr"),
            weight_decay=each("weight_decay"), beta1=each("beta1"), beta2=each("beta2"),
            eps=each("eps"), warmup=each("warmup"),
        )

    def compute_metrics(self):
        return evaluate(self.model, self.data, self.options.eval_chunk)

    def new_summary(self, cfg) -> MemberSummary:
        return MemberSummary(cfg.transient_threshold)

    def load_member_state(self, e: int, state: dict) -> None:
        super().load_member_state(e, state)
        if is_legacy(state["summary"]):  # adv-only summary (before issue 8): recompute (S.3)
            cfg = self.configs[e]
            self.summaries[e] = MemberSummary.replay(
                state["rows"], cfg.transient_threshold, state["summary"].get("failed_reason"))
