"""The ensemble transformer classifier (SPEC S.2, DESIGN §1), shaped by a
:class:`TransformerShape` (study S's MPSP runs; sparse parity's bit-token runs).

A CLS token (id ``V``) is prepended to each sequence; attention is bidirectional; blocks are
pre-LayerNorm (or no LayerNorm); the final LayerNorm'd CLS residual is unembedded to ``k``
logits. Every parameter has a leading member axis ``E`` and each member is initialised from
its own seed, so member ``i`` of an ensemble equals the same model built alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from rulelab.models import gpu_tile_step, tile_step
from rulelab.models.components import Block, LayerNorm
from rulelab.models.fused_forward import fused_forward
from rulelab.models.hooks import HookedEnsemble, HookPoint
from rulelab.models.lane_forward import embed_padded, lane_forward
from rulelab.models.passes import GPU_TILE_ENGINE, SIZED_PASS_ENGINE
from rulelab.models.tile_step import TILE_ENGINE, TILE_STEP_ENGINES

FAST_ATTENTION_ENGINE = 7  # the engine version that runs forward_fast (store.version, issue 25)
LANE_ENGINE = 8  # the engine version that runs lane_forward: batch innermost everywhere
# lane_forward with the attention's softmax sums in key order, its core fused (issue 25)
FUSED_LANE_ENGINE = 9
# the engines whose forward is lane_forward (engine 11's evaluation is engine 10's forward;
# engine 12's, without a gradient to take, is its step kernel's forward: tile_step.tile_logits)
LANE_ENGINES = (LANE_ENGINE, FUSED_LANE_ENGINE, SIZED_PASS_ENGINE, *TILE_STEP_ENGINES)
COMPILED_ENGINES = (3, 5)  # trace fused_forward inside torch.compile (store.version, issue 25)


@dataclass(frozen=True)
class TransformerShape:
    """What fixes a transformer's parameters: its shape, not a study's config (issue 22)."""

    layers: int  # blocks
    heads: int  # attention heads per block
    d_model: int  # residual stream width
    d_mlp: int  # MLP width; 0: attention only
    act: str  # MLP activation: relu or gelu
    ln: bool  # pre-LayerNorm blocks and a final LayerNorm
    vocab: int  # V input tokens 0..V−1; the CLS token is id V
    seq_len: int  # n input positions (after CLS)
    label_mod: int  # k classes: logits read at CLS

    @classmethod
    def of(cls, cfg) -> TransformerShape:
        """The shape fields of any config that carries them (e.g. study S's run config)."""
        return cfg if isinstance(cfg, cls) else cls(**{f.name: getattr(cfg, f.name)
                                                       for f in fields(cls)})


class EnsembleTransformer(HookedEnsemble):
    """``E`` independent transformers sharing one shape. Input ``[E, B, n]`` → logits ``[E, B, k]``.

    ``shape`` is a :class:`TransformerShape` (or any object with its fields, read through
    :meth:`TransformerShape.of`); ``self.cfg`` holds the shape. ``engine`` is the engine
    version whose numerics the forward computes (the trainer sets it to the engine it trains
    with, :func:`rulelab.engine.compiled.engine_in_use`). Under the compiled engine the forward
    traced by ``torch.compile`` is :func:`~rulelab.models.fused_forward.fused_forward`; run
    eagerly (evaluation, analyses) it is engine 1's.
    """

    engine = 1
    # the lane engine: its eager engine on the CPU where a task's step is its own (sparse
    # parity); study S's runs train with engine 12 where it can (eager_engine below)
    eager_engine = SIZED_PASS_ENGINE
    # engines under which it computes its own step (step_loss): 11, 12 on the CPU, 13 on CUDA
    step_engines = (*TILE_STEP_ENGINES, GPU_TILE_ENGINE)

    def __init__(self, shape: TransformerShape, n_members: int) -> None:
        super().__init__()
        cfg = TransformerShape.of(shape)
        E, d = n_members, cfg.d_model
        self.cfg, self.n_members = cfg, n_members
        self.cls_token = cfg.vocab
        self.W_E = nn.Parameter(torch.empty(E, cfg.vocab + 1, d))  # [E, d_vocab, d_model]
        self.W_pos = nn.Parameter(torch.empty(E, cfg.seq_len + 1, d))  # [E, n_ctx, d_model]
        self.hook_embed = HookPoint()  # [E, batch, pos, d_model]
        self.hook_pos_embed = HookPoint()
        self.blocks = nn.ModuleList(Block(E, cfg) for _ in range(cfg.layers))
        self.ln_final = LayerNorm(E, d) if cfg.ln else None
        self.W_U = nn.Parameter(torch.empty(E, d, cfg.label_mod))  # [E, d_model, d_vocab_out]
        self.b_U = nn.Parameter(torch.zeros(E, cfg.label_mod))
        self.setup_hooks()

    def init_weights(self, seeds: Sequence[int]) -> EnsembleTransformer:
        """Member ``e`` draws every weight matrix from its own generator seeded with ``seeds[e]``.

        Weight matrices ~ N(0, (0.8/√d_model)²) (TransformerLens' default ``initializer_range``);
        biases 0; LayerNorm weights 1.
        """
        if len(seeds) != self.n_members:
            raise ValueError(f"need {self.n_members} seeds, got {len(seeds)}")
        std = 0.8 / math.sqrt(self.cfg.d_model)
        named = [(n, p) for n, p in self.named_parameters() if n.split(".")[-1].startswith("W_")]
        with torch.no_grad():
            for e, seed in enumerate(seeds):
                gen = torch.Generator().manual_seed(int(seed))
                for _, p in named:  # fixed order: named_parameters() is deterministic
                    p[e].copy_(torch.randn(p.shape[1:], generator=gen) * std)
        return self

    def add_cls(self, x: torch.Tensor) -> torch.Tensor:
        """``[E, B, n]`` integers → ``[E, B, n+1]`` tokens with CLS at position 0."""
        cls = torch.full((*x.shape[:-1], 1), self.cls_token, dtype=x.dtype, device=x.device)
        return torch.cat([cls, x], dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [E, B, n]`` (integers, without CLS) → logits ``[E, B, k]`` read at CLS."""
        hooked = any(hp.has_hooks for hp in self.hook_dict.values())
        if self.engine in COMPILED_ENGINES and not hooked and torch.compiler.is_compiling():
            return fused_forward(self, x)  # the training step, traced by torch.compile
        plain = not hooked and torch._C._functorch.maybe_current_level() is None
        if (self.engine == TILE_ENGINE and plain and not torch.is_grad_enabled()
                and tile_step.native() is not None):
            return tile_step.tile_logits(self, x)  # evaluation: the step's own forward
        if self.engine in LANE_ENGINES and plain:
            return lane_forward(self, x, in_order=self.engine != LANE_ENGINE)
        if self.engine == FAST_ATTENTION_ENGINE and plain:
            return self.forward_fast(x)
        # Engines 1 and 4; or hooks, or under vmap / grad (per-example gradients: the analyses): the
        # TransformerLens layout, whose ops all have batching rules.
        tokens = self.add_cls(x)
        E, B, T = tokens.shape
        # Gather from W_E flattened to [E·d_vocab, d]: F.embedding's backward accumulates each
        # member's rows in the same order as a lone run would (advanced indexing does not).
        V = self.W_E.shape[1]
        offset = torch.arange(E, device=x.device).view(E, 1, 1) * V
        embed = F.embedding(tokens + offset, self.W_E.reshape(E * V, -1))
        embed = self.hook_embed(embed)  # [E, B, T, d]
        pos = self.hook_pos_embed(self.W_pos[:, :T].unsqueeze(1).expand(E, B, T, -1))
        resid = embed + pos
        for i, block in enumerate(self.blocks):  # unhooked, the last block needs only CLS
            last = i == len(self.blocks) - 1
            resid = block(resid, query_pos=0 if (last and not hooked) else None)
        if self.ln_final is not None:
            resid = self.ln_final(resid)
        cls = resid[:, :, 0]  # [E, B, d]
        return torch.baddbmm(self.b_U.unsqueeze(1), cls, self.W_U)  # [E, B, k]

    def step_loss(self, x: torch.Tensor, y: torch.Tensor, denom: float) -> torch.Tensor:
        """Engine 11's training step on ``x [E, B, n]``, ``y [E, B]``: the ``[E]``
        cross-entropy sums divided by ``denom``, whose backward gives every parameter's
        gradient, computed tile by tile in one native pass (:mod:`rulelab.models.tile_step`).
        With hooks, or under vmap / grad, the loss through :meth:`forward` (engine 4's ops)."""
        hooked = any(hp.has_hooks for hp in self.hook_dict.values())
        if hooked or torch._C._functorch.maybe_current_level() is not None:
            return tile_step.reference_loss(self, x, y, denom)
        if self.engine == GPU_TILE_ENGINE:
            return gpu_tile_step.step_loss(self, x, y, denom)
        return tile_step.step_loss(self, x, y, denom)

    def step_tile(self) -> int:
        """Examples per tile of engine 11's, 12's or 13's step for this shape (recorded in
        checkpoints)."""
        if self.engine == GPU_TILE_ENGINE:
            return gpu_tile_step.BT
        return tile_step.tile_examples(self.cfg)

    def step_unsupported(self, settings) -> str | None:
        """Why engines 11–13 cannot train this model under ``settings`` (its shape, the
        precision — fp32, or bf16 where its kernel multiplies bf16; engine 13: fp32 or tf32 —,
        the kernel), or None."""
        if self.engine == GPU_TILE_ENGINE:
            if settings.precision not in ("fp32", "tf32"):
                return f"--precision {settings.precision}: engine 13 computes fp32 and tf32 only"
            return gpu_tile_step.unsupported(self.cfg)
        if settings.precision not in ("fp32", "bf16"):
            return f"--precision {settings.precision}: it computes fp32 and bf16 only"
        if settings.precision == "bf16" and not tile_step.computes_bf16():
            return "--precision bf16: its kernel was not built for AVX-512-BF16 here"
        return tile_step.unsupported(self.cfg)

    def forward_fast(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` without hooks (engine 7): the residual stream ``[E, T, B, d]``,
        positions outermost, the batch padded to a multiple of ``PAD`` with copies of its
        first example (their logits are dropped, so their gradient is exactly 0), and only
        the CLS row past the last block's keys and values."""
        B = x.shape[1]
        resid = embed_padded(self, x)  # [E, T, B', d]
        for i, block in enumerate(self.blocks):
            resid = block.forward_fast(resid, cls_only=i == len(self.blocks) - 1)
        cls = resid[:, 0]  # [E, B', d]
        if self.ln_final is not None:
            cls = self.ln_final.forward_fast(cls)
        logits = torch.baddbmm(self.b_U.unsqueeze(1), cls, self.W_U)  # [E, B', k]
        return logits[:, :B] if logits.shape[1] != B else logits


def eager_engine(cfg) -> int:
    """The engine version the eager engine trains a transformer config with
    (``Task.eager_engine``, study S): :data:`TILE_ENGINE` where its step can train the shape
    (:func:`~rulelab.models.tile_step.unsupported`), else :data:`SIZED_PASS_ENGINE`, saying
    once why."""
    why = tile_step.unsupported(TransformerShape.of(cfg))
    if why is None:
        return TILE_ENGINE
    tile_step.notice_fallback(why, SIZED_PASS_ENGINE)
    return SIZED_PASS_ENGINE
