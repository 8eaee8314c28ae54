"""Engines 9 (the transformer's eager engine), 8 and 7 (kept) in training (issue 25): a member
trained in an ensemble equals its solo run to the last bit, batches that need padding included
(study S's trainer, the transformer's; the attention core itself:
tests/engine/models/test_attention_core.py, its native sums and fused core:
test_attention_sums.py, engine 8's LayerNorm: test_layer_norm_lanes.py) — and engine 9 at an
odd head count too, where engines 7 and 8 could differ."""

import pytest
import torch

from rulelab.models.transformer import (
    FAST_ATTENTION_ENGINE,
    FUSED_LANE_ENGINE,
    LANE_ENGINE,
    SIZED_PASS_ENGINE,
)
from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer


@pytest.mark.parametrize("engine", [FAST_ATTENTION_ENGINE, LANE_ENGINE, FUSED_LANE_ENGINE])
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


@pytest.mark.parametrize("engine", [LANE_ENGINE, FUSED_LANE_ENGINE])
def test_under_bf16_engines_8_and_9_round_the_matmuls_alone(engine):
    """``--precision bf16`` on engines 8 and 9: the weight matmuls take bf16 operands; the
    attention's sums, LayerNorms and residual stream get fp32 tensors (autocast would hand the
    native kernels bf16 ones, and their fallback would sum the attention in bf16)."""
    from rulelab.models import attention_core, layer_norm_lanes, residual_norm

    cfg = MPSPRunConfig(seq_len=5, vocab=12, n_train=64, n_eval=32, d_model=16, d_mlp=32,
                        heads=2, layers=2, seed=0)
    model = MPSPTrainer([cfg], Settings(engine=str(engine))).model
    x = torch.randint(0, 12, (1, 32, 5))
    seen = []
    functions = (attention_core.PackedAttention, attention_core.QueryAttention,
                 layer_norm_lanes.LaneLayerNorm, residual_norm.ResidualLayerNorm)
    applies = {f: f.apply for f in functions}
    try:
        for f in functions:
            f.apply = lambda *a, f=f: seen.append([t.dtype for t in a if torch.is_tensor(t)]) \
                or applies[f](*a)
        with torch.no_grad():
            fp32 = model(x)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                bf16 = model(x)
    finally:
        for f in functions:
            f.apply = applies[f]
    # per forward: 5 LayerNorms (the first alone, 4 with the residual add before them), 2
    # attentions
    assert len(seen) == 2 * 7 and all(d == torch.float32 for call in seen for d in call)
    assert bf16.dtype == torch.float32 and not torch.equal(bf16, fp32)  # bf16 did round
    # Two blocks of bf16-rounded matmul operands: within a few bf16 ulps (2⁻⁸) of fp32.
    torch.testing.assert_close(bf16, fp32, rtol=0.05, atol=0.05)


def test_member_equals_alone_to_the_last_bit_under_bf16():
    shape = dict(seq_len=5, vocab=12, n_train=200, n_eval=70, d_model=16, d_mlp=32, heads=2,
                 layers=2, eval_every=5, epochs=6, lr=3e-3)
    configs = [MPSPRunConfig(**shape, ratio=r, seed=s) for r, s in ((0.5, 0), (0.9, 1))]
    # engine 10 under bf16 (the default where the CPU lacks AVX-512-BF16; engine 12's bf16 has
    # its own test: test_mpsp_tile_engine)
    opts = Settings(micro_batch=96, eval_chunk=48, precision="bf16", engine="10")
    ens = MPSPTrainer(configs, opts)
    assert ens.model.engine == SIZED_PASS_ENGINE  # engine 9's kernels
    ens.fit()
    alone = MPSPTrainer([configs[1]], opts)
    alone.fit()
    for name, p in ens.model.named_parameters():
        assert torch.equal(p[1], dict(alone.model.named_parameters())[name][0]), name
    fp32 = MPSPTrainer([configs[1]], opts.merged(precision="fp32"))
    fp32.fit()
    assert not torch.equal(fp32.model.W_E[0], alone.model.W_E[0])  # bf16 moved the numbers


def test_at_one_head_engine_9s_member_equals_its_solo_forward_where_engine_8s_does_not():
    """One head, 48 examples: 2 members × 48 softmax rows of one query are 6 blocks of 16, a
    member alone 3 — PyTorch's ``sum(0)`` (engines 7, 8) adds the keys of a block left past
    the last whole 32 in another order, so a member's last block differs from its solo run;
    engine 9 adds every element's keys in key order."""
    cfg = MPSPRunConfig(seq_len=10, vocab=64, d_model=16, d_mlp=32, heads=1, layers=2)
    x = torch.randint(0, 64, (2, 48, 10), generator=torch.Generator().manual_seed(0))
    equal = {}
    for engine in (LANE_ENGINE, FUSED_LANE_ENGINE):
        ens = MPSPTrainer([cfg, cfg.model_copy(update={"seed": 1})],
                          Settings(engine=str(engine))).model
        alone = MPSPTrainer([cfg], Settings(engine=str(engine))).model
        with torch.no_grad():
            equal[engine] = torch.equal(ens(x)[0], alone(x[:1])[0])
    assert equal == {LANE_ENGINE: False, FUSED_LANE_ENGINE: True}


def test_at_two_heads_and_eleven_positions_engine_9_trains_engine_8s_numbers():
    """Every preset's shape (2 heads, the batch padded to 16, ≤ 16 positions): PyTorch's
    ``sum(0)`` (engine 8) adds every element's keys in key order there, so engine 9 — its fused
    core included — trains the same bits, padded micro-batches and evaluation chunks too."""
    shape = dict(seq_len=10, vocab=24, n_train=200, n_eval=70, d_model=16, d_mlp=32, heads=2,
                 layers=2, eval_every=3, epochs=6, lr=3e-3)
    configs = [MPSPRunConfig(**shape, ratio=r, seed=s) for r, s in ((0.5, 0), (0.9, 1),
                                                                     (0.7, 2))]
    trained = {}
    for engine in (LANE_ENGINE, FUSED_LANE_ENGINE):
        ens = MPSPTrainer(configs, Settings(micro_batch=96, eval_chunk=48, engine=str(engine)))
        ens.fit()
        trained[engine] = ens
    a, b = trained[LANE_ENGINE], trained[FUSED_LANE_ENGINE]
    for (name, p), q in zip(a.model.named_parameters(), b.model.parameters(), strict=True):
        assert torch.equal(p, q), name
    assert a.rows == b.rows
