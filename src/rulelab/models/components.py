"""Transformer components with a leading member axis ``E`` on every weight (SPEC S.2).

Weight names and layouts follow TransformerLens (``x @ W``, ``W [in, out]``), each with one
extra leading ``E``: ``W_Q [E, n_heads, d_model, d_head]``, ``W_O [E, n_heads, d_head, d_model]``.
Activations are ``[E, batch, pos, ...]``; hook names match TransformerLens.

Without hooks, a model runs its blocks' ``forward_fast`` instead (engine 7, issue 25): the
residual stream is ``[E, pos, batch, d]`` (positions outermost) and attention runs through
:mod:`rulelab.models.attention_core`, with no layout copy; the same function to rounding.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from rulelab.models.attention_core import PackedAttention, QueryAttention
from rulelab.models.hooks import HookPoint
from rulelab.models.member_norm import MemberLayerNorm


class LayerNorm(nn.Module):
    """LayerNorm with per-member affine weights ``w, b [E, d]``.

    Hooks follow TransformerLens ≥ 3.0 (its PR #770, ``components/layer_norm.py``):
    ``hook_scale`` = ``√(var(x) + eps)`` and ``hook_normalized`` = ``(x − mean(x)) / scale``,
    *before* the affine ``w, b`` (TransformerLens < 3.0 fired it after them). A hook that
    replaces ``hook_normalized`` therefore still has ``w, b`` applied to its output.
    """

    def __init__(self, n_members: int, d: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.w = nn.Parameter(torch.ones(n_members, d))
        self.b = nn.Parameter(torch.zeros(n_members, d))
        self.hook_scale = HookPoint()  # [E, ..., 1], observational only
        self.hook_normalized = HookPoint()  # [E, ..., d]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [E, *, d]; F.layer_norm has no member axis for the affine part, so apply it here.
        if self.hook_scale.has_hooks:
            self.hook_scale((x.var(-1, keepdim=True, unbiased=False) + self.eps).sqrt())
        shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (x.shape[-1],)
        y = self.hook_normalized(F.layer_norm(x, x.shape[-1:], eps=self.eps))
        return torch.addcmul(self.b.view(shape), y, self.w.view(shape))

    def forward_fast(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` without hooks: one fused kernel per member (engine 7)."""
        return MemberLayerNorm.apply(x, self.w, self.b, self.eps)


class _RowBmm(torch.autograd.Function):
    """``bmm(a [N, 1, k], b [N, k, n]) → [N, 1, n]`` for one query row per batch entry.

    ``b``'s gradient ``aᵀ @ g`` is an outer product (inner dimension 1), a shape PyTorch's CPU
    bmm runs at ≈ 0.6 GFLOP/s here (4.8 ms for 2.9 MFLOP, 4 paper-config members × 512
    examples); it is formed by broadcasting instead. Each entry is one product of
    two floats, rounded once either way, so the numbers are bitwise those of ``bmm``'s own
    backward (tests/engine/models/test_transformer.py checks it); a 2L training step: 5–10% faster.
    """

    generate_vmap_rule = True  # the gradient analyses vmap per-example gradients through it

    @staticmethod
    def forward(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)

    @staticmethod
    def setup_context(ctx, inputs: tuple[torch.Tensor, torch.Tensor], output) -> None:
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        a, b = ctx.saved_tensors
        grad_a = torch.bmm(g, b.transpose(1, 2)) if ctx.needs_input_grad[0] else None
        grad_b = a.transpose(1, 2) * g if ctx.needs_input_grad[1] else None  # [N, k, n]
        return grad_a, grad_b


def head_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a [N, H, Tq, k] @ b [N, H, k, n] → [N, H, Tq, n]`` (scores ``q kᵀ``, or ``pattern v``),
    through :class:`_RowBmm` when there is one query row and a backward to come."""
    if a.shape[2] != 1 or not torch.is_grad_enabled():
        return a @ b
    N, H, _, k = a.shape
    out = _RowBmm.apply(a.reshape(N * H, 1, k), b.reshape(N * H, k, -1))
    return out.view(N, H, 1, -1)


class Attention(nn.Module):
    """Multi-head bidirectional attention, all members in one batched matmul."""

    def __init__(self, n_members: int, d_model: int, n_heads: int) -> None:
        super().__init__()
        E, H, dh = n_members, n_heads, d_model // n_heads
        self.n_heads, self.d_head = H, dh
        self.W_Q = nn.Parameter(torch.empty(E, H, d_model, dh))
        self.W_K = nn.Parameter(torch.empty(E, H, d_model, dh))
        self.W_V = nn.Parameter(torch.empty(E, H, d_model, dh))
        self.W_O = nn.Parameter(torch.empty(E, H, dh, d_model))
        self.b_Q = nn.Parameter(torch.zeros(E, H, dh))
        self.b_K = nn.Parameter(torch.zeros(E, H, dh))
        self.b_V = nn.Parameter(torch.zeros(E, H, dh))
        self.b_O = nn.Parameter(torch.zeros(E, d_model))
        self.hook_q = HookPoint()  # [E, batch, pos, head, d_head]
        self.hook_k = HookPoint()
        self.hook_v = HookPoint()
        self.hook_attn_scores = HookPoint()  # [E, batch, head, query_pos, key_pos]
        self.hook_pattern = HookPoint()
        self.hook_z = HookPoint()  # [E, batch, pos, head, d_head]

    def forward(self, x: torch.Tensor, *, query_pos: int | None = None) -> torch.Tensor:
        """``x [E, B, T, d] → [E, B, T', d]``; ``query_pos`` keeps one query (T' = 1)."""
        E, B, T, d = x.shape
        H, dh = self.n_heads, self.d_head
        # One bmm for Q, K and V of every head: W [E, d, 3·H·dh].
        W = torch.cat([self.W_Q, self.W_K, self.W_V], dim=1)  # [E, 3H, d, dh]
        W = W.permute(0, 2, 1, 3).reshape(E, d, 3 * H * dh)
        b = torch.cat([self.b_Q, self.b_K, self.b_V], dim=1).reshape(E, 1, 3 * H * dh)
        qkv = torch.baddbmm(b, x.reshape(E, B * T, d), W).view(E, B, T, 3, H, dh)
        q, k, v = qkv.unbind(3)  # each [E, B, T, H, dh]
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        if query_pos is not None:
            q = q[:, :, query_pos : query_pos + 1]
        Tq = q.shape[2]
        # [E, B, T, H, dh] → [E·B, H, T, dh]
        q4, k4, v4 = (t.transpose(2, 3).reshape(E * B, H, -1, dh) for t in (q, k, v))
        # Plain matmul + softmax: at these tiny lengths (T ≈ 11) it beats the CPU SDPA kernel
        # (measured +8–25% per step at 2 threads, bench/train_throughput.py), and the hooked
        # and unhooked paths compute the same thing.
        scores = head_matmul(q4, k4.transpose(-1, -2)) / math.sqrt(dh)  # [E·B, H, Tq, T]
        scores = self.hook_attn_scores(scores.view(E, B, H, Tq, T))
        pattern = self.hook_pattern(scores.softmax(-1))
        z = head_matmul(pattern.view(E * B, H, Tq, T), v4)  # [E·B, H, Tq, dh]
        z = self.hook_z(z.view(E, B, H, Tq, dh).transpose(2, 3))  # [E, B, Tq, H, dh]
        out = torch.baddbmm(
            self.b_O.unsqueeze(1), z.reshape(E, B * Tq, H * dh), self.W_O.reshape(E, H * dh, d)
        )
        return out.view(E, B, Tq, d)

    def forward_fast(self, x: torch.Tensor, *, cls_only: bool = False) -> torch.Tensor:
        """``x [E, T, B, d]`` (positions outermost, ``B`` a multiple of
        :data:`~rulelab.models.attention_core.PAD`) → ``[E, T', B, d]``; ``cls_only`` keeps
        the query at position 0 (T' = 1) and projects only its q."""
        E, T, B, d = x.shape
        H, dh = self.n_heads, self.d_head
        n = H * dh
        # Q, K, V computed transposed, Wᵀ xᵀ [E, 3·H·dh, T·B]: rows (which, head, c), columns
        # (position, example) — the layout attention_core takes, with no copy.
        Wt = torch.cat([self.W_Q, self.W_K, self.W_V], dim=1).transpose(2, 3).reshape(E, 3 * n, d)
        b = torch.cat([self.b_Q, self.b_K, self.b_V], dim=1).reshape(E, 3 * n, 1)
        xt = x.reshape(E, T * B, d).transpose(1, 2)  # [E, d, T·B]
        scale = 1.0 / math.sqrt(dh)
        if cls_only:
            q = torch.baddbmm(b[:, :n], Wt[:, :n], xt[:, :, :B]).view(E, H, dh, 1, B)
            kv = torch.baddbmm(b[:, n:], Wt[:, n:], xt).view(E, 2, H, dh, T, B)
            z = QueryAttention.apply(q, kv, scale)  # [E, H, dh, 1, B]
        else:
            qkv = torch.baddbmm(b, Wt, xt).view(E, 3, H, dh, T, B)
            z = PackedAttention.apply(qkv, scale)  # [E, H, dh, T, B]
        Tq = z.shape[3]
        zt = z.view(E, n, Tq * B).transpose(1, 2)  # [E, Tq·B, H·dh], a view
        out = torch.baddbmm(self.b_O.unsqueeze(1), zt, self.W_O.reshape(E, n, d))
        return out.view(E, Tq, B, d)


class MLP(nn.Module):
    """Two-layer MLP ``W_out φ(x W_in + b_in) + b_out`` per member."""

    def __init__(self, n_members: int, d_model: int, d_mlp: int, act: str) -> None:
        super().__init__()
        self.W_in = nn.Parameter(torch.empty(n_members, d_model, d_mlp))
        self.b_in = nn.Parameter(torch.zeros(n_members, d_mlp))
        self.W_out = nn.Parameter(torch.empty(n_members, d_mlp, d_model))
        self.b_out = nn.Parameter(torch.zeros(n_members, d_model))
        self.act = {"relu": F.relu, "gelu": F.gelu}[act]
        self.hook_pre = HookPoint()  # [E, batch, pos, d_mlp]
        self.hook_post = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        E, d = x.shape[0], x.shape[-1]
        lead = x.shape[1:-1]
        h = torch.baddbmm(self.b_in.unsqueeze(1), x.reshape(E, -1, d), self.W_in)
        h = self.hook_post(self.act(self.hook_pre(h.view(E, *lead, -1))))
        out = torch.baddbmm(self.b_out.unsqueeze(1), h.reshape(E, -1, h.shape[-1]), self.W_out)
        return out.view(E, *lead, d)


class Block(nn.Module):
    """Pre-LN residual block: ``x += attn(ln1(x)); x += mlp(ln2(x))``."""

    def __init__(self, n_members: int, cfg) -> None:
        super().__init__()
        E = n_members
        # Created in execution order, so hook names list in the order a forward meets them.
        self.hook_resid_pre = HookPoint()  # [E, batch, pos, d_model]
        self.ln1 = LayerNorm(E, cfg.d_model) if cfg.ln else None
        self.attn = Attention(E, cfg.d_model, cfg.heads)
        self.hook_attn_out = HookPoint()
        self.hook_resid_mid = HookPoint()
        self.ln2 = LayerNorm(E, cfg.d_model) if cfg.ln and cfg.d_mlp else None
        self.mlp = MLP(E, cfg.d_model, cfg.d_mlp, cfg.act) if cfg.d_mlp else None
        if self.mlp is not None:  # attention-only models have no MLP hook, as in TransformerLens
            self.hook_mlp_out = HookPoint()
        self.hook_resid_post = HookPoint()

    def forward(self, x: torch.Tensor, *, query_pos: int | None = None) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        h = self.ln1(x) if self.ln1 is not None else x
        attn_out = self.hook_attn_out(self.attn(h, query_pos=query_pos))
        if query_pos is not None:  # the rest of this block only feeds position `query_pos`
            x = x[:, :, query_pos : query_pos + 1]
        x = self.hook_resid_mid(x + attn_out)
        if self.mlp is not None:
            h = self.ln2(x) if self.ln2 is not None else x
            x = x + self.hook_mlp_out(self.mlp(h))
        return self.hook_resid_post(x)

    def forward_fast(self, x: torch.Tensor, *, cls_only: bool = False) -> torch.Tensor:
        """:meth:`forward` without hooks on ``x [E, T, B, d]`` (positions outermost)."""
        h = self.ln1.forward_fast(x) if self.ln1 is not None else x
        attn_out = self.attn.forward_fast(h, cls_only=cls_only)
        x = (x[:, :1] if cls_only else x) + attn_out
        if self.mlp is not None:
            x = x + self.mlp(self.ln2.forward_fast(x) if self.ln2 is not None else x)
        return x
