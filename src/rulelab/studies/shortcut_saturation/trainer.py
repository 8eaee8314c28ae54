"""Study S's ensemble trainer: MPSP data, the ensemble transformer, AdamW (SPEC S.1–S.3)."""

from __future__ import annotations

from rulelab.engine.base import EnsembleTrainerBase
from rulelab.models.transformer import EnsembleTransformer, TransformerShape
from rulelab.studies.shortcut_saturation.data import EnsembleData, stack_mpsp
from rulelab.studies.shortcut_saturation.evaluate import evaluate
from rulelab.studies.shortcut_saturation.summary import MemberSummary, is_legacy

__all__ = ["MPSPTrainer", "build_data", "build_model", "tl_export"]


def build_data(configs, device) -> EnsembleData:
    """The members' MPSP data stacked ``[E, …]`` on ``device`` (trainer and loader, issue 22)."""
    return stack_mpsp(configs).to(device)


def build_model(configs, data=None) -> EnsembleTransformer:
    """The ensemble transformer of shape-compatible configs, each member from its seed."""
    return EnsembleTransformer(TransformerShape.of(configs[0]), len(configs)).init_weights(
        [c.seed for c in configs])


def tl_export(model):
    """``rulelab export tl``: the run's transformer and 256 of its val sequences."""
    return model.ensemble, model.data.val_x[:256]


class MPSPTrainer(EnsembleTrainerBase):
    """Trains shape-compatible MPSP runs as one ensemble."""

    def build_data(self) -> EnsembleData:
        return build_data(self.configs, self.device)

    def build_model(self) -> EnsembleTransformer:
        return build_model(self.configs, self.data)

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
