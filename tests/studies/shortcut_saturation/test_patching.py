"""Cross-split activation patching (SPEC S.4.4) against exact identities and hand computations."""

import numpy as np
import pytest
import torch

from rulelab.models.transformer import EnsembleTransformer
from rulelab.studies.shortcut_saturation.analyses.patching import (
    REL_GAP,
    logit_diff,
    normalise,
    patch_grid,
    run_patched,
)
from rulelab.studies.shortcut_saturation.analyses.twins import aligned_twins
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.task import make_mpsp, shortcut_of

V, N, TOL = 16, 6, 2e-4


def _setup(k=2, kind="max", *, layers=2, heads=2, d_mlp=32, ln=True, seeds=(1, 2, 3), B=48):
    cfg = MPSPRunConfig(
        label_mod=k, shortcut=kind, seq_len=N, vocab=V, layers=layers, heads=heads,
        d_model=16, d_mlp=d_mlp, ln=ln,
    )
    model = EnsembleTransformer(cfg, len(seeds)).init_weights(seeds)
    E = len(seeds)
    adv = make_mpsp(
        label_mod=k, shortcut=kind, ratio=0.5, seq_len=N, vocab=V, n_train=16, n_eval=512,
        data_seed=0,
    )["adv"]
    twins, ok = aligned_twins(adv.x, k, kind, V, np.random.default_rng(0))
    x, tw = adv.x[ok][: E * B], twins[ok][: E * B]
    s = shortcut_of(x, k, kind)
    as_t = lambda a: torch.as_tensor(np.asarray(a)).reshape(E, B, *np.shape(a)[1:])  # noqa: E731
    return model, as_t(x), as_t(tw), as_t(x.sum(1) % k), as_t(s)


def _ld(model, x, y, s):
    """Batch-mean logit[y] − logit[s] by hand: ``[E]``."""
    with torch.no_grad():
        lg = model(x)
    return (lg.gather(-1, y[..., None]) - lg.gather(-1, s[..., None]))[..., 0].mean(1)


def test_logit_diff_uses_the_shortcut_class():
    logits = torch.tensor([[0.0, 1.0, 5.0], [2.0, -1.0, 0.5]])
    # k=3: label 0 vs shortcut class 1, even though class 2 has the larger logit.
    assert torch.allclose(logit_diff(logits, torch.tensor([0, 2]), torch.tensor([1, 0])),
                          torch.tensor([-1.0, -1.5]))


@pytest.mark.parametrize("k", [2, 3])
def test_patch_everything_is_one_and_nothing_is_zero(k):
    model, x, tw, y, s = _setup(k)
    _, cache = model.run_with_cache(tw)
    ld_o, ld_t = _ld(model, x, y, s), _ld(model, tw, y, s)
    assert torch.all((ld_t - ld_o).abs() > 1e-3)  # a real gap to normalise by
    sets = [[]] + [[(f"blocks.{l}.hook_resid_pre", None, None)] for l in range(2)]
    ld = run_patched(model, x, cache, sets, y, s).mean(-1)  # [3, E]
    score = (ld - ld_o) / (ld_t - ld_o)
    assert torch.allclose(score[0], torch.zeros(3), atol=TOL)  # nothing patched → 0
    assert torch.allclose(score[1:], torch.ones(2, 3), atol=TOL)  # all positions → 1


@pytest.mark.parametrize("kind", ["max", "first"])
@pytest.mark.parametrize("k", [2, 3])
def test_resid_pre_layer0_equals_swapping_one_token(k, kind):
    """resid_pre at layer 0 is embed + pos of one token: patching it = swapping that token."""
    model, x, tw, y, s = _setup(k, kind)
    g = patch_grid(model, x, tw, y, s)
    ld_o, ld_t = _ld(model, x, y, s), _ld(model, tw, y, s)
    assert torch.allclose(g["ld_orig"], ld_o, atol=1e-5)
    assert torch.allclose(g["ld_twin"], ld_t, atol=1e-5)
    for j in range(1, N + 1):
        hybrid = x.clone()
        hybrid[..., j - 1] = tw[..., j - 1]
        want = (_ld(model, hybrid, y, s) - ld_o) / (ld_t - ld_o)
        assert torch.allclose(g["resid_pre"][:, 0, j], want, atol=TOL)
    assert torch.allclose(g["resid_pre"][:, 0, 0], torch.zeros(3), atol=TOL)  # CLS is shared


def test_grid_shapes_and_last_layer_reads_only_cls():
    model, x, tw, y, s = _setup(3, layers=2, heads=2)
    g = patch_grid(model, x, tw, y, s)
    E, L, T, H = 3, 2, N + 1, 2
    assert g["resid_pre"].shape == (E, L, T) and g["z"].shape == (E, L, T, H)
    assert g["z_all"].shape == (E, L, H) and g["mlp_out"].shape == (E, L, T)
    assert g["mlp_out_all"].shape == (E, L)
    # In the last block only the CLS query reaches the logits.
    assert torch.allclose(g["z"][:, -1, 1:], torch.zeros(E, T - 1, H), atol=TOL)
    assert torch.allclose(g["mlp_out"][:, -1, 1:], torch.zeros(E, T - 1), atol=TOL)
    assert torch.allclose(g["z"][:, -1, 0], g["z_all"][:, -1], atol=TOL)
    assert torch.allclose(g["mlp_out"][:, -1, 0], g["mlp_out_all"][:, -1], atol=TOL)
    # without the classes, the rule (the run's ``shortcut``) computes them
    g2 = patch_grid(model, x, tw, y, kind="max")
    assert torch.allclose(g2["z"], g["z"], atol=1e-6)


@pytest.mark.parametrize("ln", [True, False])
def test_one_layer_one_head_output_at_cls_carries_everything(ln):
    """1L·1H: the CLS residual is e_CLS + p_0 + b_O + z[CLS] W_O, so z at CLS scores 1."""
    model, x, tw, y, s = _setup(2, layers=1, heads=1, ln=ln)
    g = patch_grid(model, x, tw, y, s, rel_gap=0.0)  # an identity: holds whatever the gap
    assert torch.allclose(g["z"][:, 0, 0, 0], torch.ones(3), atol=TOL)
    assert torch.allclose(g["z"][:, 0, 1:, 0], torch.zeros(3, N), atol=TOL)
    assert torch.allclose(g["mlp_out"][:, 0, 1:], torch.zeros(3, N), atol=TOL)


def test_uniform_attention_linear_model_by_hand():
    """Attention-only, no LN, W_Q = W_K = 0 (uniform attention over the T tokens): LD is
    linear in the tokens, so the layer-0 resid grid is each token's share of the gap."""
    model, x, tw, y, s = _setup(3, layers=1, heads=1, d_mlp=0, ln=False)
    with torch.no_grad():
        model.blocks[0].attn.W_Q.zero_()
        model.blocks[0].attn.W_K.zero_()
    g = patch_grid(model, x, tw, y, s, rel_gap=0.0)  # exact by hand, whatever the gap
    assert "mlp_out" not in g and "mlp_out_all" not in g
    P = {n: p.detach() for n, p in model.named_parameters()}
    ov = torch.einsum("evd,edh,ehm,emk->evk", P["W_E"], P["blocks.0.attn.W_V"][:, 0],
                      P["blocks.0.attn.W_O"][:, 0], P["W_U"])  # [E, d_vocab, k] per token
    T = N + 1

    def token_ld(tokens):  # [E, B, n] → per-token LD contribution [E, B, n]
        c = torch.stack([ov[e][tokens[e]] for e in range(3)]) / T  # [E, B, n, k]
        return c.gather(-1, y[..., None, None].expand(-1, -1, N, 1))[..., 0] - c.gather(
            -1, s[..., None, None].expand(-1, -1, N, 1))[..., 0]

    delta = token_ld(tw) - token_ld(x)  # [E, B, n]
    want = delta.mean(1) / delta.sum(-1).mean(1, keepdim=True)  # [E, n]
    assert torch.allclose(g["resid_pre"][:, 0, 1:], want, atol=TOL)
    assert torch.allclose(g["resid_pre"][:, 0].sum(-1), torch.ones(3), atol=TOL)
    assert torch.allclose(g["z_all"][:, 0, 0], torch.ones(3), atol=TOL)


def test_members_are_independent_and_chunking_is_invisible():
    model, x, tw, y, s = _setup(2, seeds=(1, 2, 3), B=32)
    g = patch_grid(model, x, tw, y, s)
    g1 = patch_grid(model, x, tw, y, s, max_batch=32)  # one copy per forward
    for key in g:
        assert torch.allclose(g[key], g1[key], atol=1e-5, equal_nan=True), key
    solo = EnsembleTransformer(model.cfg, 1).init_weights([2])
    gs = patch_grid(solo, x[1:2], tw[1:2], y[1:2], s[1:2])
    for key in g:
        assert torch.allclose(g[key][1:2], gs[key], atol=1e-4, equal_nan=True), key


def test_rejects_consistent_originals():
    model, x, tw, y, s = _setup(2)
    with pytest.raises(ValueError, match="adversarial"):
        patch_grid(model, x, tw, y, y)


def test_gap_guard_is_relative_to_the_logit_differences():
    """A twin that moves LD by 1% of its size gives no score (NaN); the pre-issue-8 absolute
    guard (|gap| < 1e-6) let it through and scored a 0.05 move as a 5× restoration."""
    ld_orig = torch.tensor([10.0, 10.0, -2.0, 0.0, 1e-4])
    ld_twin = torch.tensor([10.1, 12.0, 2.0, 0.0, 3e-4])
    ld = torch.tensor([10.5, 11.0, 0.0, 0.5, 2e-4])
    got = normalise(ld, ld_orig, ld_twin)
    assert REL_GAP == 0.05
    assert got[0].isnan()  # gap 0.1 < 0.05 · 20.1
    assert got[1].item() == pytest.approx(0.5)  # gap 2 ≥ 0.05 · 22
    assert got[2].item() == pytest.approx(0.5)  # sign change: gap 4 ≥ 0.05 · 4
    assert got[3].isnan()  # no gap at all
    assert got[4].item() == pytest.approx(0.5)  # tiny LDs but a large relative gap
    # the threshold is a parameter: 0 keeps every non-zero gap
    assert normalise(ld, ld_orig, ld_twin, rel_gap=0.0)[0].item() == pytest.approx(5.0, 1e-4)


def test_patch_grid_masks_members_whose_twin_barely_moves():
    """Member 1's twin is its own original (gap 0 relative to LDs of any size): its grids are
    NaN, the others' are untouched — rows are never mixed across members."""
    model, x, tw, y, s = _setup(2)
    tw2 = tw.clone()
    tw2[1] = x[1]
    g, ref = patch_grid(model, x, tw2, y, s), patch_grid(model, x, tw, y, s)
    for key in ("resid_pre", "z", "z_all", "mlp_out", "mlp_out_all"):
        assert g[key][1].isnan().all(), key
        assert torch.allclose(g[key][[0, 2]], ref[key][[0, 2]], atol=1e-6), key
