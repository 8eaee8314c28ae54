"""The code version and the engine version recorded with every run (DESIGN §3, issue 25).

``code_version()`` is ``"<rulelab version>+g<short sha>"``, with ``-dirty`` appended when tracked
files of the source checkout have uncommitted changes (the ``git describe --dirty`` rule:
untracked files do not count), or ``"<version>+unknown"`` when the package does not run from a
git checkout or git is unavailable.

An engine version numbers the training numerics: same config + seed + engine version → the
same numbers, bitwise on the same kind of CPU (its vendor and vector width, which MKL and
PyTorch pick kernels by: :func:`rulelab.hardware.cpu_kernels`, recorded per stretch of epochs
in each checkpoint). :data:`ENGINE_VERSION` is the default (eager) engine's; it is
bumped by every change that moves a number (a fused kernel, another summation order), never
otherwise. A change that moves the numbers of one model only is a new version for that model
alone: its task declares the eager engine version of its configs (``Task.eager_engine``;
:func:`rulelab.engine.compiled.eager_engine`), and every other model keeps its numbers and
its version. ``Settings.engine`` picks the engine a run trains with (:data:`ENGINES`); the
version it trained under is recorded on the run and in its checkpoint. A checkpoint written
before engine versions existed carries none and reads as version 1.

- 1: the first engine (issues 1–24), on as many threads as torch's default (the cores).
- 2: attention without tiny matmuls (issue 25): never switched on, so no run records it;
  its design became engine 7.
- 3: ``engine = "compiled"`` (opt-in): each micro-batch's forward and backward compiled whole
  by ``torch.compile`` (inductor), tracing :mod:`rulelab.models.fused_forward`
  (:mod:`rulelab.engine.compiled`); evaluation and analyses stay eager.
- 4: engine 1's computation on one CPU thread (:mod:`rulelab.engine.threads`): before, a
  trainer used every core, and PyTorch sums a long reduction in an order that depends on the
  thread count, so engine 1's numbers depended on the machine (unrecorded). The default
  eager engine (:data:`ENGINE_VERSION`) of every model that declares none of its own.
- 5: engine 3's (compiled) on one CPU thread: its weight matmuls were multi-threaded library
  calls. On CUDA, 4 and 5 compute what 1 and 3 did.
- 6: engine 4 with sparse parity's MLP readout as an elementwise product summed over M, a lone
  member's first-layer product computed beside a copy of itself and the logistic loss on
  member-aligned rows: member ≡ solo bitwise (engine 4's ``bmm`` readout rounded otherwise for
  one member than for several). The eager engine of that model only
  (``rulelab.studies.sparse_parity.model``).
- 7: the transformer's eager engine on the CPU (``rulelab.models.transformer``, issue 25):
  engine 4 on one thread with the residual stream positions-outermost and the batch padded to
  a multiple of 16, the attention over a few positions as three sums of products vectorized
  over the batch (:mod:`rulelab.models.attention_sums`: native loops where a C++ compiler is
  found, else the same chains as PyTorch ops — the same numbers), the last block's query
  projected only at CLS, and LayerNorm run per member. Engine 4 stays computable for the
  transformer (``--engine 4``: :data:`KEPT_ENGINES`); on a GPU its eager engine is 4
  (:data:`CPU_ONLY_ENGINES`: the sums are CPU loops).
- 8: the transformer's eager engine on the CPU (issue 25, :mod:`rulelab.models.lane_forward`):
  engine 7's attention and padding with the residual stream ``[E, d, T, B]`` (the batch
  innermost everywhere, where 7 kept ``[E, T, B, d]``): every weight matmul is ``Wᵀ x`` with
  its bias added after the product (``bmm`` then ``add_``; 7 ran ``baddbmm``), and each
  LayerNorm is chains over ``d`` with the rows as vector lanes, forward and backward in one
  pass each (:mod:`rulelab.models.layer_norm_lanes`: native loops, else the same ops in
  PyTorch — the same numbers). Engines 7 and 4 stay computable for the transformer
  (``--engine 7``, ``--engine 4``); on a GPU its eager engine is 4.
- 9: the transformer's eager engine on the CPU (issue 25): engine 8 with each softmax's sums
  over the keys (its normalizer, and the backward's ``Σ p·dp``) added as chains in key order
  (:func:`rulelab.models.attention_core.key_sum`), and the attention core — scores, softmax,
  values, and its backward — one native pass per block of 16 examples where it can run
  (``attention_kernels.cpp``: ``rl_attend``; the same numbers as its op-by-op path, checked
  once per process). Engines 7 and 8 added those keys with PyTorch's ``sum(0)``, whose order
  depends on where an element lies in the tensor (in order inside whole blocks of 32 of the
  flattened members × heads × queries × examples, otherwise not; past 16 positions in no
  element): the same numbers as engine 9 where that count is a multiple of 32 and there are at
  most 16 positions — every preset's runs (2 heads; the paper's 1-head cells train and evaluate
  in batches of 512 and 2,048) — others elsewhere, and at one head (or 3, …) with a batch of an
  odd number of 16-example blocks (a last micro-batch of 8 examples, say) a member could differ
  from its solo run. Engines 8, 7 and 4 stay computable (``--engine 8``, …); on a GPU its
  eager engine is 4.
- 10: the transformer's eager engine on the CPU (issue 25): engine 9's forward and backward,
  with each step cut into passes sized to the model where ``--micro-batch`` is not given
  (:func:`rulelab.models.passes.pass_examples`: the largest power of two ≤ 512 whose
  activations stay within 24 MiB per member — 256 examples for study S's 2-layer models at
  d_model 48–64, 512 at 24–32 and wherever a model is small enough) instead of engine 9's 512.
  A step's gradient is summed pass by pass, so the numbers differ from engine 9's wherever a
  step holds more examples than a pass; with ``--micro-batch 512`` they are engine 9's. The
  pass depends on the shape alone, never on the ensemble: a member equals its solo run.
  Engines 9, 8, 7 and 4 stay computable (``--engine 9`` trains in engine 9's passes of 512);
  on a GPU its eager engine is 4.
- 11: the transformer's eager engine on the CPU (issue 25; :mod:`rulelab.models.tile_step`):
  its training step depth first. One native call per member runs the forward, the
  cross-entropy and the backward of a tile of 48 examples to the end before the next tile, so
  what each op reads is still in L2 (engines 7–10 ran each op over a whole pass, reading
  operands from memory). Every sum in one fixed order (by feature within a tile, tile by tile
  across it, each product added by one fused multiply-add where the CPU has one; the tile fixed
  by the shape, the last one the rest of the pass): the model's numbers to float rounding
  (gradients within 1e-6 of float64 autograd, closer than PyTorch's float32), not engine 10's
  bits; a member equals its solo run. Steps are cut into passes of 4,096
  (:func:`rulelab.models.passes.pass_examples`); evaluation runs engine 10's forward. It
  computes a ReLU MLP (or none) and the cross-entropy, in fp32, and in bf16 where the CPU has
  AVX-512-BF16 (:data:`BF16_ENGINES`; since 2026-12-04 — before, and still where the CPU lacks
  it, ``--precision bf16`` trained with engine 10: :data:`FP32_ONLY_ENGINES`, so a bf16 lab
  begun then is refused on resume under the default, naming ``--engine 10``). In bf16 every
  weight matmul's operands are rounded to bf16 and their products summed in fp32 (VDPBF16PS,
  the features in order); the attention's core, LayerNorm, the loss, the biases and Adam stay
  fp32; a member equals its solo run. A GELU model, or a machine where its kernel cannot build
  or has no vector FMA, trains with engine 10 (one notice); its AVX2 and AVX-512 builds give
  the same fp32 bits (every sum over rows in 16 lanes); a task with a loss of its own is
  refused (:data:`STEP_ENGINES`).
  Engines 10, 9, 8, 7 and 4 stay computable (``--engine 10`` gives engine 10's numbers); on a
  GPU its eager engine is 4.
- 12: the transformer's eager engine on the CPU (issue 25, 2026-12-04): engine 11's training
  step, with every evaluation (and any forward without a gradient to take and no hooks: a
  stored run's predictions) through the same kernel's forward (``rl_step`` with ``out``:
  :func:`rulelab.models.tile_step.tile_logits`), where engine 11 evaluates with engine 10's
  op-by-op forward. The trained weights are engine 11's bits; the metric rows differ at float
  rounding (the logits evaluated are the bits the step's forward computes), and an evaluation
  costs 2.0 training epochs instead of 5.1 (4 members at the ladder's 2k rung). Engine 11 stays
  computable (``--engine 11``), and a lab begun under 11 resumes under ``--engine 11`` only.
  Everything else as engine 11 (bf16 where the CPU has AVX-512-BF16; engine 10 with one
  notice where its kernel cannot run).
- 13: the transformer's step on a CUDA GPU, opt-in (``--engine 13``; issue 25 goal 5,
  2026-12-06): engine 12's design as one Triton kernel (:mod:`rulelab.models.gpu_tile_step`).
  A program runs one member's examples tile by tile (16 examples, positions padded to 16),
  the forward, the cross-entropy and the backward of each tile to the end, its activations in
  the program's own scratch; it sums its tiles' weight gradients in tile order, and the
  programs (one per 512 examples of a pass) are added in one order: a member equals its solo
  run, and a run repeated gives the same numbers. The products in fp32 (``tl.dot``'s
  ``ieee``), or TF32 under ``--precision tf32``; bf16 is refused. Steps in one pass of up to
  16,384 examples (:func:`rulelab.models.passes.pass_examples`); evaluation runs engine 4's
  forward. d_model, d_head and d_mlp must be powers of two ≥ 16 (refused otherwise, naming
  the field). Tested on the CPU by Triton's interpreter; on the CPU it is not offered.
"""

from __future__ import annotations

import functools
import os
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ENGINE_VERSION = 4  # the eager engine's numerics; bump when a change alters numbers (issue 25)
COMPILED_ENGINE = 5  # Settings.engine = "compiled": the step fused by torch.compile
ENGINES = {"eager": ENGINE_VERSION, "compiled": COMPILED_ENGINE}  # Settings.engine → version
LEGACY_ENGINE = 1  # what a run or checkpoint without a recorded engine version was trained by
# A model's eager engine → older engines it still computes on request (``--engine 4``), so a
# lab trained under one keeps its numbers when the default moves on.
KEPT_ENGINES = {12: (11, 10, 9, 8, 7, 4), 11: (10, 9, 8, 7, 4), 10: (9, 8, 7, 4)}
# An eager engine that computes in fp32 only → the engine its runs train with under another
# ``--precision`` (bf16: the lane engine's matmuls take bf16 operands), except a precision it
# computes where the CPU has the extension BF16_ENGINES names (:func:`computes_precision`).
FP32_ONLY_ENGINES = {11: 10, 12: 10}
# An eager engine that computes bf16 where the CPU has this extension (/proc/cpuinfo's flag):
# engine 11's kernel multiplies bf16 with AVX-512-BF16, which every CPU where bf16 is native
# has (rulelab.hardware.cpu_bf16_kind: AMX or AVX-512-BF16).
BF16_ENGINES = {11: "avx512_bf16", 12: "avx512_bf16"}
# Engines whose model computes its whole step (forward, loss, backward) itself: a trainer
# refuses them for a model that does not (``step_engines``) or a task with a loss of its own.
STEP_ENGINES = (11, 12, 13)
# An eager engine for the CPU only → the engine the model trains with on another device.
CPU_ONLY_ENGINES = {7: 4, 8: 4, 9: 4, 10: 4, 11: 4, 12: 4}
# A model's eager engine → engines it computes on an accelerator only, on request (its step
# as a Triton kernel: engine 13).
GPU_ENGINES = {12: (13,)}
_GIT_TIMEOUT_S = 5.0

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def computes_precision(engine: int, precision: str, cpu_flags: frozenset[str]) -> bool:
    """Whether eager engine ``engine`` computes ``precision`` itself on a CPU with these
    flags (else it trains with :data:`FP32_ONLY_ENGINES`' engine)."""
    if precision == "fp32" or engine not in FP32_ONLY_ENGINES:
        return True
    return precision == "bf16" and BF16_ENGINES.get(engine) in cpu_flags


def engine_of(state: dict | None) -> int:
    """The engine version that wrote a checkpoint state (:data:`LEGACY_ENGINE` when none)."""
    if not state:
        return LEGACY_ENGINE
    return int(state.get("engine_version", LEGACY_ENGINE))


def engine_refusal(run_id: str, recorded: int, epoch: int, current: int = ENGINE_VERSION,
                   engines: dict[str, int] = ENGINES) -> str:
    """The one line refusing to resume ``run_id`` under engine version ``current``;
    ``engines`` maps ``Settings.engine`` to the version it trains this run's config with
    (:func:`rulelab.engine.compiled.engines_for`)."""
    return (f"run {run_id} was trained to epoch {epoch} by engine version {recorded}; this is "
            f"engine version {current}, whose numbers differ: resuming it would mix "
            f"both; {_same_engine(recorded, engines)}pass --allow-engine-change to resume it "
            "anyway (the switch is recorded on the run), or train it afresh in another lab")


def recorded_pass(state: dict) -> int | None:
    """The examples per member a checkpoint's steps were summed in, ``min(micro_batch, examples
    per step)``, or None where it records neither (written before issue 25's engine 4)."""
    recorded, step = state.get("micro_batch"), state.get("step_examples")
    return None if recorded is None or step is None else min(int(recorded), int(step))


def micro_batch_refusal(run_id: str, state: dict, micro_batch: int) -> str | None:
    """The one line refusing to resume ``run_id`` from checkpoint ``state`` in micro-batches of
    ``micro_batch`` examples per member, or None where its steps would be cut as before.

    A step's gradient is summed micro-batch by micro-batch (:mod:`rulelab.engine.base`), so
    another micro-batch size sums it in another order: other numbers, as another engine would
    give. What counts is the pass a step is cut into (:func:`recorded_pass`); a checkpoint that
    records none is not judged."""
    before, epoch = recorded_pass(state), int(state.get("epoch", 0))
    if before is None or epoch == 0:
        return None
    now = min(int(micro_batch), int(state["step_examples"]))
    if before == now:
        return None
    return (f"run {run_id} was trained to epoch {epoch} in micro-batches of {before} examples "
            f"per member; --micro-batch {micro_batch} would cut its steps in passes of {now} "
            f"and sum their gradients in another order (other numbers): resume it with "
            f"--micro-batch {state['micro_batch']}, or train it afresh in another lab")


def precision_refusal(run_id: str, state: dict, precision: str) -> str | None:
    """The one line refusing to resume ``run_id`` from checkpoint ``state`` in ``precision``
    (``--precision``), or None where it keeps the precision its steps were computed in. bf16
    rounds every step's matmul operands, so switching mid-run mixes two runs' numbers, as
    another engine would; a checkpoint that records none (written before the record) is not
    judged."""
    recorded, epoch = state.get("precision"), int(state.get("epoch", 0))
    if recorded is None or epoch == 0 or recorded == precision:
        return None
    return (f"run {run_id} was trained to epoch {epoch} in {recorded}; --precision {precision} "
            f"would compute its steps otherwise (other numbers): resume it with --precision "
            f"{recorded}, or train it afresh in another lab")


def _same_engine(version_: int, engines: dict[str, int]) -> str:
    """How to pick engine ``version_`` again, where ``Settings.engine`` still offers it for
    this run (an engine a model's own version replaced is offered by no name)."""
    names = [name for name, v in engines.items() if v == version_]
    return f"resume it with --engine {names[0]}, or " if names else ""


def package_version() -> str:
    try:
        return version("rulelab")
    except PackageNotFoundError:
        return "0.0.0"


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Version of the running code, computed once per process."""
    return describe(_PACKAGE_DIR, package_version())


def describe(src_dir: Path, base: str) -> str:
    """``base`` plus the git state of the checkout holding ``src_dir`` (uncached)."""
    sha = _git(src_dir, "rev-parse", "--short", "HEAD")
    # A non-editable install inside a checkout (e.g. a venv under the repo) is ignored by git:
    # its HEAD says nothing about the installed code.
    if sha is None or _git(src_dir, "check-ignore", "-q", str(src_dir)) is not None:
        return f"{base}+unknown"
    status = _git(src_dir, "status", "--porcelain", "--untracked-files=no")
    if status is None:
        return f"{base}+unknown"
    return f"{base}+g{sha}" + ("-dirty" if status else "")


def _git(cwd: Path, *args: str) -> str | None:
    """stdout of ``git -C cwd args`` stripped, or None on any failure (incl. non-zero exit)."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    try:
        proc = subprocess.run(
            ["git", "-C", str(cwd), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            env=env,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None
