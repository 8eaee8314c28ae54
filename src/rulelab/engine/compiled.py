"""The compiled engine (engine 3, issue 25): one micro-batch's forward and backward, compiled
whole by ``torch.compile``.

``Settings.engine = "compiled"`` compiles the trainer's ``loss``, and with it the model's forward
and the loss around it. AOTAutograd derives the backward graph, and inductor compiles both
graphs to C++ (Triton on CUDA). What eager PyTorch runs op by op around the weight matmuls
(LayerNorm, attention over a few positions, softmax, GELU, residual adds, the loss) becomes a
few fused loops. The transformer traces
:func:`~rulelab.models.fused_forward.fused_forward` here.

- **Static shapes** (``dynamic=False``): a chunk compiles once per micro-batch shape, usually
  the full micro-batch plus a shorter last one. Inductor's on-disk cache makes later compiles
  of the same graph in any process much faster.
- **Bitwise within the engine**: the C++ kernels are compiled single-threaded
  (``cpp.threads = 1``). Inductor otherwise splits a reduction across threads when its outer
  loops are short, and how short depends on the ensemble's size. The weight matmuls stay
  multi-threaded library calls, as in engine 1.
- **A lone run** (an ensemble of one) is computed beside a detached copy of itself
  (:func:`paired`): inductor specializes an axis of size 1, so an ensemble of one would
  compile to other kernels than any larger ensemble — other fusions, and so another summation
  order (seen in a LayerNorm bias gradient). Paired, it runs exactly the kernels of an
  ensemble of two, at twice the cost.
- **Fallback**: where no compiler is found, the engine in use is the eager one (version 1,
  or the one a model declares: :func:`eager_engine`), with a one-line notice. It is decided
  before any run is marked running, so the engine recorded on a run is always the one that
  trained it.
"""

from __future__ import annotations

import functools
import shutil
import warnings

import torch

from rulelab.errors import UserError
from rulelab.hardware import cpu_info
from rulelab.settings import DEFAULT_MICRO_BATCH
from rulelab.store.version import (
    COMPILED_ENGINE,
    CPU_ONLY_ENGINES,
    ENGINE_VERSION,
    ENGINES,
    FP32_ONLY_ENGINES,
    GPU_ENGINES,
    KEPT_ENGINES,
    computes_precision,
)
from rulelab.study_registry import tasks

# Inductor options of every compiled step: single-threaded C++ kernels (member ≡ solo, above).
INDUCTOR_OPTIONS = {"cpp.threads": 1}
RECOMPILE_LIMIT = 256  # compiled shapes per process (one worker trains many chunks)


@functools.cache
def compile_unavailable(device_type: str) -> str | None:
    """Why ``torch.compile`` cannot build kernels for ``device_type`` here, or None if it can."""
    if not torch._dynamo.is_dynamo_supported():
        return "torch.compile does not support this Python"
    if device_type == "cpu":
        from torch._inductor.cpp_builder import get_cpp_compiler

        try:
            compiler = get_cpp_compiler()
        except Exception as err:  # noqa: BLE001 — any failure to find one means "none"
            return f"no C++ compiler found ({type(err).__name__})"
        return None if shutil.which(compiler) else f"no C++ compiler found ({compiler})"
    if device_type == "cuda":
        from torch.utils._triton import has_triton

        return None if has_triton() else "Triton is not installed"
    return f"inductor does not compile for {device_type}"


def eager_engine(config=None) -> int:
    """The engine version the eager engine trains ``config`` with: the one its task declares
    for it (``Task.eager_engine``: a model whose eager numerics moved on alone), else — and
    for no config, or a trainer of a task not in the registry — :data:`ENGINE_VERSION`."""
    spec = None if config is None else tasks().get(getattr(config, "task", None))
    declared = None if spec is None else spec.eager_engine_of(config)
    return ENGINE_VERSION if declared is None else declared


def engines_for(config=None, device: str | torch.device = "cpu") -> dict[str, int]:
    """``{Settings.engine: engine version}`` for ``config`` on ``device``: ``eager`` (its eager
    engine, :func:`eager_engine`; on a GPU the one a CPU-only engine gives way to), ``compiled``,
    and each version it can train with by number (the older ones its eager engine keeps:
    :data:`~rulelab.store.version.KEPT_ENGINES`; on a GPU also those it offers there only:
    :data:`~rulelab.store.version.GPU_ENGINES`)."""
    declared = eager_engine(config)
    eager, kept = declared, KEPT_ENGINES.get(declared, ())
    if torch.device(device).type != "cpu":
        eager = CPU_ONLY_ENGINES.get(declared, declared)
        kept = (*GPU_ENGINES.get(declared, ()),
                *(v for v in kept if v not in CPU_ONLY_ENGINES))
    numbered = [eager, COMPILED_ENGINE, *kept]
    return {**ENGINES, "eager": eager, **{str(v): v for v in numbered}}


def engine_in_use(settings, config=None) -> int:
    """The engine version ``settings`` train ``config`` with: ``engines_for(config, device)
    [settings.engine]`` (a :class:`~rulelab.errors.UserError` naming the allowed ones where
    it offers no such engine). The compiled engine falls back to the eager one where
    :func:`compile_unavailable`; the eager engine, where it computes in fp32 only, to the one
    it names for another ``--precision`` (:data:`~rulelab.store.version.FP32_ONLY_ENGINES`;
    engine 11 computes bf16 itself where the CPU has AVX-512-BF16:
    :func:`~rulelab.store.version.computes_precision`)."""
    offered = engines_for(config, settings.device)
    if settings.engine not in offered:
        task = getattr(config, "task", "these")
        raise UserError(f"--engine: {settings.engine} is not allowed for {task} runs on "
                        f"{settings.device}; allowed: {', '.join(offered)}")
    eager = offered["eager"]
    on_cpu = torch.device(settings.device).type == "cpu"
    if not computes_precision(eager, settings.precision, cpu_info().flags if on_cpu else
                              frozenset()):
        eager = FP32_ONLY_ENGINES.get(eager, eager)
    version = eager if settings.engine == "eager" else offered[settings.engine]
    if version != COMPILED_ENGINE:
        return version
    why = compile_unavailable(torch.device(settings.device).type)
    if why is None:
        return version
    _notice(f"engine compiled unavailable ({why}): training with the eager engine "
            f"(engine version {eager})")
    return eager


def micro_batch_for(settings, config=None) -> int:
    """Examples per member per pass that ``settings`` train ``config`` in: ``--micro-batch``
    where given, else the pass its engine version (:func:`engine_in_use`) sizes for it
    (``Task.pass_examples``: engines 10 and 11 for the transformer), else
    :data:`~rulelab.settings.DEFAULT_MICRO_BATCH`. Part of a run's numbers: recorded in its
    checkpoint (``store.version.micro_batch_refusal``)."""
    if settings.micro_batch is not None:
        return int(settings.micro_batch)
    spec = None if config is None else tasks().get(getattr(config, "task", None))
    sized = None if spec is None else spec.pass_examples_of(config, engine_in_use(settings,
                                                                                  config))
    return DEFAULT_MICRO_BATCH if sized is None else int(sized)


@functools.cache
def _notice(line: str) -> None:
    warnings.warn(line, RuntimeWarning, stacklevel=3)  # once per process and reason


class _Step(torch.nn.Module):
    """``loss(x, y, denom)`` as a module whose parameters are the model's (``model.*``), so
    :func:`torch.func.functional_call` can run it on other tensors."""

    def __init__(self, model: torch.nn.Module, loss) -> None:
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self, x: torch.Tensor, y: torch.Tensor, denom: float) -> torch.Tensor:
        return self.loss(x, y, denom)


def paired(model: torch.nn.Module, loss):
    """``loss`` of a lone member computed as member 0 of two: every parameter ``[1, …]`` beside
    a detached copy (``[2, …]``), the batch doubled, only member 0's loss kept (its gradient
    reaches only the real parameters)."""
    step = _Step(model, loss)

    def loss_of_one(x: torch.Tensor, y: torch.Tensor, denom: float) -> torch.Tensor:
        params = {f"model.{n}": torch.cat([p, p.detach()])
                  for n, p in model.named_parameters()}
        both = torch.func.functional_call(step, params, (torch.cat([x, x]), torch.cat([y, y]),
                                                         denom))
        return both[:1]
    return loss_of_one


def compile_step(model: torch.nn.Module, loss, n_members: int):
    """``loss(x, y, denom) → [E]`` compiled whole, forward and backward, for static shapes
    (:func:`paired` for one member)."""
    cfg = torch._dynamo.config
    cfg.recompile_limit = max(cfg.recompile_limit, RECOMPILE_LIMIT)
    # Past the limit dynamo would run the step eagerly, silently changing its numbers: raise.
    cfg.fail_on_recompile_limit_hit = True
    step = paired(model, loss) if n_members == 1 else loss
    return torch.compile(step, dynamic=False, fullgraph=True, options=dict(INDUCTOR_OPTIONS))
