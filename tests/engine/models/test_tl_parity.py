"""``lab.model(run)`` reads as a TransformerLens model (issue 23 item 3), with TransformerLens
itself as the oracle: the same member exported (:mod:`rulelab.models.tl_export`) gives the
same stacked weights, ``OV``/``QK``, residual-stream readings of the cache
(``accumulated_resid``, ``decompose_resid``, ``stack_head_results``, with and without
``apply_ln`` and a position slice) and the same logits under a zero-ablation
``run_with_hooks`` as TL's own model and ``ActivationCache``.
"""

from __future__ import annotations

import pytest
import torch
from test_tl_export import SHAPES, trained_ish  # the same shapes and off-init weights

from rulelab.errors import UserError
from rulelab.models.member import MemberModel

pytest.importorskip("transformer_lens")

WEIGHTS = ["W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O", "W_in", "W_out", "W_U",
           "b_Q", "b_K", "b_V", "b_O", "b_in", "b_out", "b_U"]
TOL = 5e-5


@pytest.fixture(scope="module", params=["2L", "1L-attn-only-no-ln"])
def pair(request):
    """(our member model, TL's model of the same weights, tokens, our cache, TL's cache)."""
    ensemble = trained_ish(**SHAPES[request.param])
    ours = MemberModel(ensemble, 1)  # member 1: the member axis must be taken, not member 0
    theirs = ours.to_transformer_lens()
    x = torch.randint(0, 12, (16, 5), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        _, cache = ours.run_with_cache(x)
        _, tl_cache = theirs.run_with_cache(ours.to_tokens(x))
    return ours, theirs, x, cache, tl_cache


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and (a - b).abs().max().item() < TOL


def test_weights_are_tl_stacked_without_the_member_axis(pair):
    ours, theirs, *_ = pair
    cfg = ours.cfg
    assert ours.W_Q.shape == (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_head)
    assert ours.W_E.shape == (13, 16) and ours.W_U.shape == (16, 3)
    checked = 0
    for name in WEIGHTS:
        if name in ("W_in", "W_out", "b_in", "b_out") and cfg.attn_only:
            with pytest.raises(UserError, match="attention-only"):
                getattr(ours, name)
            continue
        assert close(getattr(ours, name), getattr(theirs, name)), name
        checked += 1
    assert checked >= 12
    # member 1, not member 0 (the weights of the two differ)
    assert not torch.allclose(ours.W_Q, MemberModel(ours.ensemble, 0).W_Q)
    for name in ("n_layers", "n_heads", "d_head", "d_model", "d_vocab", "n_ctx",
                 "d_vocab_out", "normalization_type", "attn_only"):
        assert getattr(cfg, name) == getattr(theirs.cfg, name), name


def test_ov_and_qk_are_tl_factored_matrices(pair):
    ours, theirs, *_ = pair
    for name in ("OV", "QK"):
        mine, tl = getattr(ours, name), getattr(theirs, name)
        assert type(mine).__name__ == "FactoredMatrix"
        assert close(mine.AB, tl.AB), name
        assert mine.AB.shape == (ours.cfg.n_layers, ours.cfg.n_heads, 16, 16)
        # a reading through FactoredMatrix: the singular values of every head
        assert close(mine.S, tl.S), name


def test_to_tokens_prepends_cls_and_round_trips(pair):
    ours, _, x, *_ = pair
    tokens = ours.to_tokens(x)
    assert tokens.shape == (16, 6) and (tokens[:, 0] == 12).all() and (tokens[:, 1:] == x).all()
    assert ours.to_tokens(tokens) is tokens and (ours.to_input(tokens) == x).all()
    with torch.no_grad():
        assert torch.equal(ours(tokens), ours(x))  # the model takes either


@pytest.mark.parametrize("kwargs", [
    {}, {"incl_mid": True}, {"layer": 1, "incl_mid": True}, {"layer": 1, "mlp_input": True},
    {"apply_ln": True},
    {"apply_ln": True, "layer": 1}, {"pos_slice": 0}, {"apply_ln": True, "pos_slice": [0, 2]},
])
def test_accumulated_resid_matches_tl(pair, kwargs):
    ours, _, _, cache, tl_cache = pair
    if (kwargs.get("mlp_input") or kwargs.get("incl_mid")) and ours.cfg.attn_only:
        pytest.skip("attention-only blocks have no hook_resid_mid in TL")
    mine, labels = cache.accumulated_resid(return_labels=True, **kwargs)
    tl, tl_labels = tl_cache.accumulated_resid(return_labels=True, **kwargs)
    assert labels == tl_labels and close(mine, tl), (kwargs, (mine - tl).abs().max())


@pytest.mark.parametrize("kwargs", [
    {}, {"mode": "attn"}, {"mode": "mlp"}, {"layer": 1, "mlp_input": True},
    {"apply_ln": True}, {"apply_ln": True, "layer": 1, "mlp_input": True},
    {"incl_embeds": False, "pos_slice": 0},
])
def test_decompose_resid_matches_tl(pair, kwargs):
    ours, _, _, cache, tl_cache = pair
    if (kwargs.get("mode") == "mlp" or kwargs.get("layer", 0) >= ours.cfg.n_layers) and \
            ours.cfg.attn_only:
        pytest.skip("no MLP / no layer 1 in the attention-only model")
    mine, labels = cache.decompose_resid(return_labels=True, **kwargs)
    tl, tl_labels = tl_cache.decompose_resid(return_labels=True, **kwargs)
    assert labels == tl_labels and close(mine, tl), kwargs
    if not kwargs:  # the parts add up to the stream entering the unembedding
        assert close(mine.sum(0), cache["resid_post", -1])


@pytest.mark.parametrize("kwargs", [
    {}, {"incl_remainder": True}, {"layer": 1}, {"apply_ln": True}, {"pos_slice": 0},
])
def test_stack_head_results_matches_tl(pair, kwargs):
    ours, _, _, cache, tl_cache = pair
    mine, labels = cache.stack_head_results(return_labels=True, **kwargs)
    tl, tl_labels = tl_cache.stack_head_results(return_labels=True, **kwargs)
    assert labels == tl_labels and close(mine, tl), kwargs
    if not kwargs:  # heads of a layer sum to its attn_out less b_O
        H = ours.cfg.n_heads
        assert close(mine[:H].sum(0) + ours.b_O[0], cache["attn_out", 0])


def test_cache_shorthand_and_dict_behaviour(pair):
    ours, _, _, cache, tl_cache = pair
    assert isinstance(cache, dict) and "blocks.0.attn.hook_z" in cache
    for key in [("resid_pre", 0), ("z", 0, "attn"), ("pattern", -1), "embed"]:
        assert close(cache[key], tl_cache[key]), key
    if ours.cfg.normalization_type == "LN":
        assert close(cache["scale", 0, "ln1"], tl_cache["scale", 0, "ln1"])


def test_run_with_hooks_zero_ablation_matches_tl(pair):
    ours, theirs, x, *_ = pair
    layer = ours.cfg.n_layers - 1

    def zero_head_0(z, hook):
        z = z.clone()
        z[:, :, 0] = 0.0
        return z

    def zero_mlp(act, hook):
        return torch.zeros_like(act)

    name = f"blocks.{layer}.attn.hook_z"
    hooks = [(name, zero_head_0)] + ([] if ours.cfg.attn_only else
                                     [(lambda n: n.endswith("hook_mlp_out"), zero_mlp)])
    with torch.no_grad():
        clean = ours(x)
        mine = ours.run_with_hooks(x, fwd_hooks=hooks)
        tl = theirs.run_with_hooks(ours.to_tokens(x), fwd_hooks=hooks)[:, 0]
        tl_clean = theirs(ours.to_tokens(x))[:, 0]
        again = ours(x)
    assert close(mine, tl)
    assert close(mine - clean, tl - tl_clean)  # the ablation's effect, logit for logit
    assert (mine - clean).abs().max().item() > 1e-3  # … and it did something
    assert torch.equal(again, clean)  # hooks are gone after the call


def test_tl_face_needs_a_transformer():
    from toy_study.trainer import EnsembleToyMLP  # a network that is not a transformer

    mlp = MemberModel(EnsembleToyMLP(1, 7, 4).init_weights([0]))
    with pytest.raises(UserError, match=r"only transformers"):
        _ = mlp.W_Q
    x = torch.randn(3, 7)
    assert torch.equal(mlp.to_input(x), x)  # inputs pass through
