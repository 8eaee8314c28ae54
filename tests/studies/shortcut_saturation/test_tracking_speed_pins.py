"""Tracked analyses made cheaper store the same numbers (issue 13; SPEC S.4.1–2, S.4.5).

Two guards: values of the ``gradients`` and ``fingerprints`` tables of a tiny tracked run,
pinned from the code before the speed-up; and the fold-moment OV probe against the per-fold
loop it replaced (kept here as the oracle), which must give the *same* accuracies exactly.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation import tracking
from rulelab.studies.shortcut_saturation.analyses.circuits import ov_probe_accuracy
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer

TINY = dict(seq_len=5, vocab=12, n_train=256, n_eval=64, d_model=16, d_mlp=32, heads=2,
            layers=2, eval_every=10)


@pytest.fixture(scope="module")
def tracked():
    cfgs = [MPSPRunConfig(**TINY, ratio=r, seed=s, epochs=8, lr=3e-3)
            for s, r in enumerate((0.5, 0.9))]
    tr = MPSPTrainer(cfgs, Settings(micro_batch=128))
    tr.fit()
    tr.model.eval()  # as the Tracker runs them
    return tracking.gradients(tr), tracking.fingerprints(tr)


# (member, module) → cos, amplification, eps, example_norm_plus, example_norm_minus
GRADIENT_PINS = {
    (0, "all"): (-0.1101636267, 0.9676411724, 1.3126811177, 4.0848262193, 3.9872948245),
    (1, "all"): (-0.4730852041, 1.5820528588, 0.9288542317, 4.1387676718, 4.3944518598),
    (1, "attn0"): (-0.6990818981, 1.6557563936, 0.8793951163, 1.4355050857, 1.5541000007),
}
# (member, layer, head) → qk_rho, first_mass, ov_parity_rho, ov_probe_acc
FINGERPRINT_PINS = {
    (0, 0, 0): (0.3636363636, 0.1330957338, -0.0965609099, 0.2979550384),
    (0, 1, 1): (-0.2797202797, 0.1633666756, -0.4345240946, 0.4357921591),
    (1, 0, 1): (0.3286713287, 0.4917852324, 0.7242068244, 0.8750000000),
    (1, 1, 0): (-0.0349650350, 0.2208307211, 0.7242068244, 0.6887973767),
}


def test_gradient_table_values_are_pinned(tracked):
    grads, _ = tracked
    assert len(grads) == 2 * 7
    for (member, module), want in GRADIENT_PINS.items():
        row = grads[(grads.member == member) & (grads.module == module)].iloc[0]
        got = (row.cos, row.amplification, row.eps, row.example_norm_plus,
               row.example_norm_minus)
        assert got == pytest.approx(want, rel=1e-4), (member, module)


def test_fingerprint_table_values_are_pinned(tracked):
    _, prints = tracked
    assert len(prints) == 2 * 2 * 2
    for (member, layer, head), want in FINGERPRINT_PINS.items():
        key = prints[["member", "layer", "head"]].apply(tuple, axis=1)
        row = prints[key == (member, layer, head)].iloc[0]
        got = (row.qk_rho, row.first_mass, row.ov_parity_rho, row.ov_probe_acc)
        assert got == pytest.approx(want, rel=1e-5, abs=1e-7), (member, layer, head)


def _probe_per_fold_loop(v, W_O, vals, k, V, ridge=1e-3, folds=5):
    """The OV probe as first written (one centred pass over the training keys per fold)."""
    E, H, N, dh = v.shape
    if V // k < 2:
        return torch.full((E, H), math.nan, dtype=torch.float64)
    n_folds = min(-(-V // k), folds)
    v, W_O, vals = v.double(), W_O.double(), vals.long()
    fold = (vals // k) % n_folds
    y = F.one_hot(vals % k, k).double()[:, None]
    correct = torch.zeros(E, H, N, dtype=torch.float64)
    eye = torch.eye(W_O.shape[-1], dtype=torch.float64)
    for f in range(n_folds):
        w = (fold != f).double()[:, None, :, None]
        n = w.sum(2).clamp(min=1)
        mu_v = (v * w).sum(2, keepdim=True) / n[..., None]
        mu_y = (y * w).sum(2, keepdim=True) / n[..., None]
        vc = v - mu_v
        vw = (vc * w).transpose(-1, -2)
        A = W_O.transpose(-1, -2) @ (vw @ vc) @ W_O
        lam = ridge * A.diagonal(dim1=-2, dim2=-1).sum(-1) / A.shape[-1]
        A = A + lam.clamp(min=1e-12)[..., None, None] * eye
        beta = torch.linalg.solve(A, W_O.transpose(-1, -2) @ (vw @ (y - mu_y)))
        hit = ((vc @ (W_O @ beta) + mu_y).argmax(-1) == vals[:, None] % k).double()
        correct += hit * (fold == f).double()[:, None]
    per_value = torch.zeros(E, H, V, dtype=torch.float64).scatter_add_(
        2, vals[:, None].expand(E, H, N), correct)
    count = torch.zeros(E, V, dtype=torch.float64).scatter_add_(1, vals, torch.ones(E, N).double())
    seen = (count > 0)[:, None].double()
    return (per_value / count.clamp(min=1)[:, None] * seen).sum(-1) / seen.sum(-1)


@pytest.mark.parametrize("case", range(8))
def test_fold_moment_probe_equals_the_per_fold_loop(case):
    gen = torch.Generator().manual_seed(case)
    E, H = 2, 3
    N, dh, d = 300 + 97 * case, 3 + case, 4 + 3 * case
    k, V = 2 + case % 2, 5 + 4 * case
    vals = torch.randint(0, V, (E, N), generator=gen)
    offset = 4 * torch.randn(dh, generator=gen)  # far from zero: the centring must hold up
    v = torch.randn(E, H, N, dh, generator=gen) + offset
    v[:, 0, :, :k] += 3 * F.one_hot(vals % k, k)  # a head that writes the residue
    codes = torch.randn(E, V, dh, generator=gen)
    v[:, 1] = codes.gather(1, vals[..., None].expand(E, N, dh))  # value-determined keys
    W_O = torch.randn(E, H, dh, d, generator=gen)
    if case % 3 == 0:
        v[:, 2] = 0.5  # a head that writes the same vector for every key
        W_O[1] = 0.0  # and a member whose heads write nothing
    want = _probe_per_fold_loop(v, W_O, vals, k, V)
    got = ov_probe_accuracy(v, W_O, vals, k, V)
    assert torch.equal(got, want), (got, want)
    assert got[0, 0] > 0.9  # the residue head is read, whatever the offset
