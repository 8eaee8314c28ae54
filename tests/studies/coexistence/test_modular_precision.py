"""Study M's trainer under the engine's ``precision = "bf16"`` (issue 13): it overrides ``loss``,
and the engine's autocast still covers it (the engine's own precision tests:
tests/engine/train/test_precision.py)."""

import torch

from rulelab.engine.runner import trainer_class
from rulelab.settings import Settings
from rulelab.studies.coexistence.config import ModularRunConfig


def _fit(configs, precision: str):
    tr = trainer_class(configs[0].task)(configs, Settings(micro_batch=96, precision=precision))
    tr.fit()
    return tr


def _params(tr) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in tr.model.named_parameters()}


def test_every_trainer_honours_bf16():
    """Study M's trainer overrides ``loss``; the engine's autocast still covers it."""
    cfgs = [ModularRunConfig(p=11, width=16, noise=0.0, seed=s, epochs=5, eval_every=5,
                             log_eval_steps=0) for s in (0, 1)]
    fp32, bf16 = _fit(cfgs, "fp32"), _fit(cfgs, "bf16")
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())
    assert any(not torch.equal(p, _params(fp32)[n]) for n, p in _params(bf16).items())
