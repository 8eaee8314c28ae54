"""Training throughput: rulelab's EnsembleTrainer vs a naive per-seed nn.Module loop (DESIGN §6).

Work: S seeds of the 2-layer MPSP classifier (d_model 64, 2 heads, d_mlp 128, ReLU, pre-LN, CLS
token, seq_len 10, vocab 64), full batch of 16,384 examples, N epochs (= N AdamW steps) each.

(a) naive: one plain nn.Module (nn.Linear/nn.LayerNorm, F.scaled_dot_product_attention) and
    one torch.optim.AdamW per seed, seeds one after another, full-batch forward/backward.
    It starts from the weights of rulelab's member e and uses the same data (tr.data.train_x[e]),
    so its final loss must match rulelab's member e; the "max |dloss|" line checks this.
(b) rulelab: EnsembleTrainer over all S seeds, train_epoch() N times.

Protocol: one process; fp32 matmul peak (2048³, best of 5) measured at start and end. Every
measurement runs one untimed warm-up epoch, then times N epochs with perf_counter
(construction, data and evaluation excluded). a and b are interleaved (a, b, a, b); their rows
report the best rep. "other" is the CPU (in cores) that other processes used during the row,
from /proc/stat minus our own process time. Extra rows follow (micro_batch, 1 seed per
ensemble, bf16 autocast), then glibc mallopt (process-wide, so it comes last and a/b are
measured again after it).

FLOPs (3× convention: fwd + bwd = 3 × forward matmul FLOPs; 2 FLOPs per MAC, embedding
gathers, LayerNorm and elementwise ops not counted). "model" FLOPs count the full model at every
position (same for a and b); "executed" counts what each path runs: rulelab's last layer
computes Q/K/V at every position but attention-out and MLP only for the CLS row.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from rulelab.config import MPSPRunConfig
from rulelab.train.ensemble import EnsembleTrainer, TrainOptions


def flops_per_example(c: MPSPRunConfig, cls_only_last: bool) -> float:
    """3× forward matmul FLOPs per example (see module docstring)."""
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
        self.embed.weight.copy_(ens.W_E[e])
        self.pos.copy_(ens.W_pos[e])
        for mine, b in zip(self.blocks, ens.blocks, strict=True):
            a, m = b.attn, b.mlp
            W = torch.stack([a.W_Q[e], a.W_K[e], a.W_V[e]])  # [3, H, d, dh]
            mine.qkv.weight.copy_(W.permute(0, 1, 3, 2).reshape(-1, W.shape[2]))
            mine.qkv.bias.copy_(torch.stack([a.b_Q[e], a.b_K[e], a.b_V[e]]).flatten())
            mine.out.weight.copy_(a.W_O[e].flatten(0, 1).T)
            mine.out.bias.copy_(a.b_O[e])
            mine.fc1.weight.copy_(m.W_in[e].T), mine.fc1.bias.copy_(m.b_in[e])
            mine.fc2.weight.copy_(m.W_out[e].T), mine.fc2.bias.copy_(m.b_out[e])
            for ln, theirs in ((mine.ln1, b.ln1), (mine.ln2, b.ln2)):
                ln.weight.copy_(theirs.w[e]), ln.bias.copy_(theirs.b[e])
        self.ln_f.weight.copy_(ens.ln_final.w[e]), self.ln_f.bias.copy_(ens.ln_final.b[e])
        self.unembed.weight.copy_(ens.W_U[e].T), self.unembed.bias.copy_(ens.b_U[e])
        return self


def busy_seconds() -> float:
    """CPU-seconds all processes have spent busy (from /proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


class Meter:
    """Times a block of work; records wall seconds and other processes' CPU use (cores)."""

    def __enter__(self) -> Meter:
        self.t, self.cpu, self.busy = time.perf_counter(), time.process_time(), busy_seconds()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.t
        mine = time.process_time() - self.cpu
        self.other = max(0.0, (busy_seconds() - self.busy - mine) / self.wall)


def run_naive(cfgs, epochs: int) -> tuple[Meter, list[float]]:
    ref = EnsembleTrainer(cfgs, TrainOptions())  # same data and initial weights as rulelab
    total, losses = 0.0, []
    for e, c in enumerate(cfgs):
        model = NaiveModel(c).load_member(ref.model, e)
        opt = torch.optim.AdamW(model.parameters(), lr=c.lr, betas=(c.beta1, c.beta2),
                                eps=c.eps, weight_decay=c.weight_decay)
        x, y = ref.data.train_x[e], ref.data.train_y[e]

        def step(model=model, opt=opt, x=x, y=y) -> float:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.item()

        step()  # warm-up epoch (untimed)
        with Meter() as m:
            for _ in range(epochs):
                loss = step()
        total += m.wall
        losses.append(loss)
    m.wall = total  # other-load of the last seed stands for the row
    return m, losses


def run_rulelab(cfgs, epochs: int, micro_batch: int = 512, per_ens: int = 0,
                bf16: bool = False) -> tuple[Meter, list[float]]:
    groups = [cfgs[i : i + per_ens] for i in range(0, len(cfgs), per_ens)] if per_ens else [cfgs]
    total, losses = 0.0, []
    for group in groups:
        tr = EnsembleTrainer(group, TrainOptions(micro_batch=micro_batch))
        if bf16:
            fwd = tr.model.forward

            def cast(x, fwd=fwd):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return fwd(x).float()

            tr.model.forward = cast
        tr.train_epoch()  # warm-up epoch (untimed)
        with Meter() as m:
            for _ in range(epochs):
                loss = tr.train_epoch()
        total += m.wall
        losses += loss.tolist()
    m.wall = total
    return m, losses


def matmul_peak(n: int = 2048, reps: int = 5) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(timeit(lambda: a @ b) for _ in range(reps))
    return 2 * n**3 / best / 1e9


def timeit(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def set_mallopt() -> None:
    """No mmap for big blocks, no trimming, 512 MiB top pad (process-wide, irreversible here)."""
    libc = ctypes.CDLL("libc.so.6")
    for param, value in ((-4, 0), (-1, 2**31 - 1), (-2, 512 << 20)):  # MMAP_MAX, TRIM, TOP_PAD
        if libc.mallopt(param, value) != 1:
            raise OSError(f"mallopt({param}, {value}) failed")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3, help="timed epochs per measurement")
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--quick", action="store_true", help="smoke run: n_train 1024, 1 epoch")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    n_train, epochs = (1024, 1) if args.quick else (16384, args.epochs)
    cfgs = [MPSPRunConfig(layers=2, heads=2, d_model=64, d_mlp=128, seq_len=10, vocab=64,
                          n_train=n_train, n_eval=512, epochs=epochs, ratio=0.9, seed=s)
            for s in range(args.seeds)]
    work = n_train * epochs * args.seeds  # seed-examples per measurement
    model_f, exec_b = flops_per_example(cfgs[0], False), flops_per_example(cfgs[0], True)
    print(f"torch {torch.__version__}, threads {args.threads}, load avg {os.getloadavg()}")
    print(f"{args.seeds} seeds × {epochs} epochs × {n_train} examples; FLOP/example (3×): "
          f"model {model_f / 1e6:.3f} M, rulelab executed {exec_b / 1e6:.3f} M")
    peak0 = matmul_peak()
    print(f"fp32 matmul peak (2048³, best of 5): {peak0:.0f} GFLOP/s")

    rows: list[tuple[str, float, float, float]] = []  # name, seed-ex/s, executed FLOP/ex, other

    def record(name: str, m: Meter, exec_f: float) -> float:
        rate = work / m.wall
        rows.append((name, rate, exec_f, m.other))
        print(f"  {name:<34} {rate:9,.0f} seed-ex/s   other load {m.other:.2f} cores", flush=True)
        return rate

    a_rates, b_rates, losses = [], [], {}
    for rep in range(2):
        m, losses["a"] = run_naive(cfgs, epochs)
        a_rates.append(record(f"(a) naive rep {rep + 1}", m, model_f))
        m, losses["b"] = run_rulelab(cfgs, epochs)
        b_rates.append(record(f"(b) rulelab mb512 rep {rep + 1}", m, exec_b))
    for mb in (256, 1024):
        record(f"rulelab mb{mb}", run_rulelab(cfgs, epochs, micro_batch=mb)[0], exec_b)
    record("rulelab 1 seed per ensemble", run_rulelab(cfgs, epochs, per_ens=1)[0], exec_b)
    m, losses["bf16"] = run_rulelab(cfgs, epochs, bf16=True)
    record("rulelab bf16 autocast", m, exec_b)
    set_mallopt()
    m, losses["a_mallopt"] = run_naive(cfgs, epochs)
    record("(a) naive + mallopt", m, model_f)
    record("(b) rulelab mb512 + mallopt", run_rulelab(cfgs, epochs)[0], exec_b)
    record("rulelab mb16384 + mallopt", run_rulelab(cfgs, epochs, micro_batch=n_train)[0],
           exec_b)
    peak = max(peak0, matmul_peak())
    print(f"fp32 matmul peak at end: {matmul_peak():.0f} GFLOP/s; using best {peak:.0f}")

    a, b = max(a_rates), max(b_rates)
    print(f"\nfinal loss after {epochs} epochs, per seed: a {losses['a']}\n  b {losses['b']}")
    for key in ("b", "bf16", "a_mallopt"):
        diff = max(abs(x - y) for x, y in zip(losses["a"], losses[key], strict=True))
        print(f"max |dloss| a vs {key}: {diff:.2e}")
    print(f"\n{'row':<34} {'seed-ex/s':>10} {'x naive':>8} {'model GF/s':>10} "
          f"{'exec GF/s':>9} {'% peak':>6} {'other':>5}")
    for name, rate, exec_f, other in rows:
        print(f"{name:<34} {rate:10,.0f} {rate / a:8.2f} {rate * model_f / 1e9:10.1f} "
              f"{rate * exec_f / 1e9:9.1f} {100 * rate * exec_f / 1e9 / peak:5.1f}% {other:5.2f}")
    print(f"\nb/a (best rep each, default malloc) = {b / a:.2f}  (target ≥ 2); "
          f"a reps {statistics.mean(a_rates):,.0f} mean, b reps {statistics.mean(b_rates):,.0f}"
          f" mean; load avg at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
