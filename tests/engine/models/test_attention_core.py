"""Engine 7's attention (issue 25): the hand-written keys-outermost core against autograd of the
textbook formula and the fast forward against the hooked one. A member trained with it equals
its solo run to the last bit (study S's trainer, the transformer's):
tests/studies/shortcut_saturation/test_mpsp_attention_engine.py."""

import math

import pytest
import torch

from rulelab.models.attention_core import PackedAttention, QueryAttention
from rulelab.models.transformer import (
    FAST_ATTENTION_ENGINE,
    FUSED_LANE_ENGINE,
    LANE_ENGINE,
    EnsembleTransformer,
)
from shapes import transformer_shape

E, H, DH, T, B = 2, 2, 4, 5, 16


def _reference(qkv: torch.Tensor, cls_only: bool) -> torch.Tensor:
    """softmax(q kᵀ / √dh) v over ``qkv [E, 3, H, dh, T, B]`` → ``[E, H, dh, Tq, B]``."""
    q, k, v = (t.permute(0, 4, 1, 3, 2) for t in qkv.unbind(1))  # [E, B, H, T, dh]
    if cls_only:
        q = q[:, :, :, :1]
    z = (q @ k.transpose(-1, -2) / math.sqrt(DH)).softmax(-1) @ v
    return z.permute(0, 2, 4, 3, 1)


@pytest.mark.parametrize("in_order", [False, True])
def test_core_and_its_backward_match_autograd_of_the_formula(in_order):
    torch.manual_seed(0)
    qkv = torch.randn(E, 3, H, DH, T, B, dtype=torch.float64, requires_grad=True)
    z = PackedAttention.apply(qkv, 1 / math.sqrt(DH), in_order)
    g = torch.randn_like(z)
    torch.testing.assert_close(z, _reference(qkv, False), rtol=1e-12, atol=1e-12)
    (ours,), (theirs,) = (torch.autograd.grad(out, qkv, g)
                          for out in (z, _reference(qkv, False)))
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)

    q = qkv[:, 0, :, :, :1].detach().clone().requires_grad_()
    kv = qkv[:, 1:].detach().clone().requires_grad_()
    z1 = QueryAttention.apply(q, kv, 1 / math.sqrt(DH), in_order)
    torch.testing.assert_close(z1, _reference(qkv, True), rtol=1e-12, atol=1e-12)
    g1 = torch.randn_like(z1)
    dq, dkv = torch.autograd.grad(z1, (q, kv), g1)
    (want,) = torch.autograd.grad(_reference(qkv, True), qkv, g1)
    torch.testing.assert_close(dq, want[:, 0, :, :, :1], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dkv, want[:, 1:], rtol=1e-12, atol=1e-12)
    assert dq.abs().sum() > 0 and dkv.abs().sum() > 0


@pytest.mark.parametrize("engine", [FAST_ATTENTION_ENGINE, LANE_ENGINE, FUSED_LANE_ENGINE])
def test_fast_forward_equals_the_hooked_forward_on_any_batch_size(engine):
    cfg = transformer_shape(seq_len=6, vocab=10, d_model=16, d_mlp=24, heads=2, layers=2)
    model = EnsembleTransformer(cfg, 3).init_weights([0, 1, 2])
    model.engine = engine
    params = list(model.parameters())
    for batch in (1, 16, 37):  # 1 and 37 are padded to 16 and 48
        x = torch.randint(0, 10, (3, batch, 6))
        fast = model(x)
        with model.hooks([("blocks.0.hook_resid_pre", lambda a, hook: None)]):
            hooked = model(x)  # any hook: the TransformerLens-layout path
        assert fast.shape == (3, batch, 2)
        # each engine's own path ran (its LayerNorm's backward in the graph), not the hooked one
        norm = "MemberLayerNorm" if engine == FAST_ATTENTION_ENGINE else "LaneLayerNorm"
        assert f"{norm}Backward" in _graph(fast) and f"{norm}Backward" not in _graph(hooked)
        torch.testing.assert_close(fast, hooked, rtol=1e-5, atol=1e-6)
        g = torch.randn_like(fast)  # and every parameter's gradient
        for a, b in zip(torch.autograd.grad(fast, params, g),
                        torch.autograd.grad(hooked, params, g), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def _graph(t: torch.Tensor) -> set[str]:
    """The names of the autograd nodes that computed ``t``."""
    seen, todo = set(), [t.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            todo.extend(n for n, _ in node.next_functions)
    return {type(node).__name__ for node in seen}
