"""Group gradients and gradient conflict (SPEC S.4.1–2) against per-member autograd oracles."""

import math

import pytest
import torch
import torch.nn.functional as F

from rulelab.models.transformer import EnsembleTransformer
from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation.analyses.gradients import (
    EPS_IDENTITY,
    conflict_metrics,
    example_gradient_norms,
    gradient_conflict,
    group_gradients,
    identity_bounds,
    module_of,
)
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

TINY = dict(seq_len=5, vocab=12, n_train=256, n_eval=64, d_model=16, d_mlp=32, heads=2,
            layers=2, eval_every=10, weight_decay=0.3)
RATIOS = [0.5, 0.9, 1 / 3, 1.0]  # the last has no anti examples: NaN expected


@pytest.fixture(scope="module")
def trainer():
    cfgs = [MPSPRunConfig(**TINY, ratio=r, seed=s, epochs=15, lr=3e-3)
            for s, r in enumerate(RATIOS)]
    tr = MPSPTrainer(cfgs, Settings(micro_batch=128))
    tr.fit()  # a few steps so members differ and both groups have non-trivial gradients
    return tr


def _reference(tr, e, mask):
    """Member ``e`` alone: a 1-member model with its weights, plain autograd of the mean loss."""
    alone = EnsembleTransformer(tr.cfg, 1)
    with torch.no_grad():
        for (_, p), (_, q) in zip(alone.named_parameters(), tr.model.named_parameters(),
                                  strict=True):
            p.copy_(q[e : e + 1])
    x, y = tr.data.train_x[e][mask[e]], tr.data.train_y[e][mask[e]]
    loss = F.cross_entropy(alone(x.unsqueeze(0))[0], y)  # mean over the group, no decay term
    names = [n for n, _ in alone.named_parameters()]
    grads = torch.autograd.grad(loss, list(alone.parameters()))
    return {n: g[0].flatten() for n, g in zip(names, grads, strict=True)}


def _by_module(ref):
    out = {"all": torch.cat(list(ref.values()))}
    for n, g in ref.items():
        out[module_of(n)] = torch.cat([out[module_of(n)], g]) if module_of(n) in out else g
    return out


def test_module_assignment():
    assert module_of("W_E") == module_of("W_pos") == "embed"
    assert module_of("blocks.0.attn.W_Q") == module_of("blocks.0.ln1.w") == "attn0"
    assert module_of("blocks.1.mlp.b_out") == module_of("blocks.1.ln2.b") == "mlp1"
    assert module_of("W_U") == module_of("b_U") == module_of("ln_final.w") == "unembed"
    with pytest.raises(ValueError, match="no S.4.1 module"):
        module_of("blocks.0.hook_z")


def test_one_pass_group_gradient_equals_each_member_alone(trainer):
    tr = trainer
    cons = tr.data.train_consistent
    for mask in (cons, ~cons):
        ours = group_gradients(tr.model, tr.data.train_x, tr.data.train_y, mask, chunk=48)
        assert set(ours) == {"all", "embed", "attn0", "mlp0", "attn1", "mlp1", "unembed"}
        for e in range(3):
            ref = _by_module(_reference(tr, e, mask))
            for m, g in ref.items():
                torch.testing.assert_close(ours[m][e], g, rtol=1e-4, atol=1e-6, msg=m)
            assert ref["all"].norm() > 0
    # r = 1 has an empty anti group: a NaN row, and a finite consistent gradient
    minus = group_gradients(tr.model, tr.data.train_x, tr.data.train_y, ~cons)
    assert torch.isnan(minus["all"][3]).all() and torch.isfinite(minus["all"][:3]).all()


def test_full_batch_gradient_is_the_ratio_weighted_sum_and_matches_training(trainer):
    tr = trainer
    x, y, cons = tr.data.train_x, tr.data.train_y, tr.data.train_consistent
    gp = group_gradients(tr.model, x, y, cons)["all"][:3]
    gm = group_gradients(tr.model, x, y, ~cons)["all"][:3]
    g = group_gradients(tr.model, x, y, torch.ones_like(cons))["all"][:3]
    r = cons[:3].float().mean(1, keepdim=True)  # [3, 1]
    assert r.flatten().tolist() == pytest.approx([0.5, 0.9, 1 / 3], abs=1 / 256)
    torch.testing.assert_close(g, r * gp + (1 - r) * gm, rtol=1e-4, atol=1e-6)
    # the trainer's own backward (what AdamW steps on, decay applied separately) agrees
    saved = [p.grad for p in tr.model.parameters()]
    tr.opt.zero_grad()
    tr._backward_batch(x, y)
    trained = torch.cat([p.grad.reshape(len(RATIOS), -1) for p in tr.model.parameters()], 1)
    for p, s in zip(tr.model.parameters(), saved, strict=True):
        p.grad = s
    torch.testing.assert_close(trained[:3], g, rtol=1e-4, atol=1e-6)


def test_conflict_table_matches_hand_computation(trainer):
    tr = trainer
    frame = gradient_conflict(tr.model, tr.data)
    assert len(frame) == len(RATIOS) * 7
    cons = tr.data.train_consistent
    for e in range(3):
        gp = _by_module(_reference(tr, e, cons))
        gm = _by_module(_reference(tr, e, ~cons))
        r = cons[e].double().mean().item()
        for m in ("all", "embed", "attn1", "mlp0", "unembed"):
            row = frame[(frame.member == e) & (frame.module == m)].iloc[0]
            cos = F.cosine_similarity(gp[m].double(), gm[m].double(), dim=0).item()
            amp = (gm[m].norm() / gp[m].norm()).item()
            assert row.cos == pytest.approx(cos, abs=1e-4)
            assert row.amplification == pytest.approx(amp, rel=1e-4)
            assert row.r == pytest.approx(r) and row.odds == pytest.approx(r / (1 - r))
            assert row.share_plus == pytest.approx(r * gp[m].norm().item(), rel=1e-4)
            assert row.share_minus == pytest.approx((1 - r) * gm[m].norm().item(), rel=1e-4)
    nan_rows = frame[frame.member == 3]
    assert nan_rows.cos.isna().all() and nan_rows.amplification.isna().all()
    assert not frame[frame.member < 3].cos.isna().any()


def test_grads_and_parameters_are_left_alone(trainer):
    tr = trainer
    params = {n: p.detach().clone() for n, p in tr.model.named_parameters()}
    for p in tr.model.parameters():
        p.grad = torch.full_like(p, 7.0)
    with torch.no_grad():  # also works when called from inside an evaluation
        gradient_conflict(tr.model, tr.data, chunk=100)
    for n, p in tr.model.named_parameters():
        assert torch.equal(p, params[n]) and torch.equal(p.grad, torch.full_like(p, 7.0)), n
        p.grad = None


def test_conflict_metrics_signs_on_hand_vectors():
    gp = {"all": torch.tensor([[1.0, 0.0], [1.0, 1.0]])}
    gm = {"all": torch.tensor([[-3.0, 0.0], [0.0, 2.0]])}
    out = conflict_metrics(gp, gm, torch.tensor([0.9, 0.5]))["all"]
    assert out["cos"].tolist() == pytest.approx([-1.0, 1 / math.sqrt(2)])
    assert out["amplification"].tolist() == pytest.approx([3.0, 2 / math.sqrt(2)])
    assert out["odds"].tolist() == pytest.approx([9.0, 1.0])
    assert out["share_minus"].tolist() == pytest.approx([0.1 * 3, 0.5 * 2])


def _identity_case(eps, r, g_plus, direction):
    """g+ given, g = eps·r‖g+‖ along ``direction``, g− = (g − r·g+)/(1 − r): the identity."""
    g = eps[:, None] * r[:, None] * g_plus.norm(dim=1, keepdim=True) * direction
    return g_plus, (g - r[:, None] * g_plus) / (1 - r[:, None])


def test_identity_dominated_readings_on_constructed_vectors():
    """Analytic oracle (issue 8): g+ and g− built to satisfy g = r·g+ + (1−r)·g− with a chosen
    ‖g‖ = ε·r‖g+‖. The reported ε is that ε; amplification / (r/(1−r)) ∈ [1−ε, 1+ε] and
    cos ∈ [−1, −√(1 − ε²)] (study S's analysis.identity, issue 21's tight bound); the flag is
    ε < EPS_IDENTITY.
    Fails on the pre-issue-8 metrics, which have no ``eps`` nor flag."""
    gen = torch.Generator().manual_seed(0)
    E, P = 400, 50
    eps = torch.linspace(0.001, 0.9, E, dtype=torch.float64)
    r = 0.05 + 0.9 * torch.rand(E, generator=gen, dtype=torch.float64)
    g_plus = torch.randn(E, P, generator=gen, dtype=torch.float64)
    direction = torch.randn(E, P, generator=gen, dtype=torch.float64)
    direction[:20] = g_plus[:20]  # g ∥ g+: the ratio bound 1 − ε is attained
    direction[20:40] = -g_plus[20:40]  # g ∥ −g+: 1 + ε is attained
    direction = direction / direction.norm(dim=1, keepdim=True)
    gp, gm = _identity_case(eps, r, g_plus, direction)
    out = conflict_metrics({"all": gp}, {"all": gm}, r)["all"]
    assert torch.allclose(out["eps"], eps, rtol=1e-9)
    assert torch.allclose(out["norm_full"], eps * r * g_plus.norm(dim=1), rtol=1e-9)
    ratio = out["amplification"] / out["odds"]
    lo, hi, cos_max = identity_bounds(eps)
    assert torch.all(ratio >= lo - 1e-9) and torch.all(ratio <= hi + 1e-9)
    assert torch.all(out["cos"] >= -1 - 1e-9) and torch.all(out["cos"] <= cos_max + 1e-9)
    assert torch.allclose(ratio[:20], 1 - eps[:20]) and torch.allclose(ratio[20:40], 1 + eps[20:40])
    assert torch.equal(out["identity_dominated"], eps < EPS_IDENTITY)
    # A saturated r = 0.9 reading (ε = 0.05) vs a non-saturated one (ε = 0.5), same g+.
    r9 = torch.tensor([0.9, 0.9], dtype=torch.float64)
    gp9, gm9 = _identity_case(torch.tensor([0.05, 0.5], dtype=torch.float64), r9,
                              g_plus[40:42], direction[40:42])
    out9 = conflict_metrics({"all": gp9}, {"all": gm9}, r9)["all"]
    assert out9["identity_dominated"].tolist() == [True, False]
    assert abs(out9["amplification"][0].item() / 9 - 1) <= 0.05 + 1e-9
    assert out9["cos"][0].item() <= -1 + 0.05**2 / (2 * 0.95**2) + 1e-12  # ≤ −0.9986


def test_identity_threshold_documented_numbers():
    """Issue 21: ε* = √0.19, where the tight bound −√(1 − ε²) reaches −0.9."""
    lo, hi, cos_max = identity_bounds(EPS_IDENTITY)
    assert (lo, hi) == pytest.approx((0.56411, 1.43589), abs=1e-5)
    assert cos_max == pytest.approx(-0.9, abs=1e-12)
    assert identity_bounds(0.1)[2] == pytest.approx(-0.994987, abs=1e-6)


def test_eps_against_an_independent_full_gradient(trainer):
    """ε = ‖g‖/(r‖g+‖) with g the full-training-set mean gradient from plain autograd."""
    tr = trainer
    frame = gradient_conflict(tr.model, tr.data)
    cons = tr.data.train_consistent
    for e in range(3):
        g = _by_module(_reference(tr, e, torch.ones_like(cons)))
        gp = _by_module(_reference(tr, e, cons))
        r = cons[e].double().mean().item()
        for m in ("all", "embed", "attn0", "mlp1", "unembed"):
            row = frame[(frame.member == e) & (frame.module == m)].iloc[0]
            assert row.norm_full == pytest.approx(g[m].norm().item(), rel=1e-3, abs=1e-7)
            assert row.eps == pytest.approx(g[m].norm().item() / (r * gp[m].norm().item()),
                                            rel=1e-3)
            assert row.identity_dominated == (row.eps < EPS_IDENTITY)
    assert frame[frame.member == 3].eps.isna().all()  # r = 1: no anti group
    assert frame[frame.member == 3].identity_dominated.isna().all()  # undefined, not False


def _example_norms_by_hand(tr, e, mask, k):
    """Mean over the first ``k`` group examples (training order) of ‖∇ℓ_i‖, one backward each."""
    alone = EnsembleTransformer(tr.cfg, 1)
    with torch.no_grad():
        for p, q in zip(alone.parameters(), tr.model.parameters(), strict=True):
            p.copy_(q[e : e + 1])
    idx = torch.nonzero(mask[e]).flatten()[:k]
    norms = {}
    for i in idx:
        x, y = tr.data.train_x[e, i][None, None], tr.data.train_y[e, i][None]
        loss = F.cross_entropy(alone(x)[0], y)
        grads = torch.autograd.grad(loss, list(alone.parameters()))
        names = [n for n, _ in alone.named_parameters()]
        per = _by_module({n: g[0].flatten() for n, g in zip(names, grads, strict=True)})
        for m, g in per.items():
            norms.setdefault(m, []).append(g.double().norm())
    return {m: torch.stack(v).mean().item() for m, v in norms.items()}


def test_per_example_gradient_norms_match_a_loop(trainer):
    tr = trainer
    cons = tr.data.train_consistent
    for mask in (cons, ~cons):
        got = example_gradient_norms(tr.model, tr.data.train_x, tr.data.train_y, mask,
                                     max_examples=20, chunk=7)
        for e in range(3):
            want = _example_norms_by_hand(tr, e, mask, 20)
            for m, v in want.items():
                assert got[m][e].item() == pytest.approx(v, rel=1e-4), (e, m)
        assert torch.isnan(got["all"][3]) == (not mask[3].any())
    # over the whole group, the mean per-example norm bounds the group-mean gradient's norm
    frame = gradient_conflict(tr.model, tr.data, max_examples=256)
    ok = frame[frame.member < 3]
    assert (ok.norm_plus <= ok.example_norm_plus * (1 + 1e-6)).all()
    assert (ok.norm_minus <= ok.example_norm_minus * (1 + 1e-6)).all()
    assert frame[frame.member == 3].example_norm_minus.isna().all()
