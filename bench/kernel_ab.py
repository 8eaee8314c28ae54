"""The step kernel at a git revision against the working tree's: the same bits, and the speed
(issue 25: a change that keeps engine 12's numbers must keep every bit, or it is a new engine
version).

Builds ``step_kernels.cpp`` as committed at ``--rev`` (default HEAD) and as it stands in the
working tree, both for ``--march`` (default native). First the bits: one step's loss, every
gradient and the forward's logits (fp32; bf16 too where the build multiplies bf16), from both
builds at the ladder's and the paper's widths and at variants of study S's model that take the
other branches (1 and 3 layers, 4 heads, 3 classes, no MLP, no LayerNorm, one head of 20); any
difference is printed and the script exits 1. Then the speed: one
full-batch step of 4 members × 2,048 examples of study S's 2-layer model at each width, the
builds alternating in one process on one thread (the ratio, not the absolute times, is the
reading: the machine's speed drifts between processes).

    python bench/kernel_ab.py [--rev HEAD] [--march native] [--reps 7]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from rulelab.engine.allocator import keep_heap
from rulelab.models import native_build, tile_step
from rulelab.models.transformer import EnsembleTransformer, TransformerShape
from tile_profile import WIDTHS, E, N, study_config

ROOT = Path(__file__).resolve().parents[1]


def _variant(d: int, f: int, **over) -> TransformerShape:
    """Study S's model at width ``d`` / ``f`` (:func:`tile_profile.study_config`), changed by
    ``over``."""
    return dataclasses.replace(TransformerShape.of(study_config(d, f)), **over)


# Study S's model at each width (11 positions), and the branches that the
# test shapes of tests/engine/models/test_tile_step.py take)
BIT_SHAPES = {
    **{f"study S, {name}": _variant(d, f) for name, (d, f) in WIDTHS.items()},
    "1L": _variant(32, 64, layers=1),
    "3L, 4 heads, 3 classes": _variant(32, 40, layers=3, heads=4, label_mod=3),
    "no MLP": _variant(24, 0),
    "no LayerNorm": _variant(24, 48, ln=False),
    "1 head of 20, d_mlp 36": _variant(20, 36, heads=1),
}


def committed(rev: str, out: Path) -> Path:
    """The kernel's source as committed at ``rev``, written to ``out`` with the local headers
    it includes there (since 2026-12-06 the step is split into headers) beside it."""
    def show(rel: Path) -> str:
        done = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=ROOT, capture_output=True,
                              text=True)
        if done.returncode:
            raise SystemExit(f"error: git show {rev}:{rel} failed: {done.stderr.strip()}")
        return done.stdout

    rel = tile_step.SOURCE.relative_to(ROOT)
    out.write_text(show(rel))
    pending = [out]
    while pending:  # its quoted includes, and theirs, from the same revision
        for name in native_build.quoted_includes(pending.pop().read_text()):
            header = out.parent / name
            if not header.exists():
                header.write_text(show(rel.parent / name))
                pending.append(header)
    return out


@contextlib.contextmanager
def using(lib: ctypes.CDLL):
    """The trainer's path (tile_step) on ``lib``."""
    old = tile_step.native
    tile_step.native = lambda: lib
    try:
        yield
    finally:
        tile_step.native = old


def readings(model, x, y, bf16: bool) -> dict[str, torch.Tensor]:
    """One step's loss and gradients, and the forward's logits (fp32), by name."""
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
        loss = tile_step.step_loss(model, x, y, float(x.shape[1]))
    loss.sum().backward()
    out = {"loss": loss.detach().clone()}
    out |= {n: p.grad.clone() for n, p in model.named_parameters()}
    if not bf16:
        out["logits"] = tile_step.tile_logits(model, x)
    return out


def same_bits(before: ctypes.CDLL, after: ctypes.CDLL) -> bool:
    precisions = [False] + ([True] if before.rl_step_bf16() and after.rl_step_bf16() else [])
    ok = True
    for name, shape in BIT_SHAPES.items():
        model = EnsembleTransformer(shape, 2).init_weights([1, 2])
        gen = torch.Generator().manual_seed(3)
        with torch.no_grad():  # biases and LayerNorm weights away from 0 and 1
            for p in model.parameters():
                p.add_(0.1 * torch.randn(p.shape, generator=gen))
        x = torch.randint(0, shape.vocab, (2, 70, shape.seq_len), generator=gen)
        y = torch.randint(0, shape.label_mod, (2, 70), generator=gen)
        for bf16 in precisions:
            with using(before):
                a = readings(model, x, y, bf16)
            with using(after):
                b = readings(model, x, y, bf16)
            differ = [k for k in a if not torch.equal(a[k], b[k])]
            ok &= not differ
            said = (f"DIFFER in {len(differ)} of {len(a)}: {', '.join(differ[:4])}"
                    f"{', …' if len(differ) > 4 else ''}" if differ else "the same bits")
            print(f"  {name:<28} {'bf16' if bf16 else 'fp32'}: {said}")
    return ok


def speed(before: ctypes.CDLL, after: ctypes.CDLL, reps: int) -> None:
    print(f"one full-batch step, {E} members × {N} examples, 1 thread, alternating: "
          "ms per member")
    for name, (d, f) in WIDTHS.items():
        model = EnsembleTransformer(study_config(d, f), E).init_weights(list(range(E)))
        x, y = torch.randint(0, 64, (E, N, 10)), torch.randint(0, 2, (E, N))
        walls: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(reps + 1):
            for which, lib in (("before", before), ("after", after)):
                with using(lib):
                    t = time.perf_counter()
                    model.zero_grad()
                    tile_step.step_loss(model, x, y, float(N)).sum().backward()
                    walls[which].append(time.perf_counter() - t)
        b, a = (statistics.median(walls[k][1:]) * 1e3 / E for k in ("before", "after"))
        print(f"  {name:<16} before {b:7.1f}  after {a:7.1f}  speed-up {b / a:.3f}×")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", default="HEAD", help="the revision to compare with")
    ap.add_argument("--march", default="native", help="both builds' -march (default native)")
    ap.add_argument("--reps", type=int, default=7, help="timed steps per build and width")
    args = ap.parse_args()
    keep_heap()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        flags = native_build.flags(args.march)
        before = tile_step.build_variant(Path(tmp) / "before.so", flags,
                                         committed(args.rev, Path(tmp) / "before.cpp"))
        after = tile_step.build_variant(Path(tmp) / "after.so", flags)
        print(f"step kernel at {args.rev} (before) against the working tree's (after), "
              f"-march={args.march}: {after.rl_step_vector_bits()}-bit vectors")
        ok = same_bits(before, after)
        speed(before, after, args.reps)
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
