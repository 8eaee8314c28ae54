"""Each same-numbers piece of engine 9's training step, on and off in one run (issue 25):
the step of one micro-batch (4 members × 512 examples, forward + backward, one thread, as the
trainer runs it) with every piece as shipped against the same step with one piece taken back:

- ``LayerNorm without prefetch``: ``layer_norm_kernels.cpp`` built with ``RL_NO_PREFETCH`` (its
  reads of the next block's rows and its stores not prefetched);
- ``embedding as PyTorch ops``: ``lane_forward.embed_tokens`` transposed, instead of
  ``lane_embedding.LaneEmbedding`` (one native pass each way);
- ``residual adds apart``: each sublayer's output bias, the residual add and the next
  LayerNorm as three PyTorch-dispatched steps (bias ``add_``, ``+``, the LayerNorm kernel;
  autograd adding the stream's two gradients), instead of ``residual_norm.ResidualLayerNorm``;
- ``QKV biases added apart``: q, k and v's biases added by their projections (a pass over
  ``[E, 3·H·dh, T·B]`` each way) instead of by the attention core as it packs them
  (``lane_forward.attention(core_bias=False)``);
- ``collector walking everything``: the step outside ``engine.collector.setup_frozen`` (which
  the trainer's ``fit`` holds), so Python's full collections walk every object of the process
  (this script holds fewer than the CLI does: an underestimate).

Each variant gives the same gradients bit for bit (checked here before timing). Rounds alternate;
medians of 7 rounds of 8 steps. docs/performance.md's "Same numbers, fewer passes" table reads it.

    python bench/native_pieces.py [--size paper|ladder]
"""

from __future__ import annotations

import contextlib
import functools
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from rulelab.engine.collector import setup_frozen
from rulelab.models import lane_embedding, lane_forward, layer_norm_lanes, native_build
from step_parts import SIZES, B, E, micro_batch, size_argument


def without_prefetch(tmp: Path):
    """The LayerNorm library built with ``RL_NO_PREFETCH``."""
    source = tmp / "layer_norm_kernels.cpp"
    source.write_text("#define RL_NO_PREFETCH 1\n" + layer_norm_lanes.SOURCE.read_text())
    lib = native_build.load(source, layer_norm_lanes._declare)
    if isinstance(lib, str):
        raise SystemExit(f"error: the LayerNorm kernels do not build here: {lib}")
    return lib


def residual_apart(base: torch.Tensor, o: torch.Tensor, bias: torch.Tensor, ln):
    """``lane_forward.residual`` as three steps: the unfused chain it replaced."""
    s = base + o.add_(bias.unsqueeze(2).unsqueeze(3))
    return s, lane_forward.layer_norm(ln, s)


def main() -> None:
    size = size_argument(__doc__)
    D, M = SIZES[size]
    model, tokens, labels = micro_batch(size)
    shipped_ln, shipped_embed = layer_norm_lanes._build(), lane_embedding.native
    if isinstance(shipped_ln, str) or lane_embedding.unavailable():
        raise SystemExit("error: the native kernels do not build here")

    def step() -> list[torch.Tensor]:
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(tokens).reshape(E * B, -1), labels).backward()
        return [p.grad for p in model.parameters()]

    with tempfile.TemporaryDirectory() as tmp:
        plain_ln = without_prefetch(Path(tmp))
        fused, attention = lane_forward.residual, lane_forward.attention
        apart = functools.partial(attention, core_bias=False)
        variants = {  # name: LayerNorm library, embedding's library finder, residual, attention,
            # frozen setup
            "as shipped": (shipped_ln, shipped_embed, fused, attention, True),
            "LayerNorm without prefetch": (plain_ln, shipped_embed, fused, attention, True),
            "embedding as PyTorch ops": (shipped_ln, lambda *a: None, fused, attention, True),
            "residual adds apart": (shipped_ln, shipped_embed, residual_apart, attention, True),
            "QKV biases added apart": (shipped_ln, shipped_embed, fused, apart, True),
            "collector walking everything": (shipped_ln, shipped_embed, fused, attention, False),
        }
        grads, times = {}, {name: [] for name in variants}
        for _ in range(7):
            for name, (ln, embed, residual, attend, frozen) in variants.items():
                layer_norm_lanes._build = lambda ln=ln: ln  # this process only
                lane_embedding.native = embed
                lane_forward.residual, lane_forward.attention = residual, attend
                with setup_frozen() if frozen else contextlib.nullcontext():
                    grads[name] = step()
                    step()
                    t = time.perf_counter()
                    for _ in range(8):
                        step()
                    times[name].append((time.perf_counter() - t) / 8 * 1e3)
    base = statistics.median(times["as shipped"])
    print(f"one step of the {size} shape (d_model {D}, d_mlp {M}; {E} members × {B} "
          f"examples), engine 9, 1 thread: median ms of 7 alternating rounds")
    for name, t in times.items():
        same = all(torch.equal(a, b) for a, b in zip(grads[name], grads["as shipped"],
                                                     strict=True))
        ms = statistics.median(t)
        print(f"{name:<30} {ms:7.1f} ms   shipped is {ms / base:.3f}× faster   "
              f"{'same gradients' if same else 'GRADIENTS DIFFER'}")


if __name__ == "__main__":
    main()
