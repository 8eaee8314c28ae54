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


class ResidualLayerNorm(torch.autograd.Function):
    """``base [E, d, *rows]`` (the residual stream, rows contiguous; a view is fine), ``o``
    (shaped as base), ``bias [E, d]``, the LayerNorm's ``w, b [E, d]`` and ``eps`` →
    ``s = base + (o + bias)`` and ``y = LayerNorm(s)``, both ``[E, d, *rows]``."""

    @staticmethod
    def forward(ctx, base: torch.Tensor, o: torch.Tensor, bias: torch.Tensor, w: torch.Tensor,
                b: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        ctx.set_materialize_grads(False)  # an unused s gets no gradient, not zeros added
        x = lanes.rows(base)
        s = torch.empty_like(x)
        y, mean, rstd = lanes.forward_lanes(x, w, b, eps, (lanes.rows(o), bias, s))
        ctx.save_for_backward(s, w, mean, rstd)
        ctx.shape = base.shape
        return s.view(base.shape), y.view(base.shape)

    @staticmethod
    def backward(ctx, gs: torch.Tensor | None, gy: torch.Tensor | None):
        s, w, mean, rstd = ctx.saved_tensors
        gs = None if gs is None else lanes.rows(gs)
        if gy is None:
            ds, dw, db = gs, None, None
        else:
            ds, dw, db = lanes.backward_lanes(s, lanes.rows(gy), w, mean, rstd, gs)
        if ds is None:
            return None, None, None, None, None, None
        # the bias's gradient as autograd's broadcast add formed it (at::sum_to: keepdim sum)
        E, d = s.shape[:2]
        dbias = ds.sum(2, keepdim=True).view(E, d)
        ds = ds.view(ctx.shape)
        return ds, ds, dbias, dw, db, None
