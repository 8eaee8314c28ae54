"""The naive baseline of the benchmarks (DESIGN §6): a plain per-seed nn.Module transformer.

A straightforward pre-LN transformer classifier (nn.Linear / nn.LayerNorm,
F.scaled_dot_product_attention) reading out at a CLS token: what a user would write without
rulelab. :meth:`NaiveModel.load_member` copies member ``e`` of rulelab's EnsembleTransformer, so
both can start from the same weights. :func:`flops_per_example` counts the work (3× convention).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def flops_per_example(c, cls_only_last: bool) -> float:
    """Training FLOPs per example, 3 × forward matmul FLOPs (2 per MAC). ``cls_only_last``:
    the last layer runs attention, W_O and the MLP for the CLS row only (what rulelab runs)."""
    T, d, f = c.seq_len + 1, c.d_model, c.d_mlp
    qkv, rest = 3 * d * d, d * d + 2 * d * f + 2 * T * d  # MACs per token (attn: QK^T and AV)
    macs = (c.layers - 1) * T * (qkv + rest)
    macs += T * qkv + (1 if cls_only_last else T) * rest + d * c.label_mod
    return 3 * 2 * macs


class Block(nn.Module):
    def __init__(self, c) -> None:
        super().__init__()
        d, self.h = c.d_model, c.heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, c.d_mlp), nn.Linear(c.d_mlp, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.h, -1).permute(2, 0, 3, 1, 4)
        z = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, d)
        x = x + self.out(z)
        return x + self.fc2(F.relu(self.fc1(self.ln2(x))))


class NaiveModel(nn.Module):
    """A straightforward pre-LN transformer classifier reading out at a CLS token."""

    def __init__(self, c) -> None:
        super().__init__()
        self.cls = c.vocab
        self.embed = nn.Embedding(c.vocab + 1, c.d_model)
        self.pos = nn.Parameter(torch.zeros(c.seq_len + 1, c.d_model))
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.ln_f, self.unembed = nn.LayerNorm(c.d_model), nn.Linear(c.d_model, c.label_mod)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([torch.full_like(x[:, :1], self.cls), x], dim=1)
        h = self.embed(x) + self.pos
        for block in self.blocks:
            h = block(h)
        return self.unembed(self.ln_f(h[:, 0]))

    @torch.no_grad()
    def load_member(self, ens: nn.Module, e: int) -> NaiveModel:
        """Copy member ``e`` of rulelab's EnsembleTransformer (TransformerLens layout)."""
        self.embed.weight.copy_(ens.W_E[e]), self.pos.copy_(ens.W_pos[e])
        for mine, b in zip(self.blocks, ens.blocks, strict=True):
            a, m = b.attn, b.mlp
            W = torch.stack([a.W_Q[e], a.W_K[e], a.W_V[e]])  # [3, H, d, dh]
            mine.qkv.weight.copy_(W.permute(0, 1, 3, 2).reshape(-1, W.shape[2]))
            mine.qkv.bias.copy_(torch.stack([a.b_Q[e], a.b_K[e], a.b_V[e]]).flatten())
            mine.out.weight.copy_(a.W_O[e].flatten(0, 1).T), mine.out.bias.copy_(a.b_O[e])
            mine.fc1.weight.copy_(m.W_in[e].T), mine.fc1.bias.copy_(m.b_in[e])
            mine.fc2.weight.copy_(m.W_out[e].T), mine.fc2.bias.copy_(m.b_out[e])
            for ln, theirs in ((mine.ln1, b.ln1), (mine.ln2, b.ln2)):
                ln.weight.copy_(theirs.w[e]), ln.bias.copy_(theirs.b[e])
        self.ln_f.weight.copy_(ens.ln_final.w[e]), self.ln_f.bias.copy_(ens.ln_final.b[e])
        self.unembed.weight.copy_(ens.W_U[e].T), self.unembed.bias.copy_(ens.b_U[e])
        return self
