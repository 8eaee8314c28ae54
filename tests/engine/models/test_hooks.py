"""Hook points: the pinned TransformerLens-style name list, caching, patching, cleanup."""

import pytest
import torch

from rulelab.models.transformer import EnsembleTransformer
from shapes import transformer_shape

BLOCK_HOOKS = [
    "hook_resid_pre", "ln1.hook_scale", "ln1.hook_normalized",
    "attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_attn_scores", "attn.hook_pattern",
    "attn.hook_z", "hook_attn_out", "hook_resid_mid", "ln2.hook_scale", "ln2.hook_normalized",
    "mlp.hook_pre", "mlp.hook_post", "hook_mlp_out", "hook_resid_post",
]
PINNED_2L = (
    ["hook_embed", "hook_pos_embed"]
    + [f"blocks.{layer}.{h}" for layer in (0, 1) for h in BLOCK_HOOKS]
    + ["ln_final.hook_scale", "ln_final.hook_normalized"]
)


def _model(E=3, **kw):
    cfg = transformer_shape(**{"seq_len": 5, "vocab": 12, "d_model": 16, "d_mlp": 32, "heads": 2,
                               **kw})
    return EnsembleTransformer(cfg, E).init_weights(list(range(E))), cfg


def test_hook_names_are_pinned():
    model, _ = _model(layers=2)
    assert model.hook_names == PINNED_2L


def test_attention_only_without_layernorm_has_no_ln_or_mlp_hooks():
    model, _ = _model(layers=1, d_mlp=0, ln=False)
    assert model.hook_names == [
        "hook_embed", "hook_pos_embed", "blocks.0.hook_resid_pre", "blocks.0.attn.hook_q",
        "blocks.0.attn.hook_k", "blocks.0.attn.hook_v", "blocks.0.attn.hook_attn_scores",
        "blocks.0.attn.hook_pattern", "blocks.0.attn.hook_z", "blocks.0.hook_attn_out",
        "blocks.0.hook_resid_mid", "blocks.0.hook_resid_post",
    ]


def test_cache_shapes_carry_member_axis_and_output_is_unchanged():
    model, cfg = _model(E=3, layers=2)
    x = torch.randint(0, cfg.vocab, (3, 7, cfg.seq_len))
    plain = model(x)
    logits, cache = model.run_with_cache(x)
    torch.testing.assert_close(logits, plain, rtol=1e-5, atol=1e-6)
    T = cfg.seq_len + 1
    assert set(cache) == set(PINNED_2L)
    assert cache["blocks.1.attn.hook_pattern"].shape == (3, 7, 2, T, T)
    assert cache["blocks.0.attn.hook_z"].shape == (3, 7, T, 2, 8)
    assert cache["blocks.0.mlp.hook_post"].shape == (3, 7, T, 32)
    rows = cache["blocks.0.attn.hook_pattern"].sum(-1)
    torch.testing.assert_close(rows, torch.ones(3, 7, 2, T))
    _, only = model.run_with_cache(x, names_filter=lambda n: n.endswith("hook_z"))
    assert sorted(only) == ["blocks.0.attn.hook_z", "blocks.1.attn.hook_z"]
    assert not any(hp.has_hooks for hp in model.hook_dict.values())


def test_patching_hook_changes_only_the_patched_member():
    model, cfg = _model(E=3, layers=1)
    x = torch.randint(0, cfg.vocab, (3, 4, cfg.seq_len))
    base = model(x)

    def zero_member_1(z, hook):
        z = z.clone()
        z[1] = 0.0
        return z

    with model.hooks([("blocks.0.attn.hook_z", zero_member_1)]):
        patched = model(x)
    assert not torch.allclose(patched[1], base[1])
    torch.testing.assert_close(patched[[0, 2]], base[[0, 2]], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(model(x), base)  # the hook is gone


def test_temporary_hooks_are_removed_after_an_exception():
    model, cfg = _model(E=2, layers=2)
    x = torch.randint(0, cfg.vocab, (2, 3, cfg.seq_len))
    with pytest.raises(RuntimeError, match="boom"), model.hooks(
        [(lambda n: "hook_resid" in n, lambda t, hook: t * 2)]
    ):
        assert model.hook_dict["blocks.0.hook_resid_pre"].has_hooks
        raise RuntimeError("boom")
    assert not any(hp.has_hooks for hp in model.hook_dict.values())

    def failing(t, hook):
        raise ValueError("inside the forward")

    with pytest.raises(ValueError), model.hooks([("blocks.1.hook_mlp_out", failing)]):
        model(x)
    assert not any(hp.has_hooks for hp in model.hook_dict.values())


def test_unknown_hook_name_raises_and_attaches_nothing():
    model, _ = _model(E=2, layers=1)
    with pytest.raises(KeyError, match="hook_nope"), model.hooks(
        [("hook_embed", lambda t, hook: None), ("blocks.0.hook_nope", lambda t, hook: None)]
    ):
        pass
    assert not any(hp.has_hooks for hp in model.hook_dict.values())


def test_ln_hook_normalized_is_before_the_affine_weights():
    """TransformerLens ≥ 3.0 (PR #770): ``hook_normalized = (x − mean) / scale`` before ``w, b``.

    Fails on the pre-issue-8 hook, which fired after the affine part (``· w + b``).
    """
    model, cfg = _model(E=2, layers=2)
    with torch.no_grad():  # non-trivial affine weights, so before ≠ after
        for n, p in model.named_parameters():
            if n.endswith((".w", ".b")):
                p.add_(0.5 * torch.randn_like(p))
    x = torch.randint(0, cfg.vocab, (2, 5, cfg.seq_len))
    _, cache = model.run_with_cache(x)
    for layer in (0, 1):
        for ln, inp in (("ln1", "hook_resid_pre"), ("ln2", "hook_resid_mid")):
            pre = cache[f"blocks.{layer}.{inp}"]
            centred = pre - pre.mean(-1, keepdim=True)
            scale = (centred.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt()
            got = cache[f"blocks.{layer}.{ln}.hook_normalized"]
            torch.testing.assert_close(cache[f"blocks.{layer}.{ln}.hook_scale"], scale)
            torch.testing.assert_close(got, centred / scale, rtol=1e-5, atol=1e-5)
            mod = getattr(model.blocks[layer], ln)
            after = got * mod.w[:, None, None] + mod.b[:, None, None]
            assert (after - got).abs().max() > 0.1  # the affine part is not in the hook
    # A hook replacing hook_normalized still goes through w, b: set it to 0 → output = b.
    seen = {}
    with model.hooks([("blocks.0.ln1.hook_normalized", lambda t, hook: torch.zeros_like(t)),
                      ("blocks.0.attn.hook_v", lambda t, hook: seen.setdefault("v", t))]):
        model(x)
    attn = model.blocks[0].attn
    want = torch.einsum("ed,ehdk->ehk", model.blocks[0].ln1.b, attn.W_V) + attn.b_V
    torch.testing.assert_close(seen["v"], want[:, None, None].expand_as(seen["v"]),
                               rtol=1e-5, atol=1e-5)
