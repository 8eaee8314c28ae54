"""LayerNorm of every member with its own affine weights, the rows (the batch) innermost
(engine 8, issue 25): native loops where a C++ compiler is found (``layer_norm_kernels.cpp``),
else the same ops in PyTorch — the same numbers either way.

In engine 8's layout (:mod:`rulelab.models.lane_forward`) the residual stream is
``[E, d, T, B]``: a LayerNorm over ``d`` reduces over an outer axis, and the rows are vector
lanes. Engine 7 ran PyTorch's fused LayerNorm once per member on ``[E, T, B, d]`` (its ``.out``
overloads compute into a temporary and copy; its backward needs a contiguous gradient, which
the transposed matmul does not give). Here a LayerNorm is one call forward and one backward,
with no copy and no transpose. For each row (δ = x − mean):

    mean = (x₀ + x₁ + … + x_{d−1}) · (1/d)       var = (δ₀δ₀ + δ₁δ₁ + …) · (1/d)
    rstd = 1 / √(var + eps)     y = (δ · rstd) · w + b

and in the backward, with ĝ = g · w, a = Σ_c ĝ_c, s = Σ_c ĝ_c x̂_c (chains in c order):
``dx = ((ĝ · d − a) − x̂ · s) · (rstd · (1/d))``; ``dw`` and ``db`` sum ``g · x̂`` and ``g``
per lane (row mod 16) over the tiles of 16 rows in order, then over the 16 lanes in order.
Every op is an IEEE add, product, square root or division, rounded once, so PyTorch's vector
and scalar loops and the native ones give the same bits
(tests/engine/models/test_layer_norm_lanes.py). Nothing is summed across members: a member
equals its solo run.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np
import torch

from rulelab.models import native_build

SOURCE = Path(__file__).with_name("layer_norm_kernels.cpp")
TILE = 16  # rows per tile of the weight gradients (layer_norm_kernels.cpp); R: a multiple
D_MAX = 256  # features the native kernels take (layer_norm_kernels.cpp: DMAX)


@functools.cache
def _build() -> ctypes.CDLL | str:
    """The loaded native library, or why there is none (one line)."""
    return native_build.load(SOURCE, _declare)


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    p, i, f = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
    # x; the residual's o, bias and s (None: no residual add); w, b, eps; y, mean, rstd; E d R
    lib.rl_ln_forward.argtypes = [p, i, i, p, i, i, p, p, p, p, f, p, p, p, i, i, i]
    # x, g, gs (None: no gradient to add), w, mean, rstd, dx, dw, db, E d R
    lib.rl_ln_backward.argtypes = [p, i, i, p, i, i, p, i, i, p, p, p, p, p, p, i, i, i]
    lib.rl_ln_forward.restype = lib.rl_ln_backward.restype = None
    return lib


def unavailable() -> str | None:
    """Why the native kernels are not used here, or None when they are."""
    return native_build.why_not(_build())


def native(*tensors: torch.Tensor) -> ctypes.CDLL | None:
    """The library, where it can take these tensors (fp32 on the CPU, rows contiguous, at most
    :data:`D_MAX` features)."""
    if not native_build.fp32_cpu_rows(*tensors) or tensors[0].shape[1] > D_MAX:
        return None
    return native_build.usable(_build(), "LayerNorm")


def check_rows(R: int) -> None:
    if R % TILE:  # the caller pads the batch (attention_core.PAD)
        raise ValueError(f"LayerNorm lanes: {R} rows per member, not a multiple of {TILE}")


def _chain(parts: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """``parts[0] + parts[1] + …``, added in order."""
    out = parts[0].clone()
    for p in parts[1:]:
        out.add_(p)
    return out


def rows(t: torch.Tensor) -> torch.Tensor:
    """``t [E, d, *rows]`` as ``[E, d, R]`` with the rows contiguous: a view where the rows are
    one stretch of memory, else a copy."""
    flat = t.flatten(2)
    return flat if flat.stride(-1) == 1 else flat.contiguous()


def forward_lanes(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float,
                  residual: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``x [E, d, R]`` (rows contiguous), ``w, b [E, d]`` → ``y [E, d, R]`` (contiguous), and
    the rows' ``mean, rstd [E, R]``. With ``residual = (o, bias, s)``: the LayerNorm of
    ``x + (o + bias)`` (``o`` shaped as x, ``bias [E, d]``: each add rounded once, as PyTorch's
    two adds), that sum written to ``s`` (:mod:`rulelab.models.residual_norm`)."""
    E, d, R = x.shape
    check_rows(R)
    y, mean, rstd = x.new_empty(E, d, R), x.new_empty(E, R), x.new_empty(E, R)
    lib = native(x) if residual is None else native(x, residual[0])
    if lib is not None:
        w, b = w.contiguous(), b.contiguous()
        o, bias, s = (None, None, None) if residual is None else residual
        # held by a name until the call returns: a temporary copy's pointer would dangle
        bias = None if bias is None else bias.contiguous()
        lib.rl_ln_forward(x.data_ptr(), x.stride(0), x.stride(1),
                          *((None, 0, 0, None, None) if o is None else
                            (o.data_ptr(), o.stride(0), o.stride(1), bias.data_ptr(),
                             s.data_ptr())),
                          w.data_ptr(), b.data_ptr(), eps, y.data_ptr(), mean.data_ptr(),
                          rstd.data_ptr(), E, d, R)
        return y, mean, rstd
    if residual is not None:
        o, bias, s = residual
        x = torch.add(x, o + bias.unsqueeze(2), out=s)
    inv_d = 1.0 / d
    torch.mul(_chain(x.unbind(1)), inv_d, out=mean)
    delta = x - mean.unsqueeze(1)
    torch.mul(_chain(torch.mul(delta, delta).unbind(1)), inv_d, out=rstd)
    rstd.add_(eps)
    if rstd.device.type == "cpu":
        # numpy's square root is the IEEE one, as the native kernels' (torch.sqrt may call
        # MKL's vector math, accurate to about an ulp, not always the correctly rounded float)
        root = rstd.numpy()
        np.divide(np.float32(1.0), np.sqrt(root, out=root), out=root)
    else:
        rstd.sqrt_().reciprocal_()
    torch.add(delta.mul_(rstd.unsqueeze(1)).mul_(w.unsqueeze(2)), b.unsqueeze(2), out=y)
    return y, mean, rstd


def backward_lanes(x: torch.Tensor, g: torch.Tensor, w: torch.Tensor, mean: torch.Tensor,
                   rstd: torch.Tensor, gs: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients ``dx [E, d, R]``, ``dw, db [E, d]`` of :func:`forward_lanes` for the gradient
    ``g [E, d, R]`` of ``y`` (rows contiguous); with ``gs`` (shaped as x): the gradient reaching
    ``x`` by another use, added to ``dx`` after (the sum autograd would form: two terms, the
    same bits in either order)."""
    E, d, R = x.shape
    check_rows(R)
    dx, dw, db = x.new_empty(E, d, R), w.new_empty(E, d), w.new_empty(E, d)
    lib = native(x, g) if gs is None else native(x, g, gs)
    if lib is not None:
        w = w.contiguous()
        lib.rl_ln_backward(x.data_ptr(), x.stride(0), x.stride(1), g.data_ptr(), g.stride(0),
                           g.stride(1), *((None, 0, 0) if gs is None else
                                          (gs.data_ptr(), gs.stride(0), gs.stride(1))),
                           w.data_ptr(), mean.data_ptr(), rstd.data_ptr(), dx.data_ptr(),
                           dw.data_ptr(), db.data_ptr(), E, d, R)
        return dx, dw, db
    xhat = (x - mean.unsqueeze(1)).mul_(rstd.unsqueeze(1))
    h = g * w.unsqueeze(2)  # ĝ
    a = _chain(h.unbind(1)).unsqueeze(1)
    s = _chain((h * xhat).unbind(1)).unsqueeze(1)
    u = (rstd * (1.0 / d)).unsqueeze(1)
    torch.mul(h.mul_(float(d)).sub_(a).sub_(xhat.mul(s)), u, out=dx)
    for total, term in ((dw, g * xhat), (db, g)):
        lanes = _chain(term.reshape(E, d, R // TILE, TILE).unbind(2))  # [E, d, 16]
        total.copy_(_chain(lanes.unbind(2)))
    if gs is not None:
        dx.add_(gs)
    return dx, dw, db


class LaneLayerNorm(torch.autograd.Function):
    """``x [E, d, *rows]`` (the rows contiguous, their count a multiple of :data:`TILE`),
    ``w, b [E, d]`` → ``(x − mean) · rstd · w + b`` over ``d``, per member (engine 8)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                eps: float) -> torch.Tensor:
        lanes = rows(x)  # [E, d, R]
        y, mean, rstd = forward_lanes(lanes, w, b, eps)
        ctx.save_for_backward(lanes, w, mean, rstd)
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        lanes, w, mean, rstd = ctx.saved_tensors
        dx, dw, db = backward_lanes(lanes, rows(g), w, mean, rstd)
        return dx.view(g.shape), dw, db, None
