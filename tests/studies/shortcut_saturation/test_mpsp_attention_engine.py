"""Engines 8 (the transformer's eager engine) and 7 (kept) in training (issue 25): a member
trained in an ensemble equals its solo run to the last bit, batches that need padding included
(study S's trainer, the transformer's; the attention core itself:
tests/engine/models/test_attention_core.py, its native sums: test_attention_sums.py, engine 8's
LayerNorm: test_layer_norm_lanes.py)."""

import pytest
import torch

from rulelab.models.transformer import FAST_ATTENTION_ENGINE, LANE_ENGINE
from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer


@pytest.mark.parametrize("engine", [FAST_ATTENTION_ENGINE, LANE_ENGINE])
def test_member_equals_alone_to_the_last_bit_with_padded_batches(engine):
    # 200 examples in micro-batches of 96 end with one of 8; 70 eval examples in chunks of 48
    # end with 22: both padded; three members, so no member's slice starts on a 16 boundary
    # by accident of the ensemble's size.
    shape = dict(seq_len=5, vocab=12, n_train=200, n_eval=70, d_model=16, d_mlp=32, heads=2,
                 layers=2, eval_every=5, epochs=15, lr=3e-3)
    configs = [MPSPRunConfig(**shape, ratio=r, seed=s) for r, s in ((0.5, 0), (0.9, 1),
                                                                     (0.7, 2))]
    opts = Settings(micro_batch=96, eval_chunk=48, engine=str(engine))
    ens = MPSPTrainer(configs, opts)
    assert ens.model.engine == engine
    ens.fit()
    for e in (0, 2):
        alone = MPSPTrainer([configs[e]], opts)
        alone.fit()
        for name, p in ens.model.named_parameters():
            assert torch.equal(p[e], dict(alone.model.named_parameters())[name][0]), name
        assert ens.rows[e] == alone.rows[0]
    assert not torch.equal(ens.model.W_E[0], ens.model.W_E[2])
