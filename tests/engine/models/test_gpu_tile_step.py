"""Engine 13's fused Triton step (rulelab.models.gpu_tile_step), run on the CPU by Triton's
interpreter: its loss and every gradient against PyTorch's autograd of the model's forward, at
shapes taking each of the kernel's branches; a member equals its solo run bitwise; a batch
spread over several programs and a short last tile."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from rulelab.models.tile_step import parameters, reference_loss  # noqa: E402
from rulelab.models.transformer import EnsembleTransformer, TransformerShape  # noqa: E402


@pytest.fixture(scope="module")
def gpu_step():
    """The step module, its kernel run by Triton's interpreter (tests/conftest.py sets
    ``TRITON_INTERPRET`` before anything imports Triton)."""
    from rulelab.models import gpu_tile_kernels, gpu_tile_step

    if not type(gpu_tile_kernels.step).__name__.startswith("Interpreted"):
        pytest.skip("Triton was imported before TRITON_INTERPRET was set")
    return gpu_tile_step


def model_and_batch(E, B, *, layers=2, heads=2, d=32, f=64, ln=True, n=5, V=7, k=3, seed=0):
    shape = TransformerShape(layers=layers, heads=heads, d_model=d, d_mlp=f, act="relu", ln=ln,
                             vocab=V, seq_len=n, label_mod=k)
    model = EnsembleTransformer(shape, E).init_weights(list(range(seed, seed + E)))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # LayerNorm weights and biases away from 1 and 0
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.1)
    x = torch.randint(0, V, (E, B, n), generator=gen)
    y = torch.randint(0, k, (E, B), generator=gen)
    return model, x, y


SHAPES = {  # each takes other branches of the kernel
    "2 layers, 2 heads, MLP, LayerNorm, 3 classes, a short last tile": dict(B=37),
    "1 layer, 1 head, no MLP, no LayerNorm": dict(B=20, layers=1, heads=1, d=16, f=0, ln=False,
                                                   k=2),
    "3 layers, MLP narrower than d, 12 positions": dict(B=16, layers=3, d=32, f=32, n=11, k=2),
}


# (examples a tile, the weight gradients staged in the scratch): 4 runs the last block at every
# position and reads CLS after it; staged off, the weight gradients are one product each from
# registers (gpu_tile_step.STAGE_GRADS, the variant bench/gpu_check.py times beside the engine's)
@pytest.mark.parametrize(("tile", "staged"), [(16, True), (4, True), (16, False)],
                         ids=["16", "4", "16 held"])
@pytest.mark.parametrize("name", list(SHAPES))
def test_the_fused_step_gives_autograds_loss_and_gradients(gpu_step, monkeypatch, name, tile,
                                                           staged):
    monkeypatch.setattr(gpu_step, "BT", tile)
    monkeypatch.setattr(gpu_step, "STAGE_GRADS", staged)
    kw = dict(SHAPES[name])
    B = kw.pop("B")
    model, x, y = model_and_batch(2, B, **kw)
    losses, grads = gpu_step.run_step(model, x, y, 10.0)
    ref = reference_loss(model, x, y, 10.0)
    params = [p for p in parameters(model) if p is not None]
    want = torch.autograd.grad(ref.sum(), params)
    torch.testing.assert_close(losses, ref.detach(), rtol=1e-5, atol=1e-6)
    names = {id(p): n for n, p in model.named_parameters()}
    scale = max(float(w.abs().max()) for w in want)
    for p, got, w in zip(params, grads, want, strict=True):
        if names[id(p)].endswith("b_K"):
            # softmax ignores a bias every key shares: its exact gradient is 0, and both
            # sides hold rounding noise only
            assert float(got.abs().max()) < 1e-5 * scale, names[id(p)]
            continue
        err = float((got - w).abs().max()) / max(float(w.abs().max()), 1e-6 * scale)
        assert err < 1e-4, f"{names[id(p)]}: {err:.2e} of its scale"


def test_a_member_equals_its_solo_run_bitwise(gpu_step):
    model, x, y = model_and_batch(3, 21, layers=2, heads=2, d=16, f=32, n=4, k=2)
    solo, _, _ = model_and_batch(1, 21, layers=2, heads=2, d=16, f=32, n=4, k=2)
    with torch.no_grad():
        for p, q in zip(solo.parameters(), model.parameters(), strict=True):
            p.copy_(q[1:2])
    losses, grads = gpu_step.run_step(model, x, y, 7.0)
    alone, alone_grads = gpu_step.run_step(solo, x[1:2], y[1:2], 7.0)
    assert torch.equal(losses[1:2], alone)
    for g, a in zip(grads, alone_grads, strict=True):
        assert torch.equal(g[1:2], a)


def test_a_batch_over_several_programs_adds_them_as_one(gpu_step, monkeypatch):
    """Programs of 2 tiles (32 examples) each: 50 examples go to 2 programs, the second's
    last tile short; the sums equal one program's to rounding."""
    model, x, y = model_and_batch(1, 50, layers=1, heads=1, d=16, f=16, n=3, k=2)
    one = gpu_step.run_step(model, x, y, 50.0)
    monkeypatch.setattr(gpu_step, "EXAMPLES_PER_PROGRAM", 32)
    assert gpu_step.programs(50) == (2, 2)
    two = gpu_step.run_step(model, x, y, 50.0)
    torch.testing.assert_close(two[0], one[0], rtol=1e-6, atol=1e-7)
    for a, b in zip(two[1], one[1], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_its_backward_hands_on_the_gradients_times_the_loss_weight(gpu_step):
    model, x, y = model_and_batch(2, 16, layers=1, heads=1, d=16, f=16, n=3, k=2)
    params = [p for p in parameters(model) if p is not None]
    losses, grads = gpu_step.run_step(model, x, y, 4.0)
    out = gpu_step.step_loss(model, x, y, 4.0)
    got = torch.autograd.grad((out * torch.tensor([2.0, -0.5])).sum(), params)
    for g, want in zip(got, grads, strict=True):
        torch.testing.assert_close(g, want * torch.tensor([2.0, -0.5]).view(-1, *[1] * (
            want.dim() - 1)))


@pytest.mark.parametrize("d,heads,f,why", [(24, 2, 48, "d_model 24"), (64, 8, 128, "d_head 8"),
                                           (32, 2, 48, "d_mlp 48")])
def test_shapes_it_cannot_tile_are_refused_with_the_reason(gpu_step, d, heads, f, why):
    shape = TransformerShape(layers=2, heads=heads, d_model=d, d_mlp=f, act="relu", ln=True,
                             vocab=64, seq_len=10, label_mod=2)
    assert why in gpu_step.unsupported(shape)
    ok = TransformerShape(layers=2, heads=2, d_model=64, d_mlp=128, act="relu", ln=True,
                          vocab=64, seq_len=10, label_mod=2)
    assert gpu_step.unsupported(ok) is None


def test_a_token_or_label_out_of_range_is_refused_before_the_kernel_reads_by_it(gpu_step):
    model, x, y = model_and_batch(1, 16, layers=1, heads=1, d=16, f=16, n=3, k=2)
    x[0, 3, 1] = 7  # V = 7: the CLS id, never an input
    with pytest.raises(IndexError, match=r"token ids must lie in \[0, 7\)"):
        gpu_step.run_step(model, x, y, 16.0)
    x[0, 3, 1] = 0
    y[0, 5] = 2
    with pytest.raises(IndexError, match=r"label ids must lie in \[0, 2\)"):
        gpu_step.run_step(model, x, y, 16.0)
