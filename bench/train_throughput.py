"""Training throughput: rulelab's EnsembleTrainer vs a naive per-seed nn.Module loop (DESIGN §6).

Work: S seeds of the 2-layer MPSP classifier (d_model 64, 2 heads, d_mlp 128, ReLU, pre-LN, CLS
token, seq_len 10, vocab 64), full batch of 16,384 examples, N epochs (= N AdamW steps) each.
(a) naive: a plain nn.Module (nn.Linear/nn.LayerNorm, F.scaled_dot_product_attention) and
    torch.optim.AdamW per seed, seeds one after another, full-batch forward/backward. It starts
    from rulelab's member-e weights on the same data (tr.data.train_x[e]), so final losses must
    match rulelab's: column "dloss" (max over seeds |loss - naive loss|) checks the same work.
(b) rulelab: one EnsembleTrainer over all S seeds, train_epoch() N times.

Protocol (one process): fp32 matmul peak (2048³, best of 5) at start and end. Each measurement
builds its models and runs one warm-up epoch (untimed), waits up to --idle-wait s for an idle
machine, then times N epochs (data, construction, evaluation excluded). a and b interleave
(a, b, a, b); b/a uses the best rep of each. "other" = cores used by other processes meanwhile
(/proc/stat minus our CPU time); rows with other > 0.1 are slowed by contention, badly so at 2
threads. "ex/cpu-s" = seed-examples per CPU-second of this process: at --threads 1 it stays near
the idle rate under contention (at 2 threads it also counts OpenMP spin-waits). Extra rows:
micro_batch, one seed per ensemble, bf16 autocast; then glibc mallopt, which is process-wide and
irreversible, so it comes last and a and b are measured again after it.

FLOPs, 3× convention: fwd + bwd = 3 × forward matmul FLOPs (2 per MAC; embedding gathers,
LayerNorm, elementwise ops not counted). "model" counts the full model at every position (same
for a and b); "exec" counts what each path runs: rulelab's last layer computes Q/K/V at every
position but attention, W_O and MLP for the CLS row only. % peak uses exec FLOPs.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import time

import torch
import torch.nn.functional as F
from torch import nn

from rulelab.config import MPSPRunConfig
from rulelab.train.ensemble import EnsembleTrainer, TrainOptions


def flops_per_example(c: MPSPRunConfig, cls_only_last: bool) -> float:
    T, d, f = c.seq_len + 1, c.d_model, c.d_mlp
    qkv, rest = 3 * d * d, d * d + 2 * d * f + 2 * T * d  # MACs per token (attn: QK^T and AV)
    macs = (c.layers - 1) * T * (qkv + rest)
    macs += T * qkv + (1 if cls_only_last else T) * rest + d * c.label_mod
    return 3 * 2 * macs


class Block(nn.Module):
    def __init__(self, c: MPSPRunConfig) -> None:
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

    def __init__(self, c: MPSPRunConfig) -> None:
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
    ref = EnsembleTrainer(cfgs, TrainOptions())  # same data and initial weights as rulelab
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
                bf16: bool = False) -> tuple[Meter, list[float]]:
    per_ens = per_ens or len(cfgs)
    meter, losses = Meter(), []
    for i in range(0, len(cfgs), per_ens):
        tr = EnsembleTrainer(cfgs[i : i + per_ens], TrainOptions(micro_batch=micro_batch))
        if bf16:  # wrap the forward only; the loss and AdamW stay fp32
            def cast(x, fwd=tr.model.forward):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return fwd(x).float()

            tr.model.forward = cast
        tr.train_epoch()  # warm-up (untimed)
        with meter:
            for _ in range(epochs):
                loss = tr.train_epoch()
        losses += loss.tolist()
    return meter, losses


def matmul_peak(n: int = 2048, reps: int = 5) -> float:
    a, b, best = torch.randn(n, n), torch.randn(n, n), float("inf")
    for _ in range(reps + 1):  # the first is a warm-up
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9


def set_mallopt() -> None:
    """glibc: never mmap big blocks, never trim, 512 MiB top pad (process-wide)."""
    libc = ctypes.CDLL("libc.so.6")
    for param, value in ((-4, 0), (-1, 2**31 - 1), (-2, 512 << 20)):  # MMAP_MAX, TRIM, TOP_PAD
        if libc.mallopt(param, value) != 1:
            raise OSError(f"mallopt({param}, {value}) failed")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2, help="timed epochs per measurement")
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--quick", action="store_true", help="smoke run: 1,024 examples, 1 epoch")
    p.add_argument("--idle-wait", type=float, default=5.0,
                   help="max seconds to wait for an idle machine before each timed block")
    args = p.parse_args()
    Meter.idle_wait = 0.0 if args.quick else args.idle_wait
    torch.set_num_threads(args.threads)
    n_train, epochs = (1024, 1) if args.quick else (16384, args.epochs)
    cfgs = [MPSPRunConfig(layers=2, heads=2, d_model=64, d_mlp=128, seq_len=10, vocab=64,
                          n_train=n_train, n_eval=512, epochs=epochs, ratio=0.9, seed=s)
            for s in range(args.seeds)]
    work = n_train * epochs * args.seeds  # seed-examples per measurement
    model_f, exec_b = flops_per_example(cfgs[0], False), flops_per_example(cfgs[0], True)
    print(f"torch {torch.__version__}, threads {args.threads}, load avg {os.getloadavg()}")
    print(f"{args.seeds} seeds × {epochs} epochs × {n_train} examples; FLOP/example (3×): "
          f"model {model_f / 1e6:.3f} M, rulelab exec {exec_b / 1e6:.3f} M")
    print(f"fp32 matmul peak (2048³, best of 5): {(peak0 := matmul_peak()):.0f} GFLOP/s")
    a_rates, b_rates = [], []
    rows: list[tuple] = []  # name, seed-ex/s, exec FLOP/ex, other, ex/cpu-s, max |dloss|
    ref: list[float] = []  # final train loss per seed of the first naive run

    def record(name: str, result: tuple[Meter, list[float]], exec_f: float) -> float:
        m, loss = result
        ref[:] = ref or loss
        dloss = max(abs(x - y) for x, y in zip(ref, loss, strict=True))
        rate, other = work / m.wall, m.other_cpu / m.wall
        rows.append((name, rate, exec_f, other, work / m.cpu, dloss))
        print(f"  {name:<30} {rate:9,.0f} seed-ex/s  other load {other:.2f} cores", flush=True)
        return rate

    for rep in (1, 2):
        a_rates.append(record(f"(a) naive, rep {rep}", run_naive(cfgs, epochs), model_f))
        b_rates.append(record(f"(b) rulelab mb512, rep {rep}", run_rulelab(cfgs, epochs), exec_b))
    for mb in (256, 1024):
        record(f"rulelab mb{mb}", run_rulelab(cfgs, epochs, micro_batch=mb), exec_b)
    record("rulelab 1 seed per ensemble", run_rulelab(cfgs, epochs, per_ens=1), exec_b)
    record("rulelab mb512 bf16 autocast", run_rulelab(cfgs, epochs, bf16=True), exec_b)
    set_mallopt()
    record("(a) naive + mallopt", run_naive(cfgs, epochs), model_f)
    record("(b) rulelab mb512 + mallopt", run_rulelab(cfgs, epochs), exec_b)
    record("rulelab mb=full + mallopt", run_rulelab(cfgs, epochs, n_train), exec_b)
    peak = max(peak0, peak1 := matmul_peak())
    print(f"fp32 matmul peak at end: {peak1:.0f} GFLOP/s; % peak uses the best, {peak:.0f}")
    print(f"final train loss after {epochs + 1} steps (naive, seed 0): {ref[0]:.6f}; "
          "dloss = max over seeds |loss - naive loss|")
    a = max(a_rates)
    print(f"\n{'row':<30} {'seed-ex/s':>10} {'x naive':>8} {'model GF/s':>10} "
          f"{'exec GF/s':>9} {'% peak':>6} {'other':>5} {'ex/cpu-s':>8} {'dloss':>7}")
    for name, rate, exec_f, other, per_cpu, dloss in rows:
        print(f"{name:<30} {rate:10,.0f} {rate / a:8.2f} {rate * model_f / 1e9:10.1f} "
              f"{rate * exec_f / 1e9:9.1f} {100 * rate * exec_f / 1e9 / peak:5.1f}% {other:5.2f}"
              f" {per_cpu:8,.0f} {dloss:7.1e}")
    print(f"\nb/a = {max(b_rates) / a:.2f} (best reps; target ≥ 2); load avg {os.getloadavg()}")


if __name__ == "__main__":
    main()
