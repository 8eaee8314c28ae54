"""The plain-script baseline of ``bench/command_throughput.py`` (DESIGN §6), run as a process.

What a user would write without rulelab for the same work as ``rulelab train mpsp --seeds S
--epochs N`` at the paper's config (2L, d_model 64, 2 heads, d_mlp 128, n = 10, V = 64, full
batch 16,384, AdamW lr 1e-3 wd 0.1, β2 0.999 — rulelab's defaults): for each seed one after
another, build the same MPSP splits, a plain nn.Module (bench/naive_model.py) and
torch.optim.AdamW, train N full-batch epochs, and evaluate train / val / adv loss and accuracy
at epoch 0, every ``eval_every`` epochs and at the end, as rulelab does. Prints one JSON line
with the final accuracies.

    python bench/naive_train.py --seeds 2 --epochs 20
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F

from naive_model import NaiveModel
from rulelab.studies.shortcut_saturation.config import MPSPRunConfig
from rulelab.tasks.mpsp import mpsp_from_config


@torch.no_grad()
def evaluate(model, splits) -> dict[str, float]:
    out = {}
    for name, (x, y) in splits.items():
        logits = model(x)
        out[f"{name}_loss"] = F.cross_entropy(logits, y).item()
        out[f"{name}_acc"] = (logits.argmax(-1) == y).float().mean().item()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--layers", type=int, default=2)
    # The ladder's rungs (issue 25 goal 4) change the shape and the data; defaults: the paper's.
    for flag in ("d_model", "d_mlp", "n_train", "heads", "eval_every"):
        ap.add_argument(f"--{flag.replace('_', '-')}", type=int, default=None)
    ap.add_argument("--ratio", type=float, default=None)
    args = ap.parse_args()
    shape = {k: getattr(args, k) for k in ("d_model", "d_mlp", "n_train", "heads", "ratio",
                                           "eval_every") if getattr(args, k) is not None}
    results = []
    for seed in range(args.seeds):
        c = MPSPRunConfig(layers=args.layers, seed=seed, epochs=args.epochs, **shape)
        data = mpsp_from_config(c)
        splits = {k: (torch.tensor(data[k].x), torch.tensor(data[k].label))
                  for k in ("train", "val", "adv")}
        torch.manual_seed(seed)
        model = NaiveModel(c)
        opt = torch.optim.AdamW(model.parameters(), lr=c.lr, betas=(c.beta1, c.beta2),
                                eps=c.eps, weight_decay=c.weight_decay)
        x, y = splits["train"]
        metrics = evaluate(model.eval(), splits)
        model.train()
        for epoch in range(1, c.epochs + 1):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            if epoch % c.eval_every == 0 or epoch == c.epochs:
                metrics = evaluate(model.eval(), splits)
                model.train()
        results.append(metrics)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
