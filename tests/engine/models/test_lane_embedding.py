"""Engines 8 and 9's embeddings written straight into the lane layout (issue 25): the native
kernels give PyTorch's path bit for bit — the forward, the token table's gradient (the chain
``embedding_dense_backward`` adds, a lone -0.0 turned +0.0 included) and the positions' — on
repeated and unused tokens, padded batches and a position table longer than the input; a bad
token id is refused (IndexError, no output returned); where nothing builds, PyTorch runs."""

import pytest
import torch
import torch.nn.functional as F

from native_paths import native_switch, without_a_compiler
from rulelab.models import lane_embedding
from rulelab.models.lane_forward import embed_lanes
from rulelab.models.transformer import EnsembleTransformer
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig


@pytest.fixture
def native(monkeypatch):
    return native_switch(monkeypatch, lane_embedding)


def _model(E, d, n, V, seed=0):
    cfg = MPSPRunConfig(layers=1, heads=1, d_model=d, d_mlp=0, seq_len=n, vocab=V)
    return EnsembleTransformer(cfg, E).init_weights([seed + e for e in range(E)])


def _embed_and_grads(model, x, g):
    model.zero_grad(set_to_none=True)
    out = embed_lanes(model, x)
    out.backward(g)
    return out.detach(), model.W_E.grad.clone(), model.W_pos.grad.clone()


def _bits(t):
    return t.contiguous().view(torch.int32)  # -0.0 and +0.0 apart


# (E, d, n, V, B): the ladder's and the paper's widths; a batch padded from 40 to 48; many
# tokens unused (V 200 > the examples); one member
@pytest.mark.parametrize(("E", "d", "n", "V", "B"), [(4, 24, 10, 64, 64), (2, 64, 10, 64, 40),
                                                     (3, 7, 5, 200, 16), (1, 130, 3, 5, 32)])
def test_native_equals_pytorch_bitwise(native, E, d, n, V, B):
    model = _model(E, d, n, V)
    gen = torch.Generator().manual_seed(E * d)
    x = torch.randint(0, V, (E, B, n), generator=gen)
    g = torch.randn(E, d, n + 1, B + (-B % 16), generator=gen)
    ours = native(True, lambda: _embed_and_grads(model, x, g))
    theirs = native(False, lambda: _embed_and_grads(model, x, g))
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(_bits(a), _bits(b))
    # and what both are: row token + row position, and the gradient summed per token
    E_, d_, T, Bp = g.shape
    assert torch.equal(ours[0][0, :, 0, 0], model.W_E[0, V] + model.W_pos[0, 0])  # CLS first
    tok = model.add_cls(torch.cat([x, x[:, :1].expand(E, Bp - B, n)], 1))  # [E, B', T]
    want = torch.zeros(E, V + 1, d, dtype=torch.float64)
    want.scatter_add_(1, tok.reshape(E, -1, 1).expand(-1, -1, d),
                      g.double().permute(0, 3, 2, 1).reshape(E, -1, d))
    torch.testing.assert_close(ours[1].double(), want, rtol=1e-5, atol=1e-5)


def test_a_lone_negative_zero_gradient_becomes_positive_as_pytorchs_chain_makes_it(native):
    model = _model(1, 4, 2, 50)
    x = torch.tensor([[[7, 9]]])  # token 7 once at position 1, token 9 once at position 2
    g = torch.zeros(1, 4, 3, 16)
    g[0, :, 1, 0] = -0.0
    g[0, :, 2, 0] = torch.tensor([-1.5, 2.0, -0.0, 0.25])
    ours = native(True, lambda: _embed_and_grads(model, x, g))
    theirs = native(False, lambda: _embed_and_grads(model, x, g))
    assert torch.equal(_bits(ours[1]), _bits(theirs[1]))
    assert _bits(ours[1][0, 7]).eq(0).all()  # 0 + (-0) = +0: the chain starts from zeros


def test_members_rows_apart_and_the_position_table_longer_than_the_input(native):
    model = _model(2, 8, 6, 10)
    x = torch.randint(0, 10, (2, 16, 3))  # 3 positions of a table of 7
    g = torch.randn(2, 8, 4, 16)
    ours = native(True, lambda: _embed_and_grads(model, x, g))
    assert ours[2][:, 4:].eq(0).all() and ours[2][:, :4].ne(0).all()
    solo = _model(1, 8, 6, 10, seed=1)  # member 1 alone
    alone = native(True, lambda: _embed_and_grads(solo, x[1:], g[1:]))
    for a, b in zip(ours, alone, strict=True):
        assert torch.equal(a[1:], b)


def test_a_token_out_of_range_is_refused(native):
    model = _model(1, 8, 3, 10)
    for bad in (11, -1):  # 10 is CLS, a row of the table
        x = torch.full((1, 16, 3), 2)
        x[0, 5, 1] = bad
        for on in (True, False):
            with pytest.raises(IndexError):
                native(on, lambda x=x: embed_lanes(model, x))


def test_where_nothing_builds_the_pytorch_path_runs_with_one_notice(monkeypatch):
    model = _model(2, 8, 3, 10)
    x = torch.randint(0, 10, (2, 16, 3))
    want = F.embedding(model.add_cls(x), model.W_E[0])[0]  # member 0, [B, T, d] tokens only
    with without_a_compiler(monkeypatch, lane_embedding), pytest.warns(RuntimeWarning,
                                                                      match="embedding"):
        out = embed_lanes(model, x)
    assert torch.equal(out[0].permute(2, 1, 0), want + model.W_pos[0].unsqueeze(0))
