"""The sparse-parity networks with a leading member axis: a dense two-layer ReLU MLP, and study
S's transformer reading the bits as tokens. Both map ``x [E, B, n]`` (±1) to one real output
``f [E, B]`` whose sign is the prediction (the paper's hinge/logistic setting).

MLP (Barak et al. 2022: a 2-layer ReLU MLP, width 1000 there):
``f(x) = w₂ · ReLU(W₁ x + b₁) + b₂`` with ``W₁ [E, M, n]`` (row j = neuron j's input weights,
so the weight mass on the support is ``W₁[:, :, S]``), ``b₁ [E, M]``, ``w₂ [E, M]``,
``b₂ [E]``. Member ``e`` initializes like ``torch.nn.Linear`` — every weight and bias uniform in
``±init_scale/√fan_in`` — from its own generator seeded with its ``seed``. Hook points:
``hook_pre``, ``hook_post`` (``[E, B, M]``) and ``hook_out`` (``[E, B]``).

Its eager numerics are engine version 6 (:data:`EnsembleParityMLP.eager_engine`,
:mod:`rulelab.store.version`; issue 25), so that a member equals its solo run bitwise on the CPU.
Engines 1 and 4 compute the readout as ``torch.bmm(h, w₂)``, a matrix–vector product that MKL
rounds otherwise for one member than for several (outputs off by ~1e-7, Adam weights by ulps);
engine 6 sums ``h ⊙ w₂`` over M elementwise. (Engine 1 also let MKL split a lone member's ``W₁``
product across threads while an ensemble ran each member's on one; engine 4's one thread a
step ended that.) The compiled engine still traces the ``bmm`` forward, so its numbers do not
move.

Transformer: :class:`rulelab.models.transformer.EnsembleTransformer` with vocabulary {0, 1}
(bit −1 → token 0, +1 → token 1), ``n`` positions after CLS and two classes read at CLS; the
output is the logit difference ``f = z₁ − z₀`` (so the logistic loss on f equals two-class
cross-entropy). Its weights are scaled by ``init_scale`` after study S's init.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from rulelab.models.hooks import HookedEnsemble, HookPoint
from rulelab.models.passes import pass_examples as transformer_pass_examples
from rulelab.models.transformer import COMPILED_ENGINES, EnsembleTransformer, TransformerShape


class EnsembleParityMLP(HookedEnsemble):
    """``E`` two-layer ReLU networks on ±1 inputs: ``x [E, B, n]`` → ``f [E, B]``.

    ``eager_engine`` is the engine version of its eager numerics (what :func:`eager_engine`
    declares for the study's task); ``engine`` is the version in use, set by the trainer
    (:func:`rulelab.engine.compiled.engine_in_use`): under any other (the compiled engine, or
    loading a run engine 1 trained) the readout is ``bmm``'s."""

    eager_engine = 6  # store.version: engine 4 with an E-invariant (elementwise) readout
    engine = eager_engine

    def __init__(self, n_members: int, n_bits: int, width: int, bias: bool = True) -> None:
        super().__init__()
        E, M, n = n_members, width, n_bits
        self.n_bits, self.width = n, M
        self.W1 = nn.Parameter(torch.empty(E, M, n))
        self.b1 = nn.Parameter(torch.zeros(E, M)) if bias else None
        self.w2 = nn.Parameter(torch.empty(E, M))
        self.b2 = nn.Parameter(torch.zeros(E)) if bias else None
        self.hook_pre = HookPoint()  # [E, B, M]
        self.hook_post = HookPoint()  # [E, B, M]
        self.hook_out = HookPoint()  # [E, B]
        self.setup_hooks()

    def init_weights(self, seeds: Sequence[int], scales: Sequence[float] | None = None
                     ) -> EnsembleParityMLP:
        """``torch.nn.Linear``'s init (uniform ``±1/√fan_in``) × ``scales[e]``, member ``e`` from
        its own generator seeded with ``seeds[e]``; drawn in the order W₁, b₁, w₂, b₂."""
        scales = [1.0] * len(seeds) if scales is None else list(scales)
        layers = [(self.W1, self.n_bits), (self.b1, self.n_bits), (self.w2, self.width),
                  (self.b2, self.width)]
        with torch.no_grad():
            for e, (seed, scale) in enumerate(zip(seeds, scales, strict=True)):
                gen = torch.Generator().manual_seed(int(seed))
                for p, fan_in in layers:
                    if p is None:
                        continue
                    bound = scale / math.sqrt(fan_in)
                    p[e].copy_((torch.rand(p.shape[1:], generator=gen) * 2 - 1) * bound)
        return self

    def first_layer(self) -> torch.Tensor:
        """``W₁ [E, M, n]``: the weights whose mass on S measures hidden progress."""
        return self.W1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        legacy = self.engine != self.eager_engine  # the compiled engine traces the bmm readout
        pre = torch.bmm(x, self.W1.transpose(1, 2))  # [E, B, M]
        if self.b1 is not None:
            pre = pre + self.b1.unsqueeze(1)
        h = self.hook_post(F.relu(self.hook_pre(pre)))
        if legacy:
            out = torch.bmm(h, self.w2.unsqueeze(-1)).squeeze(-1)  # [E, B]
        else:  # a sum over M per (member, example), whatever E: its w₂ gradient sums over B
            out = (h * self.w2.unsqueeze(1)).sum(-1)  # [E, B]
        if self.b2 is not None:
            out = out + self.b2.unsqueeze(1)
        return self.hook_out(out)


def eager_engine(cfg) -> int:
    """The engine version the eager engine trains ``cfg`` with (``Task.eager_engine``): the
    MLP's own; the transformer is study S's network, with its eager engine (10)."""
    model = EnsembleParityMLP if cfg.model == "mlp" else EnsembleTransformer
    return model.eager_engine


def pass_examples(cfg, engine: int) -> int | None:
    """Examples per pass the engine sizes for ``cfg`` (``Task.pass_examples``): the
    transformer's (:func:`rulelab.models.passes.pass_examples`); none for the MLP."""
    if cfg.model == "mlp":
        return None
    return transformer_pass_examples(transformer_shape(cfg), engine)


def transformer_shape(cfg) -> TransformerShape:
    """The transformer's shape for a sparse-parity config (bits as a 2-token vocabulary)."""
    return TransformerShape(layers=cfg.layers, heads=cfg.heads, d_model=cfg.d_model,
                            d_mlp=cfg.d_mlp, act="relu", ln=True, vocab=2, seq_len=cfg.n_bits,
                            label_mod=2)


class ParityTransformer(HookedEnsemble):
    """Study S's ensemble transformer on bit tokens, returning ``f = z₁ − z₀ [E, B]``; its hook
    points keep study S's names under ``net.`` (``net.blocks.0.attn.hook_pattern``)."""

    def __init__(self, cfg, n_members: int) -> None:
        super().__init__()
        self.net = EnsembleTransformer(transformer_shape(cfg), n_members)
        self._engine = self.net.engine
        self.setup_hooks()

    def init_weights(self, seeds: Sequence[int], scales: Sequence[float] | None = None
                     ) -> ParityTransformer:
        self.net.init_weights(list(seeds))
        if scales is not None:
            with torch.no_grad():
                for name, p in self.net.named_parameters():
                    if name.split(".")[-1].startswith("W_"):
                        scale = torch.tensor(list(scales), dtype=p.dtype, device=p.device)
                        p.mul_(scale.view(-1, *[1] * (p.dim() - 1)))
        return self

    def first_layer(self) -> None:
        """No coordinate-wise first layer (bits enter through shared token embeddings)."""
        return None

    @property
    def engine(self) -> int:
        """The engine version the transformer computes (the trainer sets it)."""
        return self._engine

    @engine.setter
    def engine(self, version: int) -> None:
        # Under the compiled engine this model has always traced engine 1's forward (before
        # engine 7 nothing set its network's engine): kept, so version 5 keeps its numbers.
        self._engine = version
        self.net.engine = 1 if version in COMPILED_ENGINES else version

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.net((x > 0).long())  # [E, B, 2]
        return logits[..., 1] - logits[..., 0]


def build_model(configs, data=None) -> nn.Module:
    """The ensemble model of shape-compatible configs, each member from its own seed (the
    trainer's and the post-hoc loader's, issue 22; ``data`` is not read)."""
    c = configs[0]
    seeds, scales = [m.seed for m in configs], [m.init_scale for m in configs]
    if c.model == "mlp":
        model = EnsembleParityMLP(len(configs), c.n_bits, c.width, bias=c.bias)
    else:
        model = ParityTransformer(c, len(configs))
    return model.init_weights(seeds, scales)


def tl_export(model):
    """``rulelab export tl``: a transformer run's network (bit −1 → token 0, +1 → token 1;
    its two logits ``z₀, z₁`` at CLS, ``f = z₁ − z₀``) and 256 of its evaluation inputs as
    tokens; None for an MLP run."""
    if not isinstance(model.ensemble, ParityTransformer):
        return None
    return model.ensemble.net, (model.data.eval_x[:256] > 0).long()
