"""Oracle: each member of BatchedAdam / BatchedSGD / BatchedMuon equals the torch optimizer on
that member alone (SPEC M.3; DESIGN §1), plus freezing, per-member checkpoints and the factory."""

import io
from types import SimpleNamespace

import pytest
import torch
from torch.optim._muon import _zeropower_via_newtonschulz as torch_ns

from rulelab.optim import BatchedAdam, BatchedAdamW, BatchedSGD
from rulelab.optim.factory import make_optimizer
from rulelab.optim.muon import BatchedMuon, newton_schulz

E = 3
DTYPES = [(torch.float64, 1e-12), (torch.float32, 1e-5)]
SCALE = torch.tensor([1e-2, 1.0, 30.0])  # per-member gradient scales: catches cross-member norms


def _setup(shapes, dtype):
    gen = torch.Generator().manual_seed(0)
    stacked = [torch.nn.Parameter(torch.randn(s, generator=gen, dtype=dtype)) for s in shapes]
    singles = [[torch.nn.Parameter(p[e].detach().clone()) for p in stacked] for e in range(E)]
    return stacked, singles


def _grads(step, stacked, scale=None):
    gen = torch.Generator().manual_seed(1000 + step)
    scale = torch.ones(E) if scale is None else scale
    return [torch.randn(p.shape, generator=gen, dtype=p.dtype)
            * scale.to(p.dtype).view(-1, *[1] * (p.dim() - 1)) for p in stacked]


def _warm(opt, w):
    """torch's equivalent of our linear warm-up (lr · min(1, t / w) at step t = 1, 2, …)."""
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda t: min(1.0, (t + 1) / w) if w else 1.0)


def _drive(ours, stacked, singles, oracles, steps, scale=None, start=0):
    """Step ours on the stacked grads and each member's torch oracles on its slice."""
    for step in range(start, start + steps):
        grads = _grads(step, stacked, scale)
        for p, g in zip(stacked, grads, strict=True):
            p.grad = g.clone()
        ours.step()
        for e in range(len(oracles)):
            for p, g in zip(singles[e], grads, strict=True):
                p.grad = g[e].clone()
            for o in oracles[e]:  # optimizers first, then their schedulers
                o.step()


def _assert_members(stacked, singles, tol):
    for e in range(E):
        for p, q in zip(stacked, singles[e], strict=True):
            torch.testing.assert_close(p[e], q.detach(), rtol=tol, atol=tol, msg=f"member {e}")


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_each_member_matches_torch_adam(dtype, tol):
    hyper = [(1e-2, 0.1, 0.9, 0.98, 1e-8, 0), (3e-2, 0.5, 0.8, 0.999, 1e-6, 5),
             (5e-3, 0.0, 0.95, 0.9, 1e-8, 0)]  # (lr, wd, beta1, beta2, eps, warmup)
    stacked, singles = _setup([(E, 4, 5), (E, 7)], dtype)
    lr, wd, b1, b2, eps, warm = zip(*hyper, strict=True)
    ours = BatchedAdam(stacked, n_members=E, lr=lr, weight_decay=wd, beta1=b1, beta2=b2,
                       eps=eps, warmup=warm)
    oracles = []
    for e, (lr_e, wd_e, b1_e, b2_e, eps_e, w_e) in enumerate(hyper):
        opt = torch.optim.Adam(singles[e], lr=lr_e, weight_decay=wd_e, betas=(b1_e, b2_e),
                               eps=eps_e)
        oracles.append([opt, _warm(opt, w_e)])
    _drive(ours, stacked, singles, oracles, 25)
    _assert_members(stacked, singles, tol)
    twin, _ = _setup([(E, 4, 5), (E, 7)], dtype)  # coupled L2 is not AdamW's decoupled decay
    _drive(BatchedAdamW(twin, n_members=E, lr=lr, weight_decay=wd, beta1=b1, beta2=b2, eps=eps,
                        warmup=warm), twin, [], [], 25)
    assert not torch.allclose(twin[0][1], stacked[0][1], rtol=1e-4, atol=1e-4)


NESTEROV = {"mixed": (True, False, True), "all": (True,) * E, "none": (False,) * E}


@pytest.mark.parametrize("pattern", list(NESTEROV))
@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_each_member_matches_torch_sgd(dtype, tol, pattern):
    hyper = [(0.05, 0.0, 0.9, 0), (0.02, 0.05, 0.8, 4), (0.1, 0.1, 0.0, 0)]  # lr, wd, mom, warmup
    # (torch rejects Nesterov without momentum: give member 2 some when it is Nesterov)
    hyper = [(lr, wd, m or 0.5 * n, n, w)
             for (lr, wd, m, w), n in zip(hyper, NESTEROV[pattern], strict=True)]
    stacked, singles = _setup([(E, 4, 5), (E, 7)], dtype)
    lr, wd, mom, nest, warm = zip(*hyper, strict=True)
    ours = BatchedSGD(stacked, n_members=E, lr=lr, weight_decay=wd, momentum=mom,
                      nesterov=nest, warmup=warm)
    oracles = []
    for e, (lr_e, wd_e, m_e, n_e, w_e) in enumerate(hyper):
        opt = torch.optim.SGD(singles[e], lr=lr_e, weight_decay=wd_e, momentum=m_e, nesterov=n_e)
        oracles.append([opt, _warm(opt, w_e)])
    _drive(ours, stacked, singles, oracles, 25)
    _assert_members(stacked, singles, tol)


MUON = [(0.02, 0.1, 0.95, 5, 0, 1e-3), (0.05, 0.0, 0.9, 5, 4, 3e-3),
        (0.01, 0.3, 0.8, 3, 0, 1e-2)]  # (lr, wd, momentum, ns_steps, warmup, aux lr)


def _assert_mostly_equal(a, b, tol, bound):
    """bf16 Newton–Schulz: equal to ``tol`` except rare elements where a bf16 rounding went the
    other way (CPU ``baddbmm`` and ``addmm`` pick kernels by shape and batch size; on the
    reference machine these tests are in fact bit-exact). A wrong algorithm moves every element."""
    d = (a.detach().double() - b.detach().double()).abs()
    assert float((d <= tol).double().mean()) >= 0.95 and float(d.max()) <= bound, float(d.max())


def _ns_float64(grad, ns_coefficients, ns_steps, eps):
    """torch 2.13's ``_zeropower_via_newtonschulz`` with float64 in place of bfloat16."""
    a, b, c = ns_coefficients
    X = grad.double()
    X = X.T if grad.size(0) > grad.size(1) else X
    X = X / X.norm().clamp(min=eps)
    for _ in range(ns_steps):
        A = X @ X.T
        X = torch.addmm(X, torch.addmm(A, A, A, beta=b, alpha=c), X, beta=a)
    return X.T if grad.size(0) > grad.size(1) else X


def _check_muon(shapes, dtype, tol, adjust_lr_fn, pattern, ns_dtype):
    # Matrices per member (torch transposes tall ones) and a μ-like [E, P] for the AdamW part.
    stacked, singles = _setup(shapes, dtype)
    n_mat = len(shapes) - 1
    hyper = [(lr, wd, m, n, s, w, a) for (lr, wd, m, s, w, a), n
             in zip(MUON, NESTEROV[pattern], strict=True)]
    lr, wd, mom, nest, steps, warm, aux_lr = zip(*hyper, strict=True)
    ours = BatchedMuon(stacked[:n_mat], stacked[n_mat:], n_members=E, lr=lr, weight_decay=wd,
                       momentum=mom, nesterov=nest, ns_steps=steps, warmup=warm,
                       adjust_lr_fn=adjust_lr_fn, ns_dtype=ns_dtype,
                       adamw={"lr": aux_lr, "beta2": 0.98})
    oracles = []
    for e, (lr_e, wd_e, m_e, n_e, s_e, w_e, aux_e) in enumerate(hyper):
        muon = torch.optim.Muon(singles[e][:n_mat], lr=lr_e, weight_decay=wd_e, momentum=m_e,
                                nesterov=n_e, ns_steps=s_e, adjust_lr_fn=adjust_lr_fn)
        adamw = torch.optim.AdamW(singles[e][n_mat:], lr=aux_e, weight_decay=wd_e,
                                  betas=(0.9, 0.98))
        oracles.append([muon, adamw, _warm(muon, w_e), _warm(adamw, w_e)])
    _drive(ours, stacked, singles, oracles, 25, scale=SCALE)
    for e in range(E):
        for p, q in zip(stacked, singles[e], strict=True):  # bf16: see _assert_mostly_equal
            _assert_mostly_equal(p[e], q, tol, 5e-3 if ns_dtype == torch.bfloat16 else tol)
        for buf, p in zip(ours.momentum_buffer, singles[e][:n_mat], strict=True):  # bitwise
            assert torch.equal(buf[e], oracles[e][0].state[p]["momentum_buffer"])


@pytest.mark.parametrize("adjust_lr_fn,pattern", [(None, "mixed"), ("match_rms_adamw", "all"),
                                                  ("original", "none")])
@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_each_member_matches_torch_muon_and_adamw_for_mu(dtype, tol, adjust_lr_fn, pattern):
    """Default bf16 Newton–Schulz against the unmodified torch.optim.Muon (see
    :func:`_assert_mostly_equal`); the next test checks the same algebra to 1e-12."""
    _check_muon([(E, 16, 9), (E, 8, 12), (E, 7)], dtype, tol, adjust_lr_fn, pattern,
                torch.bfloat16)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_muon_algebra_matches_torch_with_exact_newton_schulz(dtype, tol, monkeypatch):
    """Tiny matrices and per-member NS steps, with both sides' Newton–Schulz in float64."""
    monkeypatch.setattr(torch.optim._muon, "_zeropower_via_newtonschulz", _ns_float64)
    _check_muon([(E, 5, 3), (E, 2, 6), (E, 4)], dtype, tol, None, "mixed", torch.float64)


@pytest.mark.parametrize("shape", [(E, 16, 9), (E, 8, 12), (E, 16, 11), (E, 64, 97), (E, 5, 3),
                                   (E, 1, 8), (E, 7, 7)])
def test_newton_schulz_is_per_member_and_matches_torch(shape):
    G = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    G = G * SCALE.view(-1, 1, 1)
    ours = newton_schulz(G)
    for e in range(E):  # bf16 default: torch's 2-D routine on each member, up to rare roundings
        ref = torch_ns(G[e], (3.4445, -4.775, 2.0315), 5, 1e-7)
        _assert_mostly_equal(ours[e], ref, 0.0, bound=0.05)
    # Per-member iteration counts, and an exact-arithmetic variant against a plain reference.
    steps = [5, 2, 0]
    ours64 = newton_schulz(G.double(), steps=torch.tensor(steps), dtype=torch.float64)
    for e, k in enumerate(steps):
        ref = _ns_float64(G[e].double(), (3.4445, -4.775, 2.0315), k, 1e-7)
        torch.testing.assert_close(ours64[e], ref, rtol=1e-12, atol=1e-12)


def _config(kind, e, **extra):
    base = {"optimizer": kind, "lr": [1e-2, 2e-2, 5e-3][e], "weight_decay": [0.1, 0.0, 0.3][e],
            "beta1": 0.9, "beta2": [0.98, 0.99, 0.95][e], "eps": 1e-8,
            "momentum": [0.9, 0.8, 0.95][e], "nesterov": e != 1, "ns_steps": 5, "warmup": 2 * e}
    return SimpleNamespace(**(base | extra))


def _model(dtype=torch.float64):
    gen = torch.Generator().manual_seed(3)
    shapes = {"U": (E, 6, 5), "W": (E, 5, 6), "mu": (E, 5)}
    return [(n, torch.nn.Parameter(torch.randn(s, generator=gen, dtype=dtype)))
            for n, s in shapes.items()]


@pytest.mark.parametrize("kind", ["adamw", "adam", "sgd", "muon"])
def test_inactive_member_is_frozen_and_others_unaffected(kind):
    named, twin = _model(), _model()
    params, twin_params = [p for _, p in named], [p for _, p in twin]
    opt = make_optimizer([_config(kind, e) for e in range(E)], named, E)
    ref = make_optimizer([_config(kind, e) for e in range(E)], twin, E)
    _drive(opt, params, [], [], 3)
    _drive(ref, twin_params, [], [], 3)
    before = opt.member_state(1), [p[1].clone() for p in params]
    opt.deactivate(torch.tensor([False, True, False]))
    for step in range(3, 8):
        grads = _grads(step, params)
        for p, q, g in zip(params, twin_params, grads, strict=True):
            q.grad = g.clone()
            p.grad = g.clone()
            p.grad[1] = float("nan")
        opt.step()
        ref.step()
    after = opt.member_state(1)
    assert not after["active"] and opt.step_count == 8
    for p, p0 in zip(params, before[1], strict=True):
        assert torch.equal(p[1], p0)
    leaves = [[t for t in torch.utils._pytree.tree_leaves(s) if isinstance(t, torch.Tensor)]
              for s in (after, before[0])]  # every state tensor, the AdamW part's included
    assert leaves[0] and all(torch.equal(a, b) for a, b in zip(*leaves, strict=True))
    for p, q in zip(params, twin_params, strict=True):
        for e in (0, 2):
            assert torch.equal(p[e], q[e]), f"member {e} disturbed"
        assert not torch.equal(p[1], q[1])


def _roundtrip(obj):
    torch.save(obj, buf := io.BytesIO())
    return torch.load(io.BytesIO(buf.getvalue()), weights_only=True)


@pytest.mark.parametrize("kind", ["adamw", "adam", "sgd", "muon"])
def test_member_state_round_trip_continues_identically(kind):
    configs = [_config(kind, e) for e in range(E)]
    named = _model()
    params = [p for _, p in named]
    opt = make_optimizer(configs, named, E)
    _drive(opt, params, [], [], 6)
    saved = [_roundtrip(opt.member_state(e)) for e in range(E)]
    saved_params = [p.detach().clone() for p in params]
    whole = _roundtrip(opt.state_dict())
    _drive(opt, params, [], [], 6, start=6)
    for restore in ("members", "whole"):
        named2 = [(n, torch.nn.Parameter(s.clone())) for (n, _), s in zip(named, saved_params,
                                                                           strict=True)]
        opt2 = make_optimizer(configs, named2, E)
        for e in range(E) if restore == "members" else ():
            opt2.load_member_state(e, saved[e])
        if restore == "whole":
            opt2.load_state_dict(whole)
        assert opt2.step_count == 6
        _drive(opt2, [p for _, p in named2], [], [], 6, start=6)
        for (_, p), q in zip(named2, params, strict=True):
            assert torch.equal(p, q), restore


def test_factory_builds_each_optimizer_with_per_member_hyperparameters():
    classes = {"adamw": BatchedAdamW, "adam": BatchedAdam, "sgd": BatchedSGD, "muon": BatchedMuon}
    for kind, cls in classes.items():
        opt = make_optimizer([_config(kind.upper() if kind == "sgd" else kind, e)
                              for e in range(E)], _model(), E)
        assert type(opt) is cls
        assert opt.lr.tolist() == [1e-2, 2e-2, 5e-3]
        assert opt.warmup.tolist() == [0, 2, 4]
        assert opt.active.tolist() == [True] * E
    sgd = make_optimizer([_config("sgd", e) for e in range(E)], _model(), E)
    assert sgd.nesterov.tolist() == [True, False, True] and sgd.momentum.tolist() == [.9, .8, .95]
    muon = make_optimizer([_config("muon", e, aux_lr=1e-3) for e in range(E)], iter(_model()), E)
    assert len(muon.params) == 2 and muon.params[0].shape == (E, 6, 5)  # U and W: Muon
    assert len(muon.adamw.params) == 1 and muon.adamw.params[0].shape == (E, 5)  # μ: AdamW
    assert muon.adamw.lr.tolist() == [1e-3] * E
    assert muon.adamw.weight_decay.tolist() == [0.1, 0.0, 0.3]
    assert muon.ns_dtype == torch.bfloat16 and muon.ns_steps.tolist() == [5] * E
    f32 = make_optimizer([_config("muon", e, ns_dtype="float32") for e in range(E)], _model(), E)
    assert f32.ns_dtype == torch.float32


def test_factory_and_muon_reject_bad_input():
    with pytest.raises(ValueError, match="optimizer"):
        make_optimizer([_config("adamw", 0), _config("muon", 1), _config("muon", 2)], _model(), E)
    with pytest.raises(ValueError, match="optimizer"):
        make_optimizer([_config("lion", e) for e in range(E)], _model(), E)
    with pytest.raises(ValueError, match="ns_dtype"):
        make_optimizer([_config("muon", e, ns_dtype=["float32", "bfloat16"][e % 2])
                        for e in range(E)], _model(), E)
    with pytest.raises(ValueError, match="nesterov"):
        BatchedSGD([torch.nn.Parameter(torch.ones(E, 2))], n_members=E, nesterov=True)
    with pytest.raises(ValueError, match="configs"):
        make_optimizer([_config("adam", 0)], _model(), E)
    with pytest.raises(ValueError, match="matrices"):
        BatchedMuon([torch.nn.Parameter(torch.ones(E, 4))], n_members=E)
    with pytest.raises(ValueError, match="adjust_lr_fn"):
        BatchedMuon([torch.nn.Parameter(torch.ones(E, 2, 2))], n_members=E, adjust_lr_fn="x")
    with pytest.raises(ValueError, match="member axis"):
        BatchedSGD([torch.nn.Parameter(torch.ones(2, 2))], n_members=E)
