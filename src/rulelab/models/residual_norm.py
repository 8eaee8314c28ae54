"""The residual add fused with the LayerNorm that reads its sum (engines 8 and 9, issue 25).

In a pre-LayerNorm transformer every sublayer's output joins the residual stream and the sum is
normalized at once by the next sublayer (or the final LayerNorm):

    s = base + (o + bias)          o: a projection's output, bias: its bias, base: the stream
    y = LayerNorm(s)

PyTorch's path (:mod:`rulelab.models.lane_forward` before this) added the bias, then the
stream, then normalized — three passes over ``[E, d, T, B]`` forward — and its backward added
the gradients arriving at ``s`` from its two uses (the LayerNorm and the next residual add) in a
pass of their own. Here the LayerNorm's native kernels (``layer_norm_kernels.cpp``) do both: the
forward reads base, o and the bias and writes s and y; the backward adds the other use's
gradient to the LayerNorm's. The same ops in the same order, and a sum of two gradients is the
same in either order, so the same numbers to the bit (tests/engine/models/test_residual_norm.py);
the bias's gradient is PyTorch's own sum over the columns, as autograd formed it. Where the
kernels cannot run, the same ops run in PyTorch.
"""

from __future__ import annotations

import torch

from rulelab.models import layer_norm_lanes as lanes


def _rows(t: torch.Tensor) -> torch.Tensor:
    """``t [E, d, *rows]`` as ``[E, d, R]`` with the rows contiguous (a view where it can)."""
    flat = t.flatten(2)
    return flat if flat.stride(-1) == 1 else flat.contiguous()


class ResidualLayerNorm(torch.autograd.Function):
    """``base [E, d, *rows]`` (the residual stream, rows contiguous; a view is fine), ``o``
    (shaped as base), ``bias [E, d]``, the LayerNorm's ``w, b [E, d]`` and ``eps`` →
    ``s = base + (o + bias)`` and ``y = LayerNorm(s)``, both ``[E, d, *rows]``."""

    @staticmethod
    def forward(ctx, base: torch.Tensor, o: torch.Tensor, bias: torch.Tensor, w: torch.Tensor,
                b: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        ctx.set_materialize_grads(False)  # an unused s gets no gradient, not zeros added
        shape = base.shape
        x, out = _rows(base), _rows(o)
        E, d, R = x.shape
        lanes.check_rows(R)
        lib = lanes.native(x, out)
        if lib is None:
            s = x + (out + bias.unsqueeze(2))
            y, mean, rstd = lanes.forward_lanes(s, w, b, eps)
        else:
            bias, w, b = bias.contiguous(), w.contiguous(), b.contiguous()
            s, y, mean, rstd = x.new_empty(E, d, R), x.new_empty(E, d, R), x.new_empty(E, R), \
                x.new_empty(E, R)
            lib.rl_ln_forward(x.data_ptr(), x.stride(0), x.stride(1), out.data_ptr(),
                              out.stride(0), out.stride(1), bias.data_ptr(), s.data_ptr(),
                              w.data_ptr(), b.data_ptr(), eps, y.data_ptr(), mean.data_ptr(),
                              rstd.data_ptr(), E, d, R)
        ctx.save_for_backward(s, w, mean, rstd)
        ctx.shape = shape
        return s.view(shape), y.view(shape)

    @staticmethod
    def backward(ctx, gs: torch.Tensor | None, gy: torch.Tensor | None):
        s, w, mean, rstd = ctx.saved_tensors
        E, d, R = s.shape
        gs = None if gs is None else _rows(gs)
        dw = db = None
        if gy is None:
            ds = gs
        else:
            g = _rows(gy)
            lib = lanes.native(s, g, *(() if gs is None else (gs,)))
            if lib is None:
                ds, dw, db = lanes.backward_lanes(s, g, w, mean, rstd)
                if gs is not None:
                    ds = ds.add_(gs)
            else:
                w = w.contiguous()
                ds, dw, db = s.new_empty(E, d, R), w.new_empty(E, d), w.new_empty(E, d)
                g_strides = (0, 0) if gs is None else (gs.stride(0), gs.stride(1))
                lib.rl_ln_backward(s.data_ptr(), s.stride(0), s.stride(1), g.data_ptr(),
                                   g.stride(0), g.stride(1),
                                   None if gs is None else gs.data_ptr(), *g_strides,
                                   w.data_ptr(), mean.data_ptr(), rstd.data_ptr(),
                                   ds.data_ptr(), dw.data_ptr(), db.data_ptr(), E, d, R)
        if ds is None:
            return None, None, None, None, None, None
        # the bias's gradient as autograd's broadcast add formed it (at::sum_to: keepdim sum)
        dbias = ds.sum(2, keepdim=True).view(E, d)
        ds = ds.view(ctx.shape)
        return ds, ds, dbias, dw, db, None
