"""Engine 11's step (issue 25, ``models/tile_step.py``, ``step_kernels.cpp``): the forward, the
cross-entropy and the backward of one tile of examples at a time, natively. Oracle: the loss
and every gradient PyTorch's autograd gives through the model's own forward (engine 4's ops)
in float64, at shapes that exercise each branch; then the properties the trainer relies on: a member
equals its solo run bitwise, the same call gives the same bits, padding adds nothing."""

import copy
import ctypes

import pytest
import torch

from rulelab.models import native_build, tile_step
from rulelab.models.transformer import EnsembleTransformer, TransformerShape

pytestmark = pytest.mark.skipif(tile_step.native() is None,
                                reason="engine 11's kernel did not build here")


def _shape(**over) -> TransformerShape:
    base = dict(layers=2, heads=2, d_model=24, d_mlp=48, act="relu", ln=True, vocab=13,
                seq_len=6, label_mod=2)
    return TransformerShape(**{**base, **over})


def _model(shape: TransformerShape, seeds=(1, 2)) -> EnsembleTransformer:
    model = EnsembleTransformer(shape, len(seeds)).init_weights(list(seeds))
    gen = torch.Generator().manual_seed(sum(seeds))
    with torch.no_grad():  # biases and LayerNorm weights away from 0 and 1: every path counts
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=gen))
    model.engine = 4
    return model


def _data(shape: TransformerShape, E: int, B: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, shape.vocab, (E, B, shape.seq_len), generator=gen)
    return x, torch.randint(0, shape.label_mod, (E, B), generator=gen)


def _grads(model, loss_fn, x, y, denom):
    model.zero_grad()
    loss = loss_fn(model, x, y, denom)
    loss.sum().backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


SHAPES = {
    "2L, the ladder's 2k widths": _shape(),
    "1L": _shape(layers=1, d_model=32, d_mlp=64),
    "3L, 4 heads, 3 classes": _shape(layers=3, heads=4, d_model=32, d_mlp=40, label_mod=3),
    "no MLP": _shape(d_mlp=0),
    "no LayerNorm": _shape(ln=False),
    "1 head of 20, d_mlp not a multiple of 8": _shape(heads=1, d_model=20, d_mlp=36),
    "11 positions, the paper's widths": _shape(seq_len=10, vocab=64, d_model=64, d_mlp=128),
}


def _oracle(model, x, y, denom):
    """The loss and gradients autograd gives through the model's forward in float64."""
    wide = copy.deepcopy(model).double()
    loss, grads = _grads(wide, tile_step.reference_loss, x, y, denom)
    return loss.float(), {n: g.float() for n, g in grads.items()}


def _assert_close(got: dict, ref: dict, rel: float) -> None:
    # b_K's true gradient is 0 (a key bias adds the same to every score of a query): both
    # sides are rounding noise there, far below the scale
    scale = max(g.abs().max().item() for g in ref.values())
    for n, g in ref.items():
        torch.testing.assert_close(got[n], g, rtol=0, atol=rel * scale, msg=n)


@pytest.mark.parametrize("name", list(SHAPES))
def test_loss_and_every_gradient_match_autograd_in_float64(name):
    shape = SHAPES[name]
    model = _model(shape)
    x, y = _data(shape, 2, 70)  # 70: the last tile padded
    ref_loss, ref = _oracle(model, x, y, 100.0)
    loss, got = _grads(model, tile_step.step_loss, x, y, 100.0)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-6, atol=1e-7)
    _assert_close(got, ref, 1e-6)  # PyTorch's own float32 autograd is off by up to ≈ 1e-4
    scale = max(g.abs().max().item() for g in ref.values())
    assert ref["blocks.0.attn.W_K"].abs().max() > 1e-3 * scale  # the attention is exercised


def test_a_wrong_gradient_is_caught():
    # the oracle's tolerance sees a gradient off by 0.01%
    shape = SHAPES["2L, the ladder's 2k widths"]
    model = _model(shape)
    x, y = _data(shape, 2, 40)
    _, ref = _oracle(model, x, y, 40.0)
    _, got = _grads(model, tile_step.step_loss, x, y, 40.0)
    got["blocks.0.mlp.W_in"] *= 1.0001
    with pytest.raises(AssertionError):
        _assert_close(got, ref, 1e-6)


def test_a_member_equals_its_solo_run_bitwise():
    shape = SHAPES["2L, the ladder's 2k widths"]
    seeds = (3, 8, 5)
    ens = _model(shape, seeds)
    x, y = _data(shape, 3, 100)
    loss, grads = _grads(ens, tile_step.step_loss, x, y, 100.0)
    for e, seed in enumerate(seeds):
        solo = EnsembleTransformer(shape, 1)
        with torch.no_grad():
            for (_, p), (_, q) in zip(solo.named_parameters(), ens.named_parameters(),
                                      strict=True):
                p.copy_(q[e : e + 1])
        solo_loss, solo_grads = _grads(solo, tile_step.step_loss, x[e : e + 1], y[e : e + 1],
                                       100.0)
        assert torch.equal(solo_loss[0], loss[e])
        for n, g in solo_grads.items():
            assert torch.equal(g[0], grads[n][e]), (seed, n)


def test_the_same_call_gives_the_same_bits_and_a_view_reads_as_a_copy():
    shape = SHAPES["2L, the ladder's 2k widths"]
    model = _model(shape)
    x, y = _data(shape, 2, 50)
    assert 50 % tile_step.tile_examples(shape) != 0  # the last tile is padded
    a = _grads(model, tile_step.step_loss, x, y, 50.0)
    b = _grads(model, tile_step.step_loss, x, y, 50.0)
    assert torch.equal(a[0], b[0]) and all(torch.equal(a[1][n], b[1][n]) for n in a[1])
    # the first 50 examples of a longer batch, as the trainer's passes slice them
    x2, y2 = torch.cat([x, x.flip(1)], 1), torch.cat([y, 1 - y.flip(1)], 1)
    c = _grads(model, tile_step.step_loss, x2[:, :50], y2[:, :50], 50.0)
    assert torch.equal(a[0], c[0]) and all(torch.equal(a[1][n], c[1][n]) for n in a[1])


def test_the_tile_is_fixed_by_the_shape_within_the_budget():
    for shape in SHAPES.values():
        tile = tile_step.tile_examples(shape)
        assert tile % 16 == 0 and 16 <= tile <= tile_step.TILE_MAX
        lib = tile_step.native()
        fits = 4 * tile_step._scratch_floats(lib, shape, tile) <= tile_step.TILE_BYTES
        assert fits or tile == 16
        bigger = tile + 16
        assert bigger > tile_step.TILE_MAX or (
            4 * tile_step._scratch_floats(lib, shape, bigger) > tile_step.TILE_BYTES)


def test_what_it_cannot_run_is_named():
    assert "gelu" in tile_step.unsupported(_shape(act="gelu"))
    assert tile_step.unsupported(_shape(act="gelu", d_mlp=0)) is None  # no MLP: no activation
    assert "positions" in tile_step.unsupported(_shape(seq_len=tile_step.MAX_POSITIONS))
    assert tile_step.unsupported(_shape()) is None


def _assert_same_bits(lib: ctypes.CDLL, shape: TransformerShape) -> None:
    """The loss and every gradient of one step from ``lib`` equal the trainer's own kernel's."""
    model = _model(shape)
    x, y = _data(shape, 2, 70)  # a tile of 48 and one of 32 (22 examples, padded)
    own = _grads(model, tile_step.step_loss, x, y, 70.0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tile_step, "native", lambda: lib)
        other = _grads(model, tile_step.step_loss, x, y, 70.0)
    assert torch.equal(own[0], other[0])
    for n, g in own[1].items():
        assert torch.equal(g, other[1][n]), n


def test_an_avx2_build_gives_the_avx512_builds_bits(tmp_path):
    """The blocking and the vector width never change a sum's order: the kernel built for AVX2
    (8-lane vectors, every sum over rows still in 16 lanes) computes the same bits, here on one
    CPU and one exp."""
    if tile_step.native().rl_step_vector_bits() < 512:
        pytest.skip("this build is not AVX-512's")
    avx2 = tile_step.build_variant(tmp_path / "step_avx2.so", native_build.flags("haswell"))
    assert avx2.rl_step_vector_bits() == 256
    _assert_same_bits(avx2, _shape(seq_len=4, d_model=16, d_mlp=24))


def test_the_register_blocks_give_the_bits_of_one_sum_at_a_time(tmp_path):
    """The weight matmuls' register blocks (6 × 2 and 4 × 3 on AVX2, 8 × 2 and 4 × 4 on
    AVX-512, split evenly) never change a sum's order: the kernel built with every block one
    sum (``-DRL_ONE_BY_ONE``) gives the same loss and gradients, on this CPU's vector width."""
    one = tile_step.build_variant(tmp_path / "step_one_by_one.so",
                                 (*native_build.FLAGS, "-DRL_ONE_BY_ONE"))
    for name in ("2L, the ladder's 2k widths", "1 head of 20, d_mlp not a multiple of 8",
                 "3L, 4 heads, 3 classes"):
        _assert_same_bits(one, SHAPES[name])


def test_ids_out_of_range_are_refused_before_the_kernel_reads_them():
    shape = SHAPES["2L, the ladder's 2k widths"]
    model = _model(shape)
    x, y = _data(shape, 2, 20)
    bad_x = x.clone()
    bad_x[1, 3, 2] = shape.vocab  # the CLS id is no input token
    with pytest.raises(IndexError, match=r"token ids must lie in \[0, 13\)"):
        tile_step.step_loss(model, bad_x, y, 20.0)
    with pytest.raises(IndexError, match=r"label ids must lie in \[0, 2\)"):
        tile_step.step_loss(model, x, y - 1, 20.0)


# ---- bf16 (--precision bf16: every weight matmul's operands rounded to bf16, summed in fp32) ----
needs_bf16 = pytest.mark.skipif(not tile_step.computes_bf16(),
                                reason="this kernel was not built for AVX-512-BF16")


def _bf(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).to(t.dtype)


class _Bf16Product(torch.autograd.Function):
    """``x @ w`` as the kernel's bf16 matmuls compute it, in float64: both operands rounded to
    bf16 forward; backward, the incoming gradient rounded too, for the input's gradient and
    the weight's (``rounds_backward=False``: a kernel that forgot that rounding)."""

    rounds_backward = True

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return _bf(x) @ _bf(w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g = _bf(g) if _Bf16Product.rounds_backward else g
        return g @ _bf(w).transpose(1, 2), _bf(x).transpose(1, 2) @ g


class _Bf16WeightMatmuls(torch.overrides.TorchFunctionMode):
    """The model's weight matmuls (its ``baddbmm``s: Q/K/V, W_O, the MLP, W_U) through
    :class:`_Bf16Product`; the attention's own products (``@``, ``bmm``) stay exact."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.baddbmm:
            bias, x, w = args
            return bias + _Bf16Product.apply(x, w)
        return func(*args, **(kwargs or {}))


def _bf16_oracle(model, x, y, denom, rounds_backward=True):
    _Bf16Product.rounds_backward = rounds_backward
    try:
        with _Bf16WeightMatmuls():
            return _oracle(model, x, y, denom)
    finally:
        _Bf16Product.rounds_backward = True


def _bf16_grads(model, x, y, denom):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return _grads(model, tile_step.step_loss, x, y, denom)


def _quantile(got: dict, ref: dict, q: float) -> float:
    """The ``q`` quantile of every gradient entry's |difference|, over the largest gradient."""
    scale = max(g.abs().max().item() for g in ref.values())
    return torch.cat([(got[n] - ref[n]).abs().flatten() for n in ref]).quantile(q).item() / scale


@needs_bf16
@pytest.mark.parametrize("name", list(SHAPES))
def test_bf16_matches_its_rounding_in_float64_and_not_fp32s(name):
    # An operand the kernel computes in fp32 can round to the other bf16 neighbour than the
    # float64 oracle's (rarely, then by 2⁻⁸), so deep models differ in a few entries: the bulk
    # agrees 10–100× closer to the bf16 oracle than to plain float64.
    shape = SHAPES[name]
    model = _model(shape)
    x, y = _data(shape, 2, 70)
    ref_loss, ref = _bf16_oracle(model, x, y, 100.0)
    _, exact = _oracle(model, x, y, 100.0)
    loss, got = _bf16_grads(model, x, y, 100.0)
    torch.testing.assert_close(loss, ref_loss, rtol=3e-4, atol=0)
    assert _quantile(got, ref, 0.9) < 5e-5
    assert _quantile(got, exact, 0.9) > 3e-4  # fp32's matmuls would be within 1e-6 of it


@needs_bf16
@pytest.mark.parametrize("name", ["1L", "no LayerNorm", "1 head of 20, d_mlp not a multiple of 8"])
def test_bf16_rounds_the_backwards_gradients_too(name):
    # shallow models: the bulk of the gradients agree with the bf16 oracle to fp32 rounding,
    # and a kernel that multiplied unrounded gradients would be ≥ 1e-5 off in most entries
    shape = SHAPES[name]
    model = _model(shape)
    x, y = _data(shape, 2, 70)
    _, got = _bf16_grads(model, x, y, 100.0)
    assert _quantile(got, _bf16_oracle(model, x, y, 100.0)[1], 0.9) < 1e-6
    assert _quantile(got, _bf16_oracle(model, x, y, 100.0, rounds_backward=False)[1], 0.5) > 5e-6


@needs_bf16
def test_bf16_member_equals_its_solo_run_bitwise_and_repeats():
    shape = SHAPES["2L, the ladder's 2k widths"]
    seeds = (3, 8, 5)
    ens = _model(shape, seeds)
    x, y = _data(shape, 3, 100)
    loss, grads = _bf16_grads(ens, x, y, 100.0)
    again = _bf16_grads(ens, x, y, 100.0)
    assert torch.equal(loss, again[0]) and all(torch.equal(grads[n], again[1][n]) for n in grads)
    for e in range(len(seeds)):
        solo = EnsembleTransformer(shape, 1)
        with torch.no_grad():
            for (_, p), (_, q) in zip(solo.named_parameters(), ens.named_parameters(),
                                      strict=True):
                p.copy_(q[e : e + 1])
        solo_loss, solo_grads = _bf16_grads(solo, x[e : e + 1], y[e : e + 1], 100.0)
        assert torch.equal(solo_loss[0], loss[e])
        for n, g in solo_grads.items():
            assert torch.equal(g[0], grads[n][e]), (e, n)


def test_bf16_is_refused_by_a_kernel_without_it(monkeypatch):
    shape = SHAPES["2L, the ladder's 2k widths"]
    model = _model(shape)
    x, y = _data(shape, 2, 20)
    lib = tile_step.native()
    no_bf16 = type("NoBf16", (), {"__getattr__": lambda self, a: getattr(lib, a),
                                  "rl_step_bf16": staticmethod(lambda: 0)})()
    monkeypatch.setattr(tile_step, "native", lambda: no_bf16)
    assert not tile_step.computes_bf16()
    with pytest.raises(RuntimeError, match="AVX-512-BF16"):
        _bf16_grads(model, x, y, 20.0)


@pytest.mark.parametrize("name", list(SHAPES))
def test_the_forward_alone_gives_the_logits_of_float64(name):
    # engine 12's evaluation: the kernel's forward, tile by tile (70: the last tile padded)
    shape = SHAPES[name]
    model = _model(shape)
    x, _ = _data(shape, 2, 70)
    with torch.no_grad():
        want = copy.deepcopy(model).double()(x).float()
    got = tile_step.tile_logits(model, x)
    torch.testing.assert_close(got, want, rtol=0, atol=2e-6 * want.abs().max().item())
    # a member's logits are its own: alone, the same bits; a view of a longer batch, too
    solo = EnsembleTransformer(shape, 1)
    with torch.no_grad():
        for (_, p), (_, q) in zip(solo.named_parameters(), model.named_parameters(), strict=True):
            p.copy_(q[1:2])
    assert torch.equal(tile_step.tile_logits(solo, x[1:2])[0], got[1])
    longer = torch.cat([x, x.flip(1)], 1)
    assert torch.equal(tile_step.tile_logits(model, longer[:, :70]), got)
    with pytest.raises(IndexError, match="token ids"):
        tile_step.tile_logits(model, x + shape.vocab)
