"""The residual add fused with the next LayerNorm, and the QKV biases added by the attention core
(engines 8 and 9, issue 25): the kernel path and the PyTorch path give the same bits, and the
whole lane forward with both gives the same logits and gradients, bit for bit, as the unfused
chain they replaced (each projection's bias added after its matmul, the residual add, the
LayerNorm; autograd adding the stream's two gradients) — with and without MLPs and LayerNorms,
at one to three layers, engines 8 and 9, under bf16 matmuls, and for a padded batch."""

import math

import pytest
import torch
import torch.nn.functional as F

from native_paths import native_switch
from rulelab.models import lane_forward as lane
from rulelab.models import layer_norm_lanes
from rulelab.models.attention_core import PackedAttention, QueryAttention
from rulelab.models.residual_norm import ResidualLayerNorm
from rulelab.models.transformer import EnsembleTransformer
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig


@pytest.fixture
def native(monkeypatch):
    return native_switch(monkeypatch, layer_norm_lanes)


def unfused_attention(attn, x, cls_only, low, in_order):
    """``lane_forward.attention`` as it was: every projection's bias added after its matmul."""
    E, d, T, B = x.shape
    H, dh = attn.n_heads, attn.d_head
    n = H * dh
    Wt = torch.cat([attn.W_Q, attn.W_K, attn.W_V], dim=1).transpose(2, 3).reshape(E, 3 * n, d)
    b = torch.cat([attn.b_Q, attn.b_K, attn.b_V], dim=1).reshape(E, 3 * n)
    cols = x.reshape(E, d, T * B)
    scale = 1.0 / math.sqrt(dh)
    if cls_only:
        q = lane.projection(Wt[:, :n], b[:, :n], cols[:, :, :B], low).view(E, H, dh, 1, B)
        kv = lane.projection(Wt[:, n:], b[:, n:], cols, low).view(E, 2, H, dh, T, B)
        z = QueryAttention.apply(q, kv, scale, in_order)
    else:
        qkv = lane.projection(Wt, b, cols, low).view(E, 3, H, dh, T, B)
        z = PackedAttention.apply(qkv, scale, in_order)
    Tq = z.shape[3]
    Wo_t = attn.W_O.reshape(E, n, d).transpose(1, 2)
    return lane.projection(Wo_t, attn.b_O, z.reshape(E, n, Tq * B), low).view(E, d, Tq, B)


def unfused_forward(model, x, low=None, in_order=True):
    """The lane forward as it was before the fusion: each sublayer's bias added by its
    projection, the stream by ``+``, then the next LayerNorm on its own."""
    B = x.shape[1]
    resid = lane.embed_lanes(model, x)
    for i, block in enumerate(model.blocks):
        last = i == len(model.blocks) - 1
        attn_out = unfused_attention(block.attn, lane.layer_norm(block.ln1, resid), last, low,
                                     in_order)
        resid = (resid[:, :, :1] if last else resid) + attn_out
        if block.mlp is not None:
            resid = resid + lane.mlp(block.mlp, lane.layer_norm(block.ln2, resid), low)
    cls = lane.layer_norm(model.ln_final, resid[:, :, 0])
    logits = lane.projection(model.W_U.transpose(1, 2), model.b_U, cls, low).transpose(1, 2)
    return logits[:, :B]


def _grads(model, f, x, labels):
    model.zero_grad(set_to_none=True)
    out = f(model, x)
    F.cross_entropy(out.reshape(-1, out.shape[-1]), labels).backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def _same(a, b):
    return torch.equal(a.contiguous().view(torch.int32), b.contiguous().view(torch.int32))


# layers, d_mlp (0: attention only), LayerNorm, engine, batch (40: padded to 48)
@pytest.mark.parametrize(("layers", "d_mlp", "ln", "engine", "B"),
                         [(2, 48, True, 9, 64), (2, 48, True, 8, 40), (1, 32, True, 9, 48),
                          (3, 32, True, 9, 32), (2, 0, True, 9, 32), (2, 32, False, 9, 32)])
def test_the_fused_stream_gives_the_unfused_bits(native, layers, d_mlp, ln, engine, B):
    cfg = MPSPRunConfig(layers=layers, heads=2, d_model=24, d_mlp=d_mlp, ln=ln, seq_len=6,
                        vocab=20)
    model = EnsembleTransformer(cfg, 3).init_weights([0, 1, 2])
    gen = torch.Generator().manual_seed(layers * 10 + d_mlp)
    with torch.no_grad():  # nonzero biases and LayerNorm weights: every term matters
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.1)
    x = torch.randint(0, 20, (3, B, 6), generator=gen)
    labels = torch.randint(0, 2, (3 * B,), generator=gen)
    in_order = engine == 9
    want = _grads(model, lambda m, x: unfused_forward(m, x, in_order=in_order), x, labels)
    for on in (True, False):
        got = native(on, lambda: _grads(model, lambda m, x: lane.lane_forward(m, x, in_order),
                                        x, labels))
        assert _same(got[0], want[0])
        for name, g in want[1].items():
            assert _same(got[1][name], g), (on, name)


def test_under_bf16_matmuls_the_fused_stream_gives_the_unfused_bits(native):
    cfg = MPSPRunConfig(layers=2, heads=2, d_model=16, d_mlp=32, seq_len=5, vocab=12)
    model = EnsembleTransformer(cfg, 2).init_weights([0, 1])
    x, labels = torch.randint(0, 12, (2, 32, 5)), torch.randint(0, 2, (64,))
    want = _grads(model, lambda m, x: unfused_forward(m, x, torch.bfloat16), x, labels)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = native(True, lambda: _grads(model, lambda m, x: lane.lane_forward(m, x, True),
                                          x, labels))
    assert _same(got[0], want[0])
    assert all(_same(got[1][n], g) for n, g in want[1].items())


def test_kernel_and_pytorch_paths_agree_with_one_gradient_missing(native):
    gen = torch.Generator().manual_seed(3)
    base = torch.randn(2, 8, 3, 32, generator=gen)[:, :, :1]  # a view, as the last block's
    o, bias = torch.randn(2, 8, 1, 32, generator=gen), torch.randn(2, 8, generator=gen)
    w, b = torch.randn(2, 8, generator=gen), torch.randn(2, 8, generator=gen)
    gy = torch.randn(2, 8, 1, 32, generator=gen)

    def run():
        leaves = [t.clone().requires_grad_() for t in (base, o, bias, w, b)]
        s, y = ResidualLayerNorm.apply(*leaves, 1e-5)
        y.backward(gy)  # s unused: no gradient reaches it (None, not zeros to add)
        return [s.detach(), y.detach(), *(t.grad for t in leaves)]

    ours, theirs = native(True, run), native(False, run)
    for a, c in zip(ours, theirs, strict=True):
        assert _same(a, c)
    torch.testing.assert_close(ours[0], base + (o + bias[:, :, None, None]), rtol=0, atol=0)
    torch.testing.assert_close(ours[4], ours[3].sum((2, 3)))  # the bias sums o's gradient


def test_a_bias_not_in_contiguous_memory_gives_the_same_bits(native):
    """A bias passed as a view (one member's row repeated: stride 0, as a functional call with
    expanded weights hands it) is read as its values: the kernel once read a temporary
    contiguous copy freed before the call (the first members' bias came out as garbage)."""
    gen = torch.Generator().manual_seed(5)
    base, o = torch.randn(3, 8, 2, 32, generator=gen), torch.randn(3, 8, 2, 32, generator=gen)
    w, b, row = (torch.randn(1, 8, generator=gen) for _ in range(3))
    views = [t.expand(3, 8) for t in (row, w, b)]
    for on in (True, False):
        strided = native(on, lambda: ResidualLayerNorm.apply(base, o, *views, 1e-5))
        dense = native(on, lambda: ResidualLayerNorm.apply(base, o, *(v.contiguous()
                                                                      for v in views), 1e-5))
        assert all(_same(a, c) for a, c in zip(strided, dense, strict=True))
