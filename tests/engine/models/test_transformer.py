"""The ensemble transformer against a plain per-member reference written with torch ops."""

import math

import pytest
import torch
import torch.nn.functional as F

from rulelab.models.transformer import EnsembleTransformer
from shapes import transformer_shape


def reference_forward(model: EnsembleTransformer, e: int, x: torch.Tensor) -> torch.Tensor:
    """Member ``e`` alone, ``x [B, n]`` → logits ``[B, k]``: textbook pre-LN transformer."""
    cfg = model.cfg
    P = {n: p[e] for n, p in model.named_parameters()}
    tokens = torch.cat([torch.full((x.shape[0], 1), cfg.vocab), x], 1)
    h = P["W_E"][tokens] + P["W_pos"][: tokens.shape[1]]

    def ln(v, name):
        if not cfg.ln:
            return v
        return F.layer_norm(v, (cfg.d_model,), P[f"{name}.w"], P[f"{name}.b"], 1e-5)

    for layer in range(cfg.layers):
        a = f"blocks.{layer}.attn."
        inp = ln(h, f"blocks.{layer}.ln1")
        q = torch.einsum("btd,hdk->bhtk", inp, P[a + "W_Q"]) + P[a + "b_Q"][:, None]
        k = torch.einsum("btd,hdk->bhtk", inp, P[a + "W_K"]) + P[a + "b_K"][:, None]
        v = torch.einsum("btd,hdk->bhtk", inp, P[a + "W_V"]) + P[a + "b_V"][:, None]
        att = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(-1)
        z = att @ v  # [b, h, t, dh]
        h = h + torch.einsum("bhtk,hkd->btd", z, P[a + "W_O"]) + P[a + "b_O"]
        if cfg.d_mlp:
            m = f"blocks.{layer}.mlp."
            pre = ln(h, f"blocks.{layer}.ln2") @ P[m + "W_in"] + P[m + "b_in"]
            act = F.relu(pre) if cfg.act == "relu" else F.gelu(pre)
            h = h + act @ P[m + "W_out"] + P[m + "b_out"]
    h = ln(h, "ln_final")
    return h[:, 0] @ P["W_U"] + P["b_U"]


@pytest.mark.parametrize("kw", [
    dict(layers=2, heads=2, act="relu", ln=True),
    dict(layers=1, heads=1, act="gelu", ln=True, label_mod=3),
    dict(layers=2, heads=4, act="relu", ln=False, d_mlp=0),
])
def test_matches_reference_for_every_member(kw):
    cfg = transformer_shape(**{"seq_len": 6, "vocab": 10, "d_model": 16, "d_mlp": 24, **kw})
    E = 3
    model = EnsembleTransformer(cfg, E).init_weights([5, 6, 7])
    with torch.no_grad():  # non-trivial LN and bias values, so they are exercised too
        for n, p in model.named_parameters():
            if not n.split(".")[-1].startswith("W_"):
                p.add_(0.1 * torch.randn_like(p))
    x = torch.randint(0, cfg.vocab, (E, 9, cfg.seq_len))
    logits = model(x)
    assert logits.shape == (E, 9, cfg.label_mod)
    for e in range(E):
        ref = reference_forward(model, e, x[e])
        torch.testing.assert_close(logits[e], ref, rtol=1e-4, atol=1e-5)
    full, _ = model.run_with_cache(x)  # the full path (no CLS-only shortcut) agrees as well
    torch.testing.assert_close(full, logits, rtol=1e-4, atol=1e-5)


def test_member_init_depends_only_on_its_seed():
    cfg = transformer_shape(seq_len=4, vocab=8, d_model=16, d_mlp=16)
    big = EnsembleTransformer(cfg, 3).init_weights([11, 12, 13])
    alone = EnsembleTransformer(cfg, 1).init_weights([12])
    for (n, p), (_, q) in zip(big.named_parameters(), alone.named_parameters(), strict=True):
        assert torch.equal(p[1], q[0]), n
    assert not torch.equal(big.W_E[0], big.W_E[1])


@pytest.mark.parametrize("n_query", [1, 3])
def test_head_matmul_backward_is_bitwise_bmm(n_query):
    """One query row takes the elementwise outer-product backward: bitwise the matmul's own."""
    from rulelab.models.components import head_matmul

    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 2, n_query, 32, generator=g) * torch.rand(64, 2, n_query, 32, generator=g)
    k = torch.randn(64, 2, 11, 32, generator=g) * 1e3  # b as attention passes it: kᵀ, a view
    w = torch.randn(64, 2, n_query, 11, generator=g)
    grads = []
    for fn in (head_matmul, torch.matmul):
        a_, k_ = a.clone().requires_grad_(), k.clone().requires_grad_()
        out = fn(a_, k_.transpose(-1, -2))
        if fn is head_matmul:  # one row: the broadcast backward, else the matmul's own
            assert ("_RowBmm" in out.grad_fn.next_functions[0][0].name()) == (n_query == 1)
        (out * w).sum().backward()
        grads.append((out.detach(), a_.grad, k_.grad))
    for mine, ref in zip(*grads, strict=True):
        assert torch.equal(mine, ref)


def test_cls_only_gradients_match_the_full_path():
    """The training path (last block for the CLS query only) has the full model's gradients."""
    cfg = transformer_shape(layers=2, heads=2, seq_len=6, vocab=10, d_model=16, d_mlp=24)
    model = EnsembleTransformer(cfg, 2).init_weights([1, 2])
    x = torch.randint(0, cfg.vocab, (2, 9, cfg.seq_len))
    grads = []
    for cached in (False, True):  # run_with_cache runs every position (hooks on)
        model.zero_grad()
        logits = model.run_with_cache(x)[0] if cached else model(x)
        logits.square().sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    assert grads[0]["blocks.1.attn.W_K"].abs().sum() > 0  # the one-row backward carried a signal
    for n in grads[0]:
        torch.testing.assert_close(grads[0][n], grads[1][n], rtol=1e-4, atol=1e-6, msg=n)
