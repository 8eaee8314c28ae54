"""Engine 7's attention sums: the native kernels equal their PyTorch chains bitwise (so the
engine's numbers do not depend on whether a compiler was found), on views into one QKV buffer,
with one query or many; and where nothing builds, the PyTorch path runs with one notice. The
fused core (scores, softmax and values in one pass, and its backward) gives the chains' bits
too, with PyTorch's own exp, and is not used where it would not."""

import ctypes
import os
import time
import warnings

import pytest
import torch

from native_paths import native_switch, without_a_compiler
from rulelab.models import attention_core, native_build
from rulelab.models import attention_sums as sums
from rulelab.models.attention_core import (
    PackedAttention,
    QueryAttention,
    core_backward,
    reproduces,
    unfused,
)
from rulelab.models.attention_core import fused as fused_library


@pytest.fixture
def native(monkeypatch):
    """A function running ``f`` with the native kernels (``True``) or PyTorch's chains."""
    return native_switch(monkeypatch, sums)


SHAPES = [  # E, H, dh, T, Tq, B
    (4, 2, 12, 11, 11, 64), (1, 2, 32, 11, 1, 32), (3, 1, 5, 7, 7, 16), (2, 3, 8, 6, 6, 48),
]


@pytest.mark.parametrize(("E", "H", "dh", "T", "Tq", "B"), SHAPES)
def test_each_native_sum_equals_its_pytorch_chain_bitwise(native, E, H, dh, T, Tq, B):
    g = torch.Generator().manual_seed(E * 100 + dh)
    q, k, v = torch.randn(E, 3, H, dh, T, B, generator=g).unbind(1)  # strided views
    if Tq == 1:
        q = torch.randn(E, H, dh, 1, B, generator=g)
    w = torch.randn(T, E, H, Tq, B, generator=g)
    cases = {"scores": (sums.scores, (q, k), (T, E, H, Tq, B)),
             "weighted_sum": (sums.weighted_sum, (w, v), (E, H, dh, Tq, B)),
             "pairs": (sums.pairs, (w, q), (E, H, dh, T, B))}
    for name, (f, args, shape) in cases.items():
        a = native(True, lambda f=f, args=args, shape=shape: f(*args, torch.full(shape, 7.0)))
        b = native(False, lambda f=f, args=args, shape=shape: f(*args, torch.full(shape, 7.0)))
        assert torch.equal(a, b), name
        # and what each computes: the sum it names, to float rounding
        ref = {"scores": torch.einsum("ehcib,ehcjb->jehib", q.double(), k.double()),
               "weighted_sum": torch.einsum("jehib,ehcjb->ehcib", w.double(), v.double()),
               "pairs": torch.einsum("jehib,ehcib->ehcjb", w.double(), q.double())}[name]
        torch.testing.assert_close(a.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("in_order", [False, True])  # engines 7 and 8; 9 (fused where it can)
def test_attention_forward_and_backward_equal_with_and_without_native_kernels(native, in_order,
                                                                            monkeypatch):
    calls = []  # which fused passes the autograd functions ran
    for name in ("attend", "attend_backward"):
        f = getattr(attention_core, name)
        monkeypatch.setattr(attention_core, name,
                            lambda *a, f=f, name=name: calls.append(name) or f(*a))
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(2, 3, 2, 12, 11, 32, generator=g)
    q1 = torch.randn(2, 2, 12, 1, 32, generator=g)
    kv = torch.randn(2, 2, 2, 12, 11, 32, generator=g)
    dz = torch.randn(2, 2, 12, 11, 32, generator=g)

    def both():
        attention_core.fused(qkv)  # this library's once-per-process probe, done before counting
        calls.clear()
        x, q, y = (t.clone().requires_grad_() for t in (qkv, q1, kv))
        z, zq = PackedAttention.apply(x, 0.3, in_order), QueryAttention.apply(q, y, 0.3, in_order)
        (z * dz).sum().add((zq * dz[:, :, :, :1]).sum()).backward()
        return z, zq, x.grad, q.grad, y.grad

    fused = native(True, both)
    # engine 9 ran the fused core both ways for both functions (where MKL's exp is found);
    # engines 7 and 8 never do
    want = 2 * ["attend"] + 2 * ["attend_backward"] if in_order and sums.torch_exp() else []
    assert sorted(calls) == want
    for a, b in zip(fused, native(False, both), strict=True):
        assert torch.equal(a, b)


def test_a_batch_of_no_whole_block_or_a_grad_input_takes_the_pytorch_path(native):
    q, k = torch.randn(1, 1, 4, 3, 10), torch.randn(1, 1, 4, 3, 10)  # B = 10: no whole block
    assert sums._native(q, k) is None
    q16 = torch.randn(1, 1, 4, 3, 16, requires_grad=True)
    assert sums._native(q16) is None and sums._native(q16.detach()) is not None


def test_without_a_compiler_pytorch_computes_with_one_notice(monkeypatch):
    with without_a_compiler(monkeypatch, sums):
        q, k = torch.randn(1, 2, 4, 3, 16), torch.randn(1, 2, 4, 3, 16)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                s = sums.scores(q, k, torch.empty(3, 1, 2, 3, 16))
        assert sums.unavailable() == "no C++ compiler found"
        assert len(caught) == 1 and "no C++ compiler found" in str(caught[0].message)
        torch.testing.assert_close(s, torch.einsum("ehcib,ehcjb->jehib", q, k))


def test_the_library_is_built_once_into_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RULELAB_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setenv("RULELAB_NATIVE", "1")
    sums._build.cache_clear()
    try:
        if sums.unavailable() is not None:
            pytest.skip(f"native kernels unavailable here: {sums.unavailable()}")
        (built,) = tmp_path.glob("attention-*.so")
        assert [p.name for p in tmp_path.iterdir()] == [built.name]  # no temporary left
        stamp = built.stat().st_mtime_ns
        sums._build.cache_clear()
        assert sums.unavailable() is None and built.stat().st_mtime_ns == stamp  # reused
    finally:
        sums._build.cache_clear()


def test_a_new_build_keeps_its_familys_newest_libraries_and_clears_stale_temporaries(tmp_path):
    now = time.time()
    for i in range(6):  # six older attention libraries, one of another family, two temporaries
        (tmp_path / f"attention-old{i}.so").write_bytes(b"")
        os.utime(tmp_path / f"attention-old{i}.so", (now - 100 * (i + 1),) * 2)
    (tmp_path / "layer_norm-x.so").write_bytes(b"")
    os.utime(tmp_path / "layer_norm-x.so", (now - 10_000,) * 2)
    for name, age in (("tmpold.so", 2 * native_build.STALE_TEMP_S), ("tmpnew.so", 5)):
        (tmp_path / name).write_bytes(b"")
        os.utime(tmp_path / name, (now - age,) * 2)
    built = tmp_path / "attention-new.so"
    built.write_bytes(b"")
    native_build.prune(built)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["attention-new.so", "attention-old0.so", "attention-old1.so",
                    "attention-old2.so", "layer_norm-x.so", "tmpnew.so"]


FUSED_SHAPES = [*SHAPES, (4, 2, 32, 11, 11, 512), (4, 2, 12, 11, 1, 512)]


@pytest.mark.parametrize(("E", "H", "dh", "T", "Tq", "B"), FUSED_SHAPES)
def test_the_fused_core_gives_engine_9s_pytorch_chains_bits(native, E, H, dh, T, Tq, B):
    if sums.torch_exp() is None:
        pytest.skip("this PyTorch has no MKL exp to fuse with")
    g = torch.Generator().manual_seed(E * 100 + dh + Tq)
    # scores spread wide (× 8): exp runs from 1 down through denormals to 0
    q, k, v = (torch.randn(E, 3, H, dh, T, B, generator=g) * 8).unbind(1)  # strided views
    if Tq == 1:
        q = q[:, :, :, :1]
    dz = torch.randn(E, H, dh, Tq, B, generator=g)

    def fused():
        lib = fused_library(q, k, v)
        assert lib is not None  # the self-check passes where the kernels build
        z, p = sums.attend(lib, q, k, v, 0.3)
        grads = [torch.full(t.shape, 7.0) for t in (q, k, v)]
        sums.attend_backward(lib, dz, q, k, v, p, 0.3, *grads)
        return z, p, *grads

    def chains():
        z, p = unfused(q, k, v, 0.3, True)
        grads = [torch.full(t.shape, 7.0) for t in (q, k, v)]
        core_backward(dz, q, k, v, p, 0.3, *grads, True)
        return z, p, *grads

    got, want = native(True, fused), native(False, chains)
    for name, a, b in zip(("z", "p", "dq", "dk", "dv"), got, want, strict=True):
        assert torch.equal(a, b), name
    assert (want[1] > 0).any(0).all()  # every query's max key kept
    if want[1].numel() > 10_000:  # enough scores to reach exp's denormals and its 0
        denormal = (want[1] > 0) & (want[1] < torch.finfo(torch.float32).tiny)
        assert denormal.any() and (want[1] == 0).any()


@pytest.mark.parametrize(("Tq", "B"), [(11, 48), (1, 32)])
def test_the_fused_core_adds_the_projections_biases_as_pytorchs_add_did(native, Tq, B):
    """q, k and v's biases added as the fused core packs them (engine 9 since the twelfth
    session) give the bits of q, k, v biased by PyTorch first, forward and backward — and
    both autograd functions return the biases' gradients autograd's broadcast add formed."""
    if sums.torch_exp() is None:
        pytest.skip("this PyTorch has no MKL exp to fuse with")
    E, H, dh, T = 3, 2, 12, 11
    g = torch.Generator().manual_seed(Tq)
    raw = torch.randn(E, 3, H, dh, T, B, generator=g) * 4
    bias = torch.randn(E, 3 * H * dh, generator=g)  # [b_Q | b_K | b_V] per member
    dz = torch.randn(E, H, dh, Tq, B, generator=g)
    n = H * dh

    def autograd(with_core_bias: bool):
        x, b = raw.clone().requires_grad_(), bias.clone().requires_grad_()
        if Tq == 1:
            q, kv = x[:, 0, :, :, :1].contiguous(), x[:, 1:]
            if with_core_bias:
                z = QueryAttention.apply(q, kv, 0.3, True, b[:, :n], b[:, n:])
            else:
                qb = q + b[:, :n].reshape(E, H, dh, 1, 1)
                kvb = kv + b[:, n:].reshape(E, 2, H, dh, 1, 1)
                z = QueryAttention.apply(qb, kvb, 0.3, True)
        elif with_core_bias:
            z = PackedAttention.apply(x, 0.3, True, b)
        else:  # as lane_forward did: the projection's bias add_ over [E, 3n, T·B]
            xb = x.reshape(E, 3 * n, T * B).add(b.unsqueeze(2)).view(x.shape)
            z = PackedAttention.apply(xb, 0.3, True)
        (z * dz).sum().backward()
        return z, x.grad, b.grad

    for on in (True, False):
        got, want = native(on, lambda: autograd(True)), native(on, lambda: autograd(False))
        for name, a, c in zip(("z", "d qkv", "d bias"), got, want, strict=True):
            assert torch.equal(a, c), (on, name)


def test_the_exp_found_is_pytorchs_own_to_the_bit():
    if (address := sums.torch_exp()) is None:
        pytest.skip("this PyTorch has no MKL exp")
    vexp = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_longlong)(address)
    edges = [0.0, -0.0, -87.3, -103.9, -104.0, -150.0, 88.7, 89.0, 1e-45, -1e-45,
             float("inf"), float("-inf"), float("nan")]
    x = torch.cat([torch.randn(10_000, generator=torch.Generator().manual_seed(0)) * 30,
                   torch.tensor(edges)])
    out = torch.empty_like(x)
    vexp(x.numel(), x.data_ptr(), out.data_ptr(), sums.VML_MODE)
    assert torch.equal(out.view(torch.int32), x.exp().view(torch.int32))


VEXP = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong)


@VEXP
def _exp_one_ulp_up(n, a, r, mode):  # an exp that rounds otherwise: PyTorch's, one ulp up
    x = torch.frombuffer((ctypes.c_float * n).from_address(a), dtype=torch.float32)
    out = torch.frombuffer((ctypes.c_float * n).from_address(r), dtype=torch.float32)
    out.copy_(x.exp().view(torch.int32).add(1).view(torch.float32))


def test_a_fused_core_that_rounds_otherwise_is_not_used(native, monkeypatch):
    if sums.torch_exp() is None:
        pytest.skip("this PyTorch has no MKL exp")
    # Not MKL's low-accuracy mode: on an AMD CPU MKL runs the same exp in every mode.
    monkeypatch.setattr(sums, "torch_exp", lambda: ctypes.cast(_exp_one_ulp_up,
                                                               ctypes.c_void_p).value)
    reproduces.cache_clear()
    q, k, v = torch.randn(3, 1, 2, 4, 5, 16).unbind(0)
    try:
        with pytest.warns(RuntimeWarning, match="fused attention kernel is not used"):
            assert native(True, lambda: fused_library(q, k, v)) is None
    finally:
        reproduces.cache_clear()
