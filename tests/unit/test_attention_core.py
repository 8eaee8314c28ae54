"""Engine 2's attention (issue 25): the hand-written keys-outermost core against autograd of the
textbook formula, the fast forward against the hooked one, and a member trained in an ensemble
equal to its solo run to the last bit, batches that need padding included."""

import math

import torch

import rulelab.train.base
from rulelab.models.attention_core import PackedAttention, QueryAttention
from rulelab.models.transformer import FAST_ATTENTION_ENGINE, EnsembleTransformer
from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

E, H, DH, T, B = 2, 2, 4, 5, 16


def _reference(qkv: torch.Tensor, cls_only: bool) -> torch.Tensor:
    """softmax(q kᵀ / √dh) v over ``qkv [E, 3, H, dh, T, B]`` → ``[E, H, dh, Tq, B]``."""
    q, k, v = (t.permute(0, 4, 1, 3, 2) for t in qkv.unbind(1))  # [E, B, H, T, dh]
    if cls_only:
        q = q[:, :, :, :1]
    z = (q @ k.transpose(-1, -2) / math.sqrt(DH)).softmax(-1) @ v
    return z.permute(0, 2, 4, 3, 1)


def test_core_and_its_backward_match_autograd_of_the_formula():
    torch.manual_seed(0)
    qkv = torch.randn(E, 3, H, DH, T, B, dtype=torch.float64, requires_grad=True)
    z = PackedAttention.apply(qkv, 1 / math.sqrt(DH))
    g = torch.randn_like(z)
    torch.testing.assert_close(z, _reference(qkv, False), rtol=1e-12, atol=1e-12)
    (ours,), (theirs,) = (torch.autograd.grad(out, qkv, g)
                          for out in (z, _reference(qkv, False)))
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)

    q = qkv[:, 0, :, :, :1].detach().clone().requires_grad_()
    kv = qkv[:, 1:].detach().clone().requires_grad_()
    z1 = QueryAttention.apply(q, kv, 1 / math.sqrt(DH))
    torch.testing.assert_close(z1, _reference(qkv, True), rtol=1e-12, atol=1e-12)
    g1 = torch.randn_like(z1)
    dq, dkv = torch.autograd.grad(z1, (q, kv), g1)
    (want,) = torch.autograd.grad(_reference(qkv, True), qkv, g1)
    torch.testing.assert_close(dq, want[:, 0, :, :, :1], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dkv, want[:, 1:], rtol=1e-12, atol=1e-12)
    assert dq.abs().sum() > 0 and dkv.abs().sum() > 0


def test_fast_forward_equals_the_hooked_forward_on_any_batch_size():
    cfg = MPSPRunConfig(seq_len=6, vocab=10, d_model=16, d_mlp=24, heads=2, layers=2)
    model = EnsembleTransformer(cfg, 3).init_weights([0, 1, 2])
    model.engine = FAST_ATTENTION_ENGINE
    for batch in (1, 16, 37):  # 1 and 37 are padded to 16 and 48
        x = torch.randint(0, 10, (3, batch, 6))
        fast = model(x)
        with model.hooks([("blocks.0.hook_resid_pre", lambda a, hook: None)]):
            hooked = model(x)  # any hook: the TransformerLens-layout path
        assert fast.shape == (3, batch, 2)
        torch.testing.assert_close(fast, hooked, rtol=1e-5, atol=1e-6)


def test_member_equals_alone_to_the_last_bit_with_padded_batches(monkeypatch):
    monkeypatch.setattr(rulelab.train.base, "engine_in_use", lambda s: FAST_ATTENTION_ENGINE)
    # 200 examples in micro-batches of 96 end with one of 8; 70 eval examples in chunks of 48
    # end with 22: both padded; three members, so no member's slice starts on a 16 boundary
    # by accident of the ensemble's size.
    shape = dict(seq_len=5, vocab=12, n_train=200, n_eval=70, d_model=16, d_mlp=32, heads=2,
                 layers=2, eval_every=5, epochs=15, lr=3e-3)
    configs = [MPSPRunConfig(**shape, ratio=r, seed=s) for r, s in ((0.5, 0), (0.9, 1),
                                                                     (0.7, 2))]
    opts = Settings(micro_batch=96, eval_chunk=48)
    ens = MPSPTrainer(configs, opts)
    assert ens.model.engine == FAST_ATTENTION_ENGINE
    ens.fit()
    for e in (0, 2):
        alone = MPSPTrainer([configs[e]], opts)
        alone.fit()
        for name, p in ens.model.named_parameters():
            assert torch.equal(p[e], dict(alone.model.named_parameters())[name][0]), name
        assert ens.rows[e] == alone.rows[0]
    assert not torch.equal(ens.model.W_E[0], ens.model.W_E[2])
