"""Oracle: each member of BatchedAdamW equals torch.optim.AdamW on that member alone."""

import pytest
import torch

from rulelab.optim.adamw import BatchedAdamW

HYPER = [  # (lr, weight_decay, beta1, beta2, eps, warmup)
    (1e-3, 0.1, 0.9, 0.98, 1e-8, 0),
    (3e-2, 0.4, 0.8, 0.999, 1e-6, 5),
    (5e-3, 0.0, 0.95, 0.9, 1e-8, 0),
]


def _grads(step: int, shapes, dtype):
    gen = torch.Generator().manual_seed(1000 + step)
    return [torch.randn(s, generator=gen, dtype=dtype) for s in shapes]


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 2e-6)])
def test_each_member_matches_torch_adamw(dtype, tol):
    E, shapes = len(HYPER), [(E_ := 3, 4, 5), (E_, 7)]
    gen = torch.Generator().manual_seed(0)
    stacked = [torch.nn.Parameter(torch.randn(s, generator=gen, dtype=dtype)) for s in shapes]
    singles = [[torch.nn.Parameter(p[e].detach().clone()) for p in stacked] for e in range(E)]
    lr, wd, b1, b2, eps, warm = zip(*HYPER, strict=True)
    ours = BatchedAdamW(stacked, n_members=E, lr=lr, weight_decay=wd, beta1=b1, beta2=b2,
                        eps=eps, warmup=warm)
    oracles = []
    for e, (lr_e, wd_e, b1_e, b2_e, eps_e, w_e) in enumerate(HYPER):
        opt = torch.optim.AdamW(singles[e], lr=lr_e, weight_decay=wd_e, betas=(b1_e, b2_e),
                                eps=eps_e)
        ramp = (lambda t, w=w_e: min(1.0, (t + 1) / w)) if w_e else (lambda t: 1.0)
        oracles.append((opt, torch.optim.lr_scheduler.LambdaLR(opt, ramp)))
    for step in range(30):
        grads = _grads(step, [p.shape for p in stacked], dtype)
        for p, g in zip(stacked, grads, strict=True):
            p.grad = g.clone()
        ours.step()
        for e, (opt, sched) in enumerate(oracles):
            for p, g in zip(singles[e], grads, strict=True):
                p.grad = g[e].clone()
            opt.step()
            sched.step()
    for e in range(E):
        for p, q in zip(stacked, singles[e], strict=True):
            torch.testing.assert_close(p[e], q.detach(), rtol=tol, atol=tol, msg=f"member {e}")
        assert not torch.equal(stacked[0][e], stacked[0][(e + 1) % E])


def test_inactive_member_is_frozen_and_others_unaffected():
    p = torch.nn.Parameter(torch.ones(2, 3))
    opt = BatchedAdamW([p], n_members=2, lr=0.1, weight_decay=0.1)
    opt.deactivate(torch.tensor([True, False]))
    p.grad = torch.tensor([[float("nan")] * 3, [1.0] * 3])
    opt.step()
    assert torch.equal(p[0], torch.ones(3))
    assert torch.isfinite(opt.exp_avg[0]).all()
    assert (p[1] < 1).all()


def test_rejects_params_without_member_axis_and_wrong_hyper_count():
    with pytest.raises(ValueError, match="member axis"):
        BatchedAdamW([torch.nn.Parameter(torch.ones(3, 2))], n_members=2)
    with pytest.raises(ValueError, match="lr"):
        BatchedAdamW([torch.nn.Parameter(torch.ones(2, 2))], n_members=2, lr=[1e-3, 1e-3, 1e-3])


