"""Does bf16 change the science? Two labs of the same recipe, one per precision (issue 13,
goal 3): run by run (the run ids match: precision is a setting, not part of a run's config),
the share of runs whose outcome agrees, and the rates side by side with 95% Wilson intervals.

Outcomes compared, study M (the labs need `rulelab analyze order` and `rulelab analyze ff`):
  generalized      the run's summary flag (test accuracy ≥ 99% at an evaluation)
  noisy leads      learning order: noisy-train accuracy (vs the corrupted labels) leads
                   clean-train over the first 100 steps (`order`'s noisy_leads)
  test, G test     final test accuracy of the network and of FF's G network: |Δ| in points,
                   and whether they agree within 1 point
  noisy fit        final accuracy on the noisy training labels (memorization), |Δ| in points

Study S (mpsp labs, the run summaries only):
  generalized      val and adv 100% at one evaluation (the corrected criterion), and the
                   first epoch it happened (agrees when both never, or within one evaluation)
  adv 100%         adv accuracy 100% at one evaluation (a flipped shortcut counts here too)
  val, adv         final accuracies: |Δ| in points

  python bench/bf16_outcomes.py LAB_FP32 LAB_BF16
  python bench/bf16_outcomes.py LAB_CPU LAB_GPU    # the floor: fp32 on two devices (rounding)

bench/gpu_bf16_science.sh trains the two labs on a GPU (study M's quick preset);
bench/bf16_cpu_science.py trains them on the CPU (study S's quick preset, bf16 emulated where the
CPU has no bf16 matmul: the same readings, not the same speed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

import rulelab
from rulelab.analysis.stats import format_rate

AGREE_POINTS = 1.0  # two accuracies "agree" within 1 point (the quick test split: 192 pairs)


def outcomes(path: str) -> pd.DataFrame:
    """One row per finished run: its outcomes, indexed by run id."""
    lab = rulelab.load(path)
    runs = lab.runs[lab.runs["status"] == "done"].set_index("run_id")
    out = runs[["noise", "width", "seed", "generalized", "final_test_acc", "final_noisy_acc"]]
    order = lab.analyses["order"].set_index("run_id")["noisy_leads"]
    ff = lab.analyses["ff"]
    g = ff[(ff["network"] == "G") & (ff["subset"] == "test")]
    g = g.sort_values("epoch").groupby("run_id")["acc"].last()
    return out.assign(noisy_leads=order, g_test=g)


def agree(g: pd.DataFrame, col: str) -> int:
    """Runs of ``g`` whose boolean outcome ``col`` is the same in both precisions."""
    return int((g[f"{col}_fp32"].astype(bool) == g[f"{col}_bf16"].astype(bool)).sum())


def delta(g: pd.DataFrame, col: str) -> pd.Series:
    """|fp32 − bf16| of accuracy ``col``, in points."""
    return 100 * (g[f"{col}_fp32"] - g[f"{col}_bf16"]).abs()


def shortcut_outcomes(path: str) -> pd.DataFrame:
    """Study S: one row per finished run, indexed by run id."""
    lab = rulelab.load(path)
    runs = lab.runs[lab.runs["status"] == "done"].set_index("run_id")
    return runs[["layers", "ratio", "seed", "eval_every", "generalized", "first_epoch_generalized",
                 "adv_generalized", "final_val_acc", "final_adv_acc"]]


def compare_shortcut(fp32_path: str, bf16_path: str) -> None:
    """Study S: per cell, how many runs agree on each outcome, and the rates side by side."""
    a, b = shortcut_outcomes(fp32_path), shortcut_outcomes(bf16_path)
    both = a.add_suffix("_fp32").join(b.add_suffix("_bf16"), how="inner")
    print(f"{len(both)} runs in both labs: A = {fp32_path}, B = {bf16_path}\n")
    first = both[["first_epoch_generalized_fp32", "first_epoch_generalized_bf16"]]
    same_first = (first.isna().all(axis=1)
                  | ((first.iloc[:, 0] - first.iloc[:, 1]).abs() <= both["eval_every_fp32"]))
    rows = []
    for (layers, ratio), g in [*both.groupby(["layers_fp32", "ratio_fp32"]), (("all", ""), both)]:
        n = len(g)
        rows.append({
            "cell": f"{layers}L r={ratio}" if ratio != "" else "all", "runs": n,
            "generalized agrees": f"{agree(g, 'generalized')}/{n}",
            "first epoch agrees": f"{int(same_first[g.index].sum())}/{n}",
            "adv 100% agrees": f"{agree(g, 'adv_generalized')}/{n}",
            "val within 1 pt": f"{int((delta(g, 'final_val_acc') <= AGREE_POINTS).sum())}/{n}",
            "max |Δ val| pt": f"{delta(g, 'final_val_acc').max():.1f}",
            "adv within 1 pt": f"{int((delta(g, 'final_adv_acc') <= AGREE_POINTS).sum())}/{n}",
            "max |Δ adv| pt": f"{delta(g, 'final_adv_acc').max():.1f}",
        })
    print(pd.DataFrame(rows).to_string(index=False))
    print("\nrates side by side, A | B (95% Wilson intervals)")
    for (layers, ratio), g in both.groupby(["layers_fp32", "ratio_fp32"]):
        for col, name in (("generalized", "generalized"), ("adv_generalized", "adv 100%")):
            fp, bf = (int(g[f"{col}_{p}"].astype(bool).sum()) for p in ("fp32", "bf16"))
            print(f"  {layers}L r = {ratio:g}  {name:<12} A {format_rate(fp, len(g)):<22} "
                  f"B {format_rate(bf, len(g))}")


def main(fp32_path: str, bf16_path: str) -> None:
    if rulelab.load(fp32_path).runs["task"].iloc[0] == "mpsp":
        compare_shortcut(fp32_path, bf16_path)
        return
    a, b = outcomes(fp32_path), outcomes(bf16_path)
    both = a.add_suffix("_fp32").join(b.add_suffix("_bf16"), how="inner")
    na, nb = Path(fp32_path).name, Path(bf16_path).name
    print(f"{len(both)} runs in both labs: A = {fp32_path}, B = {bf16_path}\n")
    rows = []
    for noise, g in [*both.groupby("noise_fp32"), ("all", both)]:
        n, noisy = len(g), g[g["noise_fp32"] > 0]  # learning order needs noisy labels
        rows.append({
            "α": noise, "runs": n,
            "generalized agrees": f"{agree(g, 'generalized')}/{n}",
            "noisy-leads agrees": f"{agree(noisy, 'noisy_leads')}/{len(noisy)}" if len(noisy)
            else "–",
            "test within 1 pt": f"{int((delta(g, 'final_test_acc') <= AGREE_POINTS).sum())}/{n}",
            "max |Δ test| pt": f"{delta(g, 'final_test_acc').max():.1f}",
            "G test within 1 pt": f"{int((delta(g, 'g_test') <= AGREE_POINTS).sum())}/{n}",
            "max |Δ G test| pt": f"{delta(g, 'g_test').max():.1f}",
            "max |Δ noisy fit| pt": f"{delta(noisy, 'final_noisy_acc').max():.1f}" if len(noisy)
            else "–",
        })
    print(pd.DataFrame(rows).to_string(index=False))
    print("\nrates side by side, A | B (95% Wilson intervals)")
    for noise, g in both.groupby("noise_fp32"):
        for col, name in (("generalized", "generalized"), ("noisy_leads", "noisy leads")):
            if col == "noisy_leads" and noise == 0:
                continue
            fp, bf = (int(g[f"{col}_{p}"].astype(bool).sum()) for p in ("fp32", "bf16"))
            print(f"  α = {noise:g}  {name:<12} A {format_rate(fp, len(g)):<22} "
                  f"B {format_rate(bf, len(g))}")
    wide = both[both["width_fp32"] == both["width_fp32"].max()]
    for noise, g in wide.groupby("noise_fp32"):
        print(f"  α = {noise:g}  G test at width {int(g['width_fp32'].iloc[0])}: A ({na}) "
              f"{100 * np.mean(g['g_test_fp32']):.1f}%, B ({nb}) "
              f"{100 * np.mean(g['g_test_bf16']):.1f}% (mean of {len(g)} seeds)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python bench/bf16_outcomes.py LAB_FP32 LAB_BF16")
    main(*sys.argv[1:])
