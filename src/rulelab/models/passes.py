"""How many examples a training pass of the transformer holds (engine 10, issue 25): torch-free,
so the planner's memory estimate (a study's cost) can use the same activation count.

A step's gradient is summed pass by pass (``Settings.micro_batch``). Engine 10 sizes the pass to
the model: the largest power of two ≤ :data:`PASS_MAX` whose activations stay within
:data:`PASS_BYTES` per member (bench/pass_size.py; docs/performance.md, "Engine 10").
"""

from __future__ import annotations

# engine 9's forward and backward, each step cut into passes sized to the model (issue 25)
SIZED_PASS_ENGINE = 10
# the step depth first, tile by tile (rulelab.models.tile_step): it keeps no activations
# between the forward and the backward, so a pass costs only its inputs and one gradient of
# every weight; long passes spare the reloading of a member's weights and gradients into cache
# at every call (4,096 against 512: 1.06–1.09× per member, 2k and paper widths). Engine 11
# evaluates with engine 10's forward, engine 12 (the default) with the kernel's own.
TILE_STEP_ENGINES = (11, 12)
TILE_ENGINE = 12
TILE_PASS = 4096
# the step as one Triton kernel on CUDA (rulelab.models.gpu_tile_step): a pass of up to the
# paper's whole batch fills the GPU with programs (one per 512 examples of each member)
GPU_TILE_ENGINE = 13
GPU_TILE_PASS = 16384
PASS_BYTES = 24 << 20  # a pass's activations per member, at most (pass_examples)
PASS_MAX = 512  # examples per pass, at most: the default micro-batch of the engines before


def activation_bytes(shape) -> int:
    """Bytes of the activations one example's forward keeps for its backward, per member: the
    residual stream, LayerNorm outputs, Q/K/V, attention patterns and MLP hidden units of
    every block, ``4 · layers · T · (10·d_model + 2·d_mlp + 2·heads·T)`` (T = seq_len + 1), of
    any object with the transformer's shape fields (a ``TransformerShape``, study S's config);
    also the training-activation term of study S's memory estimate."""
    T = shape.seq_len + 1
    return 4 * shape.layers * T * (10 * shape.d_model + 2 * shape.d_mlp + 2 * shape.heads * T)


def pass_examples(shape, engine: int) -> int | None:
    """Examples per member per pass under engine version ``engine`` (``Task.pass_examples``):
    for engine 10, the largest power of two ≤ :data:`PASS_MAX` whose activations stay within
    :data:`PASS_BYTES` per member (at least 16: one block of the attention core); for engines 11
    and 12, :data:`TILE_PASS` (its activations live a tile at a time); for engine 13,
    :data:`GPU_TILE_PASS`; None for the engines
    before 10, which cut every step into the settings' passes of 512.

    Why: a pass writes its activations in the forward and reads them back in the backward, and
    on a CPU each op of a larger pass reads operands written megabytes earlier, from L3 or
    memory (bench/cold_kernels.py); a smaller one pays more Python and dispatch per example.
    Which wins depends on the members an ensemble holds, and the pass may not (member ≡ solo:
    it is fixed by the shape alone). For study S's 2-layer models at d_model 48–64 this gives
    256 where engine 9 took 512: 1.06–1.20× faster per member at 2–16 members, 0.90–1.00× for
    a lone run; at d_model 24–32 a pass of 256 lost at one or two members (0.81–0.98×), so they
    keep 512 (bench/pass_size.py; docs/performance.md, "Engine 10")."""
    if engine in TILE_STEP_ENGINES:
        return TILE_PASS
    if engine == GPU_TILE_ENGINE:
        return GPU_TILE_PASS
    if engine != SIZED_PASS_ENGINE:
        return None
    per_example = activation_bytes(shape)
    examples = PASS_MAX
    while examples > 16 and examples * per_example > PASS_BYTES:
        examples //= 2
    return examples
