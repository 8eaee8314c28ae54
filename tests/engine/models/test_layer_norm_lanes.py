"""Engine 8's LayerNorm with the rows innermost (issue 25): the native kernels equal their
PyTorch ops bitwise (so the engine's numbers do not depend on whether a compiler was found), on
strided inputs and gradients, blocks of 64 rows and single tiles alike; both are LayerNorm with
per-member weights to float rounding."""

import warnings

import pytest
import torch
import torch.nn.functional as F

from native_paths import native_switch, without_a_compiler
from rulelab.models import layer_norm_lanes as lanes


@pytest.fixture
def native(monkeypatch):
    """A function running ``f`` with the native kernels (``True``) or PyTorch's ops."""
    return native_switch(monkeypatch, lanes)


def _inputs(E, d, T, B, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(E, d, T, B, generator=g) * 3 + 1  # off-centre, so the mean matters
    w, b = torch.randn(E, d, generator=g), torch.randn(E, d, generator=g)
    return x, w, b, torch.randn(E, d, T, B, generator=g)


def _forward_backward(x, w, b, dy):
    x, w, b = (t.clone().requires_grad_() for t in (x, w, b))
    y = lanes.LaneLayerNorm.apply(x, w, b, 1e-5)
    y.backward(dy)
    return y, x.grad, w.grad, b.grad


# rows per member: 11·64 (blocks of 64 then none left), 1·32 (two tiles), 5·16 (one block of
# 64 and one tile), 3·48 with d = 130
@pytest.mark.parametrize(("E", "d", "T", "B"), [(4, 24, 11, 64), (2, 64, 1, 32), (3, 7, 5, 16),
                                               (1, 130, 3, 48)])
def test_native_equals_pytorch_bitwise_and_both_are_layer_norm(native, E, d, T, B):
    x, w, b, dy = _inputs(E, d, T, B, seed=E * 100 + d)
    ours = native(True, lambda: _forward_backward(x, w, b, dy))
    for a, c in zip(ours, native(False, lambda: _forward_backward(x, w, b, dy)), strict=True):
        assert torch.equal(a, c)
    # and what both compute: LayerNorm over d, member e scaled and shifted by w[e], b[e]
    xd, wd, bd = (t.double().requires_grad_() for t in (x, w, b))
    rows = xd.movedim(1, -1)
    want = torch.stack([F.layer_norm(rows[e], (d,), wd[e], bd[e], 1e-5) for e in range(E)])
    want.movedim(-1, 1).backward(dy.double())
    for got, ref in zip(ours, (want.movedim(-1, 1), xd.grad, wd.grad, bd.grad), strict=True):
        torch.testing.assert_close(got.double(), ref, rtol=2e-5, atol=2e-5)


def test_strided_inputs_and_gradients_give_the_same_bits(native):
    x, w, b, dy = _inputs(2, 24, 3, 32, seed=5)
    wide = torch.randn(2, 40, 3, 32)[:, 8:32].copy_(x)  # features 96 rows apart, members 3840
    last = torch.randn(2, 24, 5, 32)[:, :, 2:3].copy_(x[:, :, :1])  # one position of five
    for on in (True, False):
        same = native(on, lambda: _forward_backward(x, w, b, dy))
        for a, c in zip(same, native(on, lambda: _forward_backward(wide, w, b, dy)), strict=True):
            assert torch.equal(a, c)
        one = native(on, lambda: _forward_backward(x[:, :, :1], w, b, dy[:, :, :1]))
        for a, c in zip(one, native(on, lambda: _forward_backward(last, w, b, dy[:, :, :1])),
                        strict=True):
            assert torch.equal(a, c)


def test_rows_not_in_whole_tiles_are_refused():
    with pytest.raises(ValueError, match="not a multiple of 16"):
        lanes.forward_lanes(torch.randn(1, 4, 10), torch.ones(1, 4), torch.zeros(1, 4), 1e-5)


def test_without_a_compiler_pytorch_computes_with_one_notice(monkeypatch):
    with without_a_compiler(monkeypatch, lanes):
        x, w, b, dy = _inputs(1, 8, 2, 16, seed=1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                y = _forward_backward(x, w, b, dy)[0]
        assert lanes.unavailable() == "no C++ compiler found"
        assert len(caught) == 1 and "LayerNorm" in str(caught[0].message)
        want = F.layer_norm(x[0].movedim(0, -1), (8,), w[0], b[0], 1e-5).movedim(-1, 0)
        torch.testing.assert_close(y[0], want)
