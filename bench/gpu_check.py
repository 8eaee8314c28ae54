"""Throughput, memory and projections on a device (issue 13 goal 6; run by bench/gpu_check.sh).

1. The machine (rulelab.hardware): CPU, GPU, native bf16, measured matmul peaks.
2. Study S at the paper's config (2L, 2 heads, d_model 64, d_mlp 128, n = 10, V = 64, full
   batch 16,384, val / adv 4,096 each): for each precision and ensemble size E, one warm-up
   epoch, EPOCHS timed epochs, one timed evaluation → s/epoch, seed-epochs/s (the evaluation
   amortized over eval_every = 10 epochs), TFLOP/s (3 × forward matmul FLOPs, as the planner
   counts), peak memory per member beside the planner's estimate; then, before study M, the
   same for engine 13 (``--engine 13``: the step as one Triton kernel, issue 25 goal 5) at
   S_TILE_MEMBERS in one pass of the whole batch, for each of TILE_SHAPES, its kernel's compile
   in the warm-up column; then, after study M and the projections, for the compiled engine
   (``--engine compiled``, engine 5: each pass's forward and backward fused by
   ``torch.compile``, Triton kernels on CUDA) at S_COMPILED_MEMBERS, its compile in the
   warm-up column.
3. Study M at P = 113, width 4097, train fraction 0.8 (the widest run of the paper recipe):
   the same, per full-batch step.
4. Projection of each paper-scale recipe (studies/*/recipes/) on this device: the planner's
   chunks (members capped by max_members and by 80% of free memory), each timed as
   ``FLOPs / F + passes × pass_s`` with F and pass_s fitted per study and precision from the
   measurements: epoch time t(E) = passes × pass_s + E × FLOPs per member / F (non-negative
   least squares over the measured E ≥ 8; E = 1 and 2 show what a small ensemble costs, bound
   by the host rather than the device).

Sizes come from the environment (bench/gpu_check.sh sets them; DEVICE=cpu gives a smoke run):
DEVICE, EPOCHS, PRECISIONS, S_MEMBERS, S_TILE_MEMBERS and S_COMPILED_MEMBERS ("" skips),
TILE_SHAPES (engine 13's tile:warps[:held] to time, default "16:16 16:16:held"),
S_N_TRAIN, S_N_EVAL,
M_MEMBERS, M_P, M_WIDTH,
MICRO_BATCH (default: per E, the largest power of two whose E members fit in 60% of the memory
budget by the planner's estimate, so a GPU makes one pass per epoch wherever that fits; the CPU
engine's default 512 would make 32 passes of the paper's N = 16,384).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import torch
from scipy.optimize import nnls

from rulelab import hardware
from rulelab.engine.runner import trainer_class
from rulelab.models import gpu_tile_step
from rulelab.settings import Settings
from rulelab.studies.coexistence.config import ModularRunConfig
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.sweep.estimate import Speed, human_bytes, human_seconds, memory_budget, run_cost
from rulelab.sweep.planner import plan_chunks
from rulelab.sweep.recipe import load_recipe

DEVICE = os.environ.get("DEVICE", "cuda")
CUDA = DEVICE.startswith("cuda")
EPOCHS = int(os.environ.get("EPOCHS", "3"))
FORCE_BF16 = os.environ.get("FORCE_BF16") == "1"  # time bf16 even where it is not native


SHIPPED_TILE = (gpu_tile_step.BT, gpu_tile_step.NUM_WARPS)


def env_ints(name: str, default: str) -> list[int]:
    return [int(v) for v in os.environ.get(name, default).split()]


def sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


def micro_batch_for(cfg, members: int) -> int:
    """MICRO_BATCH, else the largest power of two ≤ 2^19 whose ``members`` fit in 60% of the
    memory budget (a micro-batch above the training set is the full batch: one pass)."""
    if os.environ.get("MICRO_BATCH"):
        return int(os.environ["MICRO_BATCH"])
    budget = 0.6 * memory_budget(DEVICE)[0]
    for mb in (2**k for k in range(19, 6, -1)):  # Settings allows ≤ 10^6
        if members * run_cost(cfg, mb).member_bytes <= budget:
            return mb
    return 64


def measure(cfgs, precision: str, engine: str = "eager") -> dict | str:
    """Time EPOCHS epochs (after a warm-up epoch, which holds the compile under ``compiled``) and
    one evaluation of ``cfgs`` as one ensemble trained by ``engine``; or why not, in a line."""
    E = len(cfgs)
    mb = micro_batch_for(cfgs[0], E)
    if engine == "13" and not os.environ.get("MICRO_BATCH"):
        mb = cfgs[0].n_train  # its scratch is a tile's, not the pass's: the whole step at once
    cost = run_cost(cfgs[0], mb)
    tr = None
    try:
        if CUDA:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated() if CUDA else 0
        tr = trainer_class(cfgs[0].task)(cfgs, Settings(device=DEVICE, precision=precision,
                                                         micro_batch=mb, engine=engine))
        t = time.perf_counter()
        tr.train_epoch()
        sync()
        warm_s = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(EPOCHS):
            tr.train_epoch()
        sync()
        epoch_s = (time.perf_counter() - t) / EPOCHS
        t = time.perf_counter()
        tr.evaluate()
        sync()
        eval_s = time.perf_counter() - t
        mem = (torch.cuda.max_memory_allocated() - base) / E if CUDA else float("nan")
    except torch.OutOfMemoryError:
        return "out of memory"
    except Exception as err:  # a backend that cannot compile here: say so, go on measuring
        return f"failed: {type(err).__name__}: {(str(err).splitlines() or [''])[0][:160]}"
    finally:
        del tr
    every = getattr(cfgs[0], "eval_every", 10)
    return {"E": E, "epoch_s": epoch_s, "eval_s": eval_s, "warm_s": warm_s,
            "passes": cost.passes_per_epoch,
            "rate": E / (epoch_s + eval_s / every), "flops": cost.flops_per_epoch,
            "tflops": cost.flops_per_epoch * E / epoch_s / 1e12, "mem": mem,
            "est": cost.member_bytes}


def fit_speed(rows: list[dict], note: str) -> Speed | None:
    """F and pass_s from t = passes · pass_s + E · flops / F over the measured rows
    (non-negative least squares: the micro-batch, so the passes, may differ by row)."""
    if not rows:
        return None
    a = np.array([[r["passes"], r["E"] * r["flops"]] for r in rows], dtype=float)
    t = np.array([r["epoch_s"] for r in rows], dtype=float)
    (pass_s, inv_f), _ = nnls(a, t)
    if inv_f <= 0:  # not compute-bound at these sizes: the largest E's rate, nothing a pass
        r = max(rows, key=lambda r: r["E"])
        return Speed(r["E"] * r["flops"] / r["epoch_s"], 0.0, note)
    return Speed(1.0 / inv_f, float(pass_s), note)


def table(title: str, cfg_for, unit: str, engines: dict[str, list[int]],
          precisions: list[str] | None = None) -> dict[str, Speed | None]:
    """Each engine × precision (``precisions``, else $PRECISIONS) at its ensemble sizes
    (``engines``: {engine: sizes}): one row per size, then the fit; keyed ``precision`` for the
    eager engine, ``engine precision`` else."""
    print(f"\n{title}")
    print(f"{'engine':>8} {'prec':>5} {'E':>5} {'passes':>6} {'s/' + unit:>9} "
          f"{'seed-' + unit + 's/s':>13} {'TFLOP/s':>8} {'MiB/member':>11} {'est MiB':>8} "
          f"{'eval s':>7} {'warm s':>7}", flush=True)
    speeds = {}
    for engine, sizes in engines.items():
        for precision in precisions or os.environ.get("PRECISIONS", "fp32 bf16 tf32").split():
            if precision == "bf16" and not (hardware.native_bf16(DEVICE) or FORCE_BF16):
                print(f" bf16 skipped: not native on {DEVICE}")
                continue
            if precision == "tf32" and not hardware.native_tf32(DEVICE):
                print(f" tf32 skipped: {DEVICE} has no TF32 tensor cores")
                continue
            rows = []
            for E in sizes:
                r = measure([cfg_for(s) for s in range(E)], precision, engine)
                if isinstance(r, str):
                    print(f"{engine:>8} {precision:>5} {E:>5}  {r}", flush=True)
                    if r == "out of memory":
                        continue
                    break  # the same failure at every size: on to the next precision
                rows.append(r)
                print(f"{engine:>8} {precision:>5} {E:>5} {r['passes']:>6} {r['epoch_s']:9.3f} "
                      f"{r['rate']:13.1f} {r['tflops']:8.2f} {r['mem'] / 2**20:11.1f} "
                      f"{r['est'] / 2**20:8.1f} {r['eval_s']:7.2f} {r['warm_s']:7.1f}",
                      flush=True)
            key = precision if engine == "eager" else f"{engine} {precision}"
            # the fit is of compute-bound ensembles: a 1- or 2-member one is bound by the host
            speeds[key] = fit_speed([r for r in rows if r["E"] >= 8] or rows, f"measured {key}")
            if speeds[key]:
                sp = speeds[key]
                print(f"{engine:>8} {precision:>5} fit: {sp.flops / 1e12:.2f} TFLOP/s sustained + "
                      f"{sp.pass_s * 1e3:.3f} ms a pass", flush=True)
    return speeds


def project(path: Path, speeds: dict[str, Speed | None], max_members: int) -> None:
    """The recipe's time on this device, its ensembles planned at the micro-batch that puts
    its largest ensemble in 60% of the memory (as measured above)."""
    configs = load_recipe(path).configs()
    budget, note = memory_budget(DEVICE)
    mb = micro_batch_for(configs[0], min(max_members, len(configs)))
    chunks, _ = plan_chunks(configs, {}, max_members=max_members, budget_bytes=budget,
                            micro_batch=mb)
    times = [f"{human_seconds(sum(sp.seconds(c.flops, c.passes) for c in chunks))} {prec}"
             for prec, sp in speeds.items() if sp is not None]
    name = f"{path.parent.parent.name}/{path.stem}"
    print(f"  {name:<28} {len(configs):>6,} runs {len(chunks):>5} ensembles of ≤ {max_members}"
          f" (micro-batch {mb})"
          f"  {sum(c.flops for c in chunks):9.3g} FLOP  {' | '.join(times) or 'not measured'}")


def projections(by_task: dict, only: str | None = None) -> None:
    """Every paper-scale recipe of the measured tasks (``only``: of that task alone)."""
    print(f"\nprojection on {DEVICE}: the planner's ensembles (memory: "
          f"{memory_budget(DEVICE)[1]}), each FLOPs / F + passes × pass_s with the fits above; "
          "evaluations included", flush=True)
    for path in recipes():
        task = load_recipe(path).task
        if task in by_task:
            project(path, *by_task[task])
        elif only is None:
            print(f"  {path.parent.parent.name}/{path.stem:<16} task {task}: not measured here")


def recipes() -> list[Path]:
    """Every study's recipes at the paper's scale (not the quick / tiny presets)."""
    root = Path(__file__).resolve().parents[1] / "src" / "rulelab" / "studies"
    return [p for p in sorted(root.glob("*/recipes/*.yaml"))
            if p.stem not in ("quick", "tiny") and not p.stem.startswith("quick")]


def main() -> None:
    print("\n".join(hardware.describe(DEVICE)), flush=True)
    n_train = int(os.environ.get("S_N_TRAIN", "16384"))
    n_eval = int(os.environ.get("S_N_EVAL", "4096"))

    def s_cfg(seed: int) -> MPSPRunConfig:
        return MPSPRunConfig(layers=2, heads=2, seed=seed, n_train=n_train, n_eval=n_eval,
                             epochs=EPOCHS + 2)

    p, width = int(os.environ.get("M_P", "113")), int(os.environ.get("M_WIDTH", "4097"))

    def m_cfg(seed: int) -> ModularRunConfig:
        return ModularRunConfig(p=p, width=width, train_frac=0.8, noise=0.3, seed=seed,
                                epochs=EPOCHS + 2, eval_every=1000, log_eval_steps=0)

    # E = 2 and E = 1: the cost of a small ensemble, which the compute-bound fit cannot see (on
    # the H200 a 2-member 2L ensemble ran at 27 ms a member-epoch against 5.8 ms at E = 64).
    s_members = env_ints("S_MEMBERS", "2 64 256 1024")
    m_members = env_ints("M_MEMBERS", "1 8 64 256")
    s = table(f"study S, paper config 2L2H, N = {n_train:,}, one epoch = one full-batch step",
              s_cfg, "epoch", {"eager": s_members})
    # Engine 13 (the step as one Triton kernel, issue 25 goal 5; opt-in on CUDA) at the paper
    # recipes' ensemble sizes, right after the eager baseline (before study M, measured on 11-30
    # and 12-04, so a time limit cuts that first): its warm-up column holds the kernel's compile.
    # TILE_SHAPES: the kernel's tile (examples), warps and, with ":held", its weight gradients
    # as one product each from registers (gpu_tile_step.STAGE_GRADS off), each timed apart.
    # 16:16 is the engine's; 4:16 (the last block at every position, fewer values a thread) and
    # 16:16:held (twice the spills, less scratch traffic: bench/gpu_tile_compile.py) are set
    # here only, to be compared.
    tiled = env_ints("S_TILE_MEMBERS", "64 256")
    shapes = os.environ.get("TILE_SHAPES", "16:16 16:16:held").split() if tiled else []
    # precision by precision, every shape in each, so that a time limit cuts whole precisions
    # (PRECISIONS lists the better candidate first) and never one side of a comparison
    for precision in os.environ.get("PRECISIONS", "fp32 bf16 tf32").split() if shapes else []:
        for shape in shapes:
            tile, warps, *variant = shape.split(":")
            held = variant == ["held"]
            gpu_tile_step.BT, gpu_tile_step.NUM_WARPS = int(tile), int(warps)
            gpu_tile_step.STAGE_GRADS = not held
            rows = table(f"study S, the same, trained by engine 13 (the fused Triton step), "
                         f"tiles of {tile} examples, {warps} warps, weight gradients "
                         f"{'held' if held else 'staged'}", s_cfg, "epoch", {"13": tiled},
                         [precision])
            s.update({k.replace("13", f"13 ({shape})"): v for k, v in rows.items()})
    gpu_tile_step.BT, gpu_tile_step.NUM_WARPS = SHIPPED_TILE
    gpu_tile_step.STAGE_GRADS = True
    m = table(f"study M, P = {p}, width {width}, train fraction 0.8, full batch", m_cfg,
              "step", {"eager": m_members})
    by_task = {"mpsp": (s, max(s_members)), "modular": (m, max(m_members))}
    projections(by_task)
    # The compiled engine (engine 5: torch.compile of each pass's forward and backward, Triton
    # on CUDA) beside the eager one, at the sizes the paper recipes' ensembles have (issue 25
    # goal 5), after the eager projections so that a compile cut by the time limit costs
    # nothing above; the warm-up column holds its compile.
    compiled = env_ints("S_COMPILED_MEMBERS", "64 256")
    if compiled:
        s.update(table("study S, the same, trained by the compiled engine", s_cfg, "epoch",
                       {"compiled": compiled}))
        projections({"mpsp": (s, max(s_members))}, only="mpsp")
    if CUDA:
        print(f"peak memory allocated: {human_bytes(torch.cuda.max_memory_allocated())}")


if __name__ == "__main__":
    main()
