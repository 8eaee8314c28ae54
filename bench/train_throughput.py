"""Training throughput: rulelab's MPSPTrainer vs a naive per-seed nn.Module loop (DESIGN §6).

Work: S seeds of the 2-layer MPSP classifier (d_model 64, 2 heads, d_mlp 128, ReLU, pre-LN, CLS
token, seq_len 10, vocab 64), full batch of 16,384 examples, N epochs (= N AdamW steps) each.
(a) naive: a plain nn.Module (nn.Linear/nn.LayerNorm, F.scaled_dot_product_attention) and
    torch.optim.AdamW per seed, seeds one after another, full-batch forward/backward. It starts
    from rulelab's member-e weights on the same data (tr.data.train_x[e]), so final losses must
    match rulelab's: column "dloss" (max over seeds |loss - naive loss|) checks the same work.
(b) rulelab: the S seeds split into one ensemble per core (--threads), trained side by side in
    threads of this process, train_epoch() N times each — as `rulelab train` trains a command's
    chunks: since engine 4 a step computes on one thread, so one ensemble alone uses one core
    (row "rulelab, one ensemble (1 core)") while the naive loop's ops use every thread.

Protocol (one process): fp32 matmul peak (rulelab.hardware, 2048³) at start and end. Each
measurement builds its models and runs one warm-up epoch (untimed), waits up to --idle-wait s
for an idle machine, then times N epochs (data, construction, evaluation excluded). a and b
interleave (a, b, a, b); b/a uses the best rep of each. "other" = cores used by other processes
meanwhile (/proc/stat minus our CPU time); rows with other > 0.1 are slowed by contention, badly
so at 2 threads. "ex/cpu-s" = seed-examples per CPU-second of this process: at --threads 1 it
stays near the idle rate under contention (at 2 threads it also counts OpenMP spin-waits). Extra
rows: one seed per ensemble, micro-batch sizes (--micro), bf16 (``precision="bf16"``, only where
the CPU has native bf16 matmul, or with --bf16). rulelab keeps glibc's heap
(rulelab.engine.allocator): that is process-wide and irreversible, so a and b first run without
it, then both again with it — "(b) rulelab + heap" is rulelab as shipped, "(a) naive" the plain
loop as a user runs it.

FLOPs, 3× convention: fwd + bwd = 3 × forward matmul FLOPs (2 per MAC; embedding gathers,
LayerNorm, elementwise ops not counted). "model" counts the full model at every position (same
for a and b); "exec" counts what each path runs: rulelab's last layer computes Q/K/V at every
position but attention, W_O and MLP for the CLS row only. % peak uses exec FLOPs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time

import torch
import torch.nn.functional as F

from naive_model import NaiveModel, flops_per_example
from rulelab import hardware
from rulelab.engine import allocator
from rulelab.settings import Settings
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.studies.shortcut_saturation.trainer import MPSPTrainer
from side_by_side import both


def busy_seconds() -> float:
    """CPU-seconds all processes have spent busy since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


class Meter:
    """Sums the wall seconds, our CPU-seconds and other processes' CPU-seconds of timed blocks."""

    idle_wait = 0.0  # set from --idle-wait
    wall = cpu = other_cpu = 0.0  # per-instance sums (+= makes instance attributes)

    def __enter__(self) -> Meter:
        end = time.monotonic() + self.idle_wait  # wait for a 0.5 s window below 0.2 cores
        while time.monotonic() < end:
            b0 = busy_seconds()
            time.sleep(0.5)
            if busy_seconds() - b0 < 0.1:
                break
        self.t0, self.cpu0, self.busy0 = time.perf_counter(), time.process_time(), busy_seconds()
        return self

    def __exit__(self, *exc) -> None:
        self.wall += time.perf_counter() - self.t0
        mine = time.process_time() - self.cpu0
        self.cpu += mine
        self.other_cpu += max(0.0, busy_seconds() - self.busy0 - mine)


def run_naive(cfgs, epochs: int) -> tuple[Meter, list[float]]:
    ref = MPSPTrainer(cfgs, Settings())  # same data and initial weights as rulelab
    meter, losses = Meter(), []
    for e, c in enumerate(cfgs):
        model = NaiveModel(c).load_member(ref.model, e)
        opt = torch.optim.AdamW(model.parameters(), lr=c.lr, betas=(c.beta1, c.beta2),
                                eps=c.eps, weight_decay=c.weight_decay)
        x, y = ref.data.train_x[e], ref.data.train_y[e]
        for i in range(epochs + 1):  # the first epoch is an untimed warm-up
            with meter if i else contextlib.nullcontext():
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
        losses.append(loss.item())
    return meter, losses


def run_rulelab(cfgs, epochs: int, micro_batch: int = 512, per_ens: int = 0,
                precision: str = "fp32", cores: int = 1) -> tuple[Meter, list[float]]:
    """rulelab's trainer over ``cfgs`` in ensembles of ``per_ens`` seeds (all: 0), ``cores``
    of them at once in threads of this process, as the local executor trains a command's
    chunks (each step computes on one thread: rulelab.engine.threads); the rest in turn."""
    per_ens = per_ens or -(-len(cfgs) // cores)  # 0: the seeds split evenly over the cores
    settings = Settings(micro_batch=micro_batch, precision=precision)
    trainers = [MPSPTrainer(cfgs[i : i + per_ens], settings)
                for i in range(0, len(cfgs), per_ens)]
    meter, last = Meter(), {}

    def train(tr: MPSPTrainer) -> None:
        for _ in range(epochs):
            last[id(tr)] = tr.train_epoch()

    for tr in trainers:
        tr.train_epoch()  # warm-up (untimed)
    for i in range(0, len(trainers), cores):
        with meter:
            both(trainers[i : i + cores], train)
    return meter, [x for tr in trainers for x in last[id(tr)].tolist()]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2, help="timed epochs per measurement")
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--micro", type=int, nargs="*", default=[],
                   help="also time these micro-batch sizes (e.g. 256 1024 16384)")
    p.add_argument("--bf16", action="store_true", help="time bf16 even where it is not native")
    p.add_argument("--quick", action="store_true", help="smoke run: 1,024 examples, 1 epoch")
    p.add_argument("--idle-wait", type=float, default=5.0,
                   help="max seconds to wait for an idle machine before each timed block")
    args = p.parse_args()
    Meter.idle_wait = 0.0 if args.quick else args.idle_wait
    torch.set_num_threads(args.threads)
    allocator._applied = False  # rows a and b first run with glibc's defaults (see docstring)
    n_train, epochs = (1024, 1) if args.quick else (16384, args.epochs)
    cfgs = [MPSPRunConfig(layers=2, heads=2, d_model=64, d_mlp=128, seq_len=10, vocab=64,
                          n_train=n_train, n_eval=512, epochs=epochs, ratio=0.9, seed=s)
            for s in range(args.seeds)]
    work = n_train * epochs * args.seeds  # seed-examples per measurement
    model_f, exec_b = flops_per_example(cfgs[0], False), flops_per_example(cfgs[0], True)
    print(f"in-process training, paper 2L config: {args.seeds} seeds × {epochs} epochs × "
          f"{n_train} examples, {args.threads} threads, load avg {os.getloadavg()[0]:.2f}")
    print(f"FLOP/example (3×): model {model_f / 1e6:.3f} M, rulelab exec {exec_b / 1e6:.3f} M")
    peak0 = hardware.matmul_peak()
    bf16 = args.bf16 or hardware.native_bf16()
    peak16 = hardware.matmul_peak(torch.bfloat16) if bf16 else float("nan")
    print(f"matmul peaks: fp32 {peak0:.0f} GFLOP/s"
          + (f", bf16 {peak16:.0f} GFLOP/s" if bf16 else ", bf16 not native (row skipped)"))
    a_rates, b_rates = [], []
    rows: list[tuple] = []  # name, seed-ex/s, exec FLOP/ex, other, ex/cpu-s, max |dloss|, peak
    ref: list[float] = []  # final train loss per seed of the first naive run

    def record(name: str, result: tuple[Meter, list[float]], exec_f: float,
               peak: float | None = None) -> float:
        m, loss = result
        ref[:] = ref or loss
        dloss = max(abs(x - y) for x, y in zip(ref, loss, strict=True))
        rate, other = work / m.wall, m.other_cpu / m.wall
        rows.append((name, rate, exec_f, other, work / m.cpu, dloss, peak))
        print(f"  {name:<30} {rate:9,.0f} seed-ex/s  other load {other:.2f} cores", flush=True)
        return rate

    cores = args.threads  # rulelab trains this many ensembles at once, one thread each
    for rep in (1, 2):
        a_rates.append(record(f"(a) naive, rep {rep}", run_naive(cfgs, epochs), model_f))
        b_rates.append(record(f"(b) rulelab, rep {rep}", run_rulelab(cfgs, epochs, cores=cores),
                              exec_b))
    record("rulelab, one ensemble (1 core)", run_rulelab(cfgs, epochs), exec_b)
    record("rulelab 1 seed per ensemble", run_rulelab(cfgs, epochs, per_ens=1, cores=cores),
           exec_b)
    for mb in args.micro:
        record(f"rulelab micro-batch {mb}",
               run_rulelab(cfgs, epochs, micro_batch=mb, cores=cores), exec_b)
    if bf16:
        record("rulelab bf16", run_rulelab(cfgs, epochs, precision="bf16", cores=cores),
               exec_b, peak16)
    allocator._applied = None
    heap = allocator.keep_heap()
    name = "+ heap" if heap else "(heap n/a)"
    shipped = record(f"(b) rulelab {name} (shipped)", run_rulelab(cfgs, epochs, cores=cores),
                     exec_b)
    record(f"(a) naive {name}", run_naive(cfgs, epochs), model_f)
    if bf16:
        bf16_shipped = record(f"rulelab bf16 {name}", run_rulelab(
            cfgs, epochs, precision="bf16", cores=cores), exec_b, peak16)
    peak = max(peak0, peak1 := hardware.matmul_peak(reps=6))  # another key: measured again
    print(f"fp32 matmul peak at end: {peak1:.0f} GFLOP/s; % peak uses the best, {peak:.0f}")
    print(f"final train loss after {epochs + 1} steps (naive, seed 0): {ref[0]:.6f}; "
          "dloss = max over seeds |loss - naive loss|")
    a = max(a_rates)
    print(f"\n{'row':<30} {'seed-ex/s':>10} {'x naive':>8} {'model GF/s':>10} "
          f"{'exec GF/s':>9} {'% peak':>6} {'other':>5} {'ex/cpu-s':>8} {'dloss':>7}")
    for name, rate, exec_f, other, per_cpu, dloss, pk in rows:
        print(f"{name:<30} {rate:10,.0f} {rate / a:8.2f} {rate * model_f / 1e9:10.1f} "
              f"{rate * exec_f / 1e9:9.1f} {100 * rate * exec_f / 1e9 / (pk or peak):5.1f}% "
              f"{other:5.2f} {per_cpu:8,.0f} {dloss:7.1e}")
    print("(% peak of bf16 rows: of the bf16 matmul peak)")
    print(f"\nrulelab / naive, fp32 in-process: {shipped / a:.2f} as shipped (target ≥ 3); "
          f"{max(b_rates) / a:.2f} both with glibc's default heap")
    if bf16:
        print(f"bf16 / fp32 rulelab: {bf16_shipped / shipped:.2f} (target on AMX ≥ 2)")
    print(f"load avg {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
