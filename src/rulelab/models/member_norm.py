"""LayerNorm of every member with its own affine weights, fused (engine 7, issue 25).

``F.layer_norm`` has no member axis for ``w, b [E, d]``, so the hooked
:class:`~rulelab.models.components.LayerNorm` normalizes in one call and applies the affine
part as a separate ``addcmul`` (its backward two more passes and two reductions). Without
hooks, :class:`MemberLayerNorm` runs PyTorch's fused kernel once per member instead, forward
and backward writing straight into slices of one output (``.out`` overloads, no copy). A
member's slice goes through exactly the call a solo run makes, so it is bitwise the same.
"""

from __future__ import annotations

import torch

_LN = torch.ops.aten.native_layer_norm.out
_LN_BACKWARD = torch.ops.aten.native_layer_norm_backward.out


class MemberLayerNorm(torch.autograd.Function):
    """``x [E, *, d]``, ``w, b [E, d]`` → ``(x − mean) / √(var + eps) · w + b`` per member."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                eps: float) -> torch.Tensor:
        x = x.contiguous()
        d = [x.shape[-1]]
        out = torch.empty_like(x)
        stats = x.new_empty(2, *x.shape[:-1], 1)  # mean and 1/std of every row
        for e in range(x.shape[0]):
            _LN(x[e], d, w[e], b[e], eps, out0=out[e], out1=stats[0, e], out2=stats[1, e])
        ctx.save_for_backward(x, w, b, stats)
        return out

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        x, w, b, stats = ctx.saved_tensors
        g, d = g.contiguous(), [x.shape[-1]]
        dx, dw, db = torch.empty_like(x), torch.empty_like(w), torch.empty_like(b)
        for e in range(x.shape[0]):
            _LN_BACKWARD(g[e], x[e], d, stats[0, e], stats[1, e], w[e], b[e],
                         [True, True, True], out0=dx[e], out1=dw[e], out2=db[e])
        return dx, dw, db, None
