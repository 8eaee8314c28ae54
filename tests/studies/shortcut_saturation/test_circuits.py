"""QK/OV fingerprints (SPEC S.4.5): Spearman against scipy, hand-built heads, brute force."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from rulelab.models.transformer import EnsembleTransformer
from rulelab.studies.shortcut_saturation.analyses.circuits import (
    fingerprints,
    ov_probe_accuracy,
    spearman,
)
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig

V, N = 16, 6


def test_spearman_matches_scipy_with_ties():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, size=(3, 6, 40)).astype(float)  # many ties
    y = rng.integers(0, 7, size=(3, 6, 40)) + 0.5 * x
    x[0, :, 0] = 2.0  # a constant column along dim 1: NaN, as in scipy
    got = spearman(torch.tensor(x), torch.tensor(y))
    want = [[spearmanr(x[i, j], y[i, j]).statistic for j in range(6)] for i in range(3)]
    assert torch.allclose(got, torch.tensor(want, dtype=torch.float64), atol=1e-12)
    got1 = spearman(torch.tensor(x), torch.tensor(y), dim=1)  # along another axis
    with pytest.warns(RuntimeWarning):  # scipy's ConstantInputWarning for that column
        want1 = [[spearmanr(x[i, :, j], y[i, :, j]).statistic for j in range(40)] for i in range(3)]
    want1 = torch.tensor(want1, dtype=torch.float64)
    assert torch.allclose(got1, want1, atol=1e-12, equal_nan=True) and got1[0, 0].isnan()


def test_spearman_mask_nan_and_constant():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(2, 50)), rng.integers(0, 4, size=(2, 50)).astype(float)
    mask = rng.random((2, 50)) > 0.3
    x[1, 3] = np.nan  # NaN pairs are dropped too
    got = spearman(x, y, mask=mask)
    for i in range(2):
        keep = mask[i] & ~np.isnan(x[i])
        want = spearmanr(x[i, keep], y[i, keep]).statistic
        assert got[i].item() == pytest.approx(want, abs=1e-12)
    assert math.isnan(spearman([1.0, 2.0, 3.0], [4.0, 4.0, 4.0]).item())  # constant side
    assert math.isnan(spearman([1.0, 2.0], [3.0, 4.0], mask=[True, False]).item())  # one pair
    assert spearman(np.arange(10.0), np.arange(10.0) ** 3).item() == pytest.approx(1.0)


def _hand_built(k: int) -> EnsembleTransformer:
    """1L, 2 heads, attention-only, no LN. Residual dims: 0 value v/V, 1 CLS flag,
    2 parity (−1)^v, 3 parity output, 4 "is position 1", 5.. residue one-hot, 8.. residue out.

    Head 0: CLS query × value key (attends to large tokens); OV writes parity (k=2: member 0
    logit_1 − logit_0 = +c(−1)^v, member 1 the opposite sign) or the residue class (k=3).
    Head 1: CLS query × "position 1" key (attends to x_1); writes nothing.
    """
    cfg = MPSPRunConfig(label_mod=k, seq_len=N, vocab=V, layers=1, heads=2, d_model=16,
                        d_mlp=0, ln=False)
    m = EnsembleTransformer(cfg, 2).init_weights([0, 1])
    vals = torch.arange(V)
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        m.W_E[:, :V, 0] = vals / V
        m.W_E[:, V, 1] = 1.0
        m.W_E[:, :V, 2] = (-1.0) ** vals
        m.W_E[:, vals, 5 + vals % k] = 1.0
        m.W_pos[:, 1, 4] = 1.0
        a = m.blocks[0].attn
        a.W_Q[:, 0, 1, 0], a.W_K[:, 0, 0, 0] = 40.0, 1.0  # head 0: score ∝ v
        a.W_Q[:, 1, 1, 0], a.W_K[:, 1, 4, 0] = 60.0, 1.0  # head 1: score on position 1
        if k == 2:
            a.W_V[:, 0, 2, 1], a.W_O[:, 0, 1, 3] = 1.0, 1.0
            m.W_U[0, 3, 1], m.W_U[1, 3, 1] = 2.0, -2.0
        else:
            for c in range(k):
                a.W_V[:, 0, 5 + c, 1 + c], a.W_O[:, 0, 1 + c, 8 + c] = 1.0, 1.0
                m.W_U[:, 8 + c, c] = 3.0
    return m


def _x(E=2, B=512, seed=0):
    return torch.randint(0, V, (E, B, N), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("k", [2, 3])
def test_hand_built_heads(k):
    df = fingerprints(_hand_built(k), _x()).set_index(["member", "layer", "head"])
    assert list(df.columns) == ["qk_rho", "first_mass", "ov_parity_rho", "ov_probe_acc",
                                "qk_rho_weights", "ov_parity_rho_weights"]
    h0, h1 = df.xs(0, level="head"), df.xs(1, level="head")
    assert (h0["qk_rho"] > 0.95).all()  # empirical: CLS attends to large tokens
    assert np.allclose(h0["qk_rho_weights"], 1.0)  # weights: score strictly increasing in v
    assert (h1["first_mass"] > 0.99).all() and (h0["first_mass"] < 0.5).all()
    # k=2: logit_1 − logit_0 = ±c(−1)^v (member 0 anti-parity, member 1 parity);
    # k=3: the head writes the token's own residue class.
    want = np.array([-1.0, 1.0]) if k == 2 else np.array([1.0, 1.0])
    assert np.allclose(h0["ov_parity_rho"], want, atol=1e-9)
    assert np.allclose(h0["ov_parity_rho_weights"], want, atol=1e-9)
    assert h1["ov_parity_rho"].isna().all() and h1["ov_parity_rho_weights"].isna().all()


def _brute(model, x, e, l, h):
    """Loops + scipy for one (member, layer, head): QK ρ and OV parity ρ (LN unfolded)."""
    cfg, k = model.cfg, model.cfg.label_mod
    names = [f"blocks.{l}.attn.hook_pattern", f"blocks.{l}.attn.hook_v",
             f"blocks.{cfg.layers - 1}.hook_resid_post"]
    _, cache = model.run_with_cache(x, names_filter=names)
    pat = cache[names[0]][e, :, h, 0, 1:].double().numpy()  # [B, n]
    v = cache[names[1]][e, :, 1:, h].double()  # [B, n, dh]
    res = cache[names[2]][e, :, 0].double()  # [B, d] final residual at CLS
    scale = (res.var(-1, unbiased=False) + 1e-5).sqrt().numpy()
    W_O, W_U = model.blocks[l].attn.W_O[e, h].detach().double(), model.W_U[e].detach().double()
    w = model.ln_final.w[e].detach().double()
    xs = x[e].numpy()
    att_sum, dla_sum = np.zeros(V), np.zeros((V, k))
    for b in range(xs.shape[0]):
        for j in range(N):
            r = pat[b, j] * (v[b, j] @ W_O)  # [d] written into the CLS residual
            logit = ((r - r.mean()) / scale[b] * w) @ W_U
            att_sum[xs[b, j]] += pat[b, j]
            dla_sum[xs[b, j]] += logit.numpy()
    counts = np.bincount(xs.ravel(), minlength=V)
    qk = spearmanr(np.arange(V), att_sum / counts).statistic
    per_unit = dla_sum / att_sum[:, None]
    own = (k * per_unit - per_unit.sum(1, keepdims=True)) / (k - 1)
    ov = np.mean([spearmanr(np.arange(V) % k == c, own[:, c]).statistic for c in range(k)])
    return qk, ov


@pytest.mark.parametrize("k", [2, 3])
def test_empirical_matches_brute_force_with_layernorm(k):
    cfg = MPSPRunConfig(label_mod=k, seq_len=N, vocab=V, layers=2, heads=2, d_model=16,
                        d_mlp=16, ln=True)
    model = EnsembleTransformer(cfg, 2).init_weights([3, 4])
    with torch.no_grad():  # a non-trivial final LayerNorm, so folding it is tested
        model.ln_final.w.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(0))
        model.ln_final.b.normal_(generator=torch.Generator().manual_seed(1))
    x = _x(B=64, seed=1)
    df = fingerprints(model, x)
    assert len(df) == 2 * 2 * 2 and "qk_rho_weights" not in df
    for e, l, h in [(0, 0, 1), (1, 1, 0)]:
        row = df[(df["member"] == e) & (df["layer"] == l) & (df["head"] == h)].iloc[0]
        qk, ov = _brute(model, x, e, l, h)
        assert row.qk_rho == pytest.approx(qk, abs=1e-9)
        assert row.ov_parity_rho == pytest.approx(ov, abs=1e-9)
        pat = model.run_with_cache(x, names_filter=f"blocks.{l}.attn.hook_pattern")[1]
        assert row.first_mass == pytest.approx(
            pat[f"blocks.{l}.attn.hook_pattern"][e, :, h, 0, 1].mean().item(), abs=1e-6)


def test_members_are_independent():
    cfg = MPSPRunConfig(label_mod=3, seq_len=N, vocab=V, layers=1, heads=2, d_model=16,
                        d_mlp=0, ln=False)
    x = _x(E=3, B=128, seed=2)
    df = fingerprints(EnsembleTransformer(cfg, 3).init_weights([5, 6, 7]), x)
    solo = fingerprints(EnsembleTransformer(cfg, 1).init_weights([6]), x[1:2])
    cols = ["qk_rho", "first_mass", "ov_parity_rho", "ov_probe_acc", "qk_rho_weights",
            "ov_parity_rho_weights"]
    assert np.allclose(df[df.member == 1][cols].to_numpy(), solo[cols].to_numpy(), atol=1e-6)


def _mlp_reader(k: int = 2) -> EnsembleTransformer:
    """1L, 2 heads, no LN, with an MLP. Residual dims: 0 value v/V, 1 CLS flag, 2 residue code
    (k=2: (−1)^v; k=3: cos(2πv/3), 3: sin(2πv/3)), 4 "is position 1", 5 f(v) = |v − 7.5| / 8,
    6–7 head 0's residue output, 8 head 0's f output, 9 MLP output, 10–15 position noise.

    Head 0 attends to large tokens and writes the residue code onto dims 6–7, which only the
    MLP reads (the MLP writes it to dim 9, read by W_U), and f(v) onto dim 8, which W_U reads
    directly: its direct path carries f(v) only, and f pairs v with 15 − v, of the other parity.
    Head 1 attends to x₁ and copies the position noise: nothing about v.
    """
    cfg = MPSPRunConfig(label_mod=k, seq_len=N, vocab=V, layers=1, heads=2, d_model=16,
                        d_mlp=4, ln=False)
    m = EnsembleTransformer(cfg, 2).init_weights([0, 1])
    vals = torch.arange(V)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        m.W_E[:, :V, 0] = vals / V
        m.W_E[:, V, 1] = 1.0
        if k == 2:
            m.W_E[:, :V, 2] = (-1.0) ** vals
        else:
            m.W_E[:, :V, 2] = torch.cos(2 * math.pi * vals / 3)
            m.W_E[:, :V, 3] = torch.sin(2 * math.pi * vals / 3)
        m.W_E[:, :V, 5] = (vals - 7.5).abs() / 8
        m.W_pos[:, 1, 4] = 1.0
        m.W_pos[:, 1:, 10:] = torch.randn(2, N, 6, generator=gen)
        a = m.blocks[0].attn
        a.W_Q[:, 0, 1, 0], a.W_K[:, 0, 0, 0] = 40.0, 1.0  # head 0: score ∝ v
        a.W_Q[:, 1, 1, 0], a.W_K[:, 1, 4, 0] = 60.0, 1.0  # head 1: score on position 1
        for i in range(2):  # head 0: residue code → dims 6–7
            a.W_V[:, 0, 2 + i, 1 + i], a.W_O[:, 0, 1 + i, 6 + i] = 1.0, 1.0
        a.W_V[:, 0, 5, 3], a.W_O[:, 0, 3, 8] = 1.0, 1.0  # head 0: f(v) → dim 8
        for i in range(4):  # head 1: position noise → dims 10–13
            a.W_V[:, 1, 10 + i, 4 + i], a.W_O[:, 1, 4 + i, 10 + i] = 1.0, 1.0
        mlp = m.blocks[0].mlp
        mlp.W_in[:, 6, 0], mlp.W_in[:, 6, 1] = 1.0, -1.0  # relu(z) − relu(−z) = z
        mlp.W_out[:, 0, 9], mlp.W_out[:, 1, 9] = 1.0, -1.0
        m.W_U[:, 9, 1] = 2.0  # the residue reaches the logits through the MLP only
        m.W_U[:, 8, 0] = 1.0  # the head's direct path: f(v)
    return m


@pytest.mark.parametrize("k", [2, 3])
def test_probe_reads_a_head_that_feeds_an_mlp(k):
    """Oracle (issue 8): the residue head scores ≈ 1 on the probe while its direct-path OV ρ
    is ≈ 0; the noise head scores ≈ chance (1/k). Fails before issue 8 (no ov_probe_acc)."""
    model = _mlp_reader(k)
    df = fingerprints(model, _x(B=512, seed=3)).set_index(["member", "layer", "head"])
    h0, h1 = df.xs(0, level="head"), df.xs(1, level="head")
    assert np.allclose(h0["ov_probe_acc"], 1.0)
    if k == 2:  # f(v) pairs each value with one of the other parity: ρ exactly 0
        assert np.allclose(h0["ov_parity_rho"], 0.0, atol=1e-9)
    else:
        assert (h0["ov_parity_rho"].abs() < 0.3).all()
    assert np.allclose(h1["ov_probe_acc"], 1 / k, atol=0.08)
    # the model really routes the residue through the MLP: ablating it changes the logits
    x = _x(B=64, seed=4)
    with torch.no_grad(), model.hooks([("blocks.0.hook_mlp_out",
                                        lambda t, hook: torch.zeros_like(t))]):
        ablated = model(x)
    assert (model(x) - ablated).abs().max() > 0.5


def test_probe_needs_the_residue_not_token_identity():
    """Held-out values: heads writing a random code per token (identity) or v itself score
    chance on average, while an example split would decode either (the design reason); a
    head that also writes the residue on a shared direction scores 1."""
    gen = torch.Generator().manual_seed(5)
    n_id, n_keys, dh, d, k = 24, 4000, 8, 12, 2
    vals = torch.randint(0, V, (1, n_keys), generator=gen)
    codes = torch.randn(n_id, V, dh, generator=gen)[:, vals[0]]  # [n_id, keys, dh] identity
    magnitude = torch.cat([vals[0, :, None] / V, torch.zeros(n_keys, dh - 1)], 1)
    residue = torch.cat([(-1.0) ** vals[0, :, None], codes[0, :, 1:]], 1)
    v = torch.cat([codes, magnitude[None], residue[None]])[None]  # [1, H, keys, dh]
    v = v + 0.01 * torch.randn(v.shape, generator=gen)
    W_O = torch.randn(1, v.shape[1], dh, d, generator=gen)
    acc = ov_probe_accuracy(v, W_O, vals, k, V)[0]
    assert abs(acc[:n_id].mean().item() - 0.5) < 0.1  # 16 values: one head varies ±0.17
    assert acc[n_id] < 0.75
    assert acc[n_id + 1] == pytest.approx(1.0)
    # too few values for a held-out split (V < 2k): NaN
    assert ov_probe_accuracy(v, W_O, vals % 3, 2, 3).isnan().all()
