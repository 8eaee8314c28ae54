"""Study S's ``rulelab analyze`` commands (declared in :mod:`.analyses`): each runs one analysis
over all members of every stored ensemble (final weights, or snapshots with ``--epochs``),
stores a tidy table under ``<lab>/analyses/<name>/`` and prints a short summary (SPEC S.4)."""

from __future__ import annotations

import pandas as pd

from rulelab.analysis.stored import analyze_stored
from rulelab.report.terminal import console, print_frame, progress_line

TASK = "mpsp"
COLUMNS = ("layers", "heads", "ratio", "weight_decay", "seed")  # stored beside each row


def _stored(lab, name: str, analysis, epochs: str) -> pd.DataFrame:
    return analyze_stored(lab, name, analysis, task=TASK, columns=COLUMNS, epochs=epochs,
                          on_step=progress_line)


def gradients(lab, *, epochs: str = "final") -> None:
    from rulelab.studies.shortcut_saturation.analyses.gradients import gradient_conflict

    frame = _stored(lab, "gradients", lambda tr: gradient_conflict(tr.model, tr.data), epochs)
    print_gradient_summary(frame)


def print_gradient_summary(frame: pd.DataFrame, by=("layers", "ratio", "epoch")) -> None:
    """Median readings per group with ε and the identity-dominated count (issues 8, 21: each
    run flagged on its own ε; † where at least half the runs behind the medians are), and the
    saturated-loss count (issue 11): a group whose every run is saturated is marked ‡ (its
    median is rounding noise) instead of †; otherwise its medians leave saturated runs out."""
    from rulelab.studies.shortcut_saturation.analyses.identity import EPS_IDENTITY, identity_bounds
    from rulelab.studies.shortcut_saturation.analyses.saturation import LEGEND, MARK
    from rulelab.studies.shortcut_saturation.analyses.tables import (
        ALL_SATURATED,
        MOSTLY_PINNED,
        gradient_summary,
    )

    # a lab with several head counts or weight decays (medium + medium-s5s6) gets a row per
    # value: a median over both decays would mix a saturated cell with a healthy one
    split = [c for c in ("heads", "weight_decay") if c in frame.columns and c not in by
             and frame[c].nunique() > 1]
    summary = gradient_summary(frame, (*by[:-1], *split, by[-1]))
    noise = summary[ALL_SATURATED].astype(bool)
    # † where the identity g = r·g+ + (1−r)·g− pins down most runs' readings (per run, not the
    # median ε: issue 21); ‡ overrides: there neither the reading nor its ε means anything
    pinned = summary[MOSTLY_PINNED].astype(bool)
    for col in ("cos", "amplification"):
        summary[col] = [f"{v:.3g}{f' {MARK}' if z else ' †' if p else ''}" for v, p, z in
                        zip(summary[col], pinned, noise, strict=True)]
    summary = summary.drop(columns=["norm_plus", "norm_minus", ALL_SATURATED, MOSTLY_PINNED],
                           errors="ignore").rename(
        columns={"example_norm_plus": "‖∇ℓ_i‖ S+", "example_norm_minus": "‖∇ℓ_i‖ S−"})
    print_frame("gradient conflict and amplification (all parameters; median over seeds)",
                summary)
    lo, hi, cmax = identity_bounds(EPS_IDENTITY)
    console.print(f"† at least half the row's runs identity-dominated (each run's ε = "
                  f"‖g‖/(r‖g+‖) < {EPS_IDENTITY:.3f}): g = r·g+ + (1−r)·g− alone puts its "
                  f"‖g−‖/‖g+‖ within {lo:.2f}–{hi:.2f} × r/(1−r) and cos(g+, g−) ≤ −√(1 − ε²) "
                  f"≤ −{abs(cmax):.2f}, so these readings do not show a mechanism. "
                  f"{LEGEND} (every run of the row). saturated: runs with a saturated loss, left "
                  "out of the medians unless all are (\"?\": stored before the flag; re-run "
                  "rulelab analyze gradients); identity_dominated: the other runs with ε below "
                  "the threshold (undefined: ε is NaN, an empty group — counted apart); "
                  "‖∇ℓ_i‖: mean per-example gradient norm per group.",
                  style="dim")


def ablation(lab, *, epochs: str = "final") -> None:
    from rulelab.studies.shortcut_saturation.analyses.ablation import ablation_table

    frame = _stored(lab, "ablation", lambda tr: ablation_table(tr.model, tr.data), epochs)
    mean = frame[(frame["method"] == "mean") & (frame["where"] == "cls")]
    summary = (mean.groupby(["layers", "ratio", "epoch", "layer", "component"])
               [["d_val_acc", "d_adv_acc"]].mean().reset_index())
    print_frame("mean ablation at CLS: Δ accuracy (mean over seeds)", summary)


def phases(lab) -> None:
    from rulelab.studies.shortcut_saturation.analyses.phases import phase_table

    runs = lab.runs()
    table = phase_table(lab.read_metrics(list(runs["run_id"])), runs=runs)  # k, r per run
    cols = [c for c in ("layers", "heads", "ratio", "weight_decay", "seed") if c in runs.columns]
    table = table.merge(runs[["run_id", *cols]], on="run_id", how="left")
    lab.write_table("phases", "all", table)
    shown = [*cols, "phase1_epoch", "phase1_map", "phase2_onset", "phase2_censored", "gen_epoch",
             "transient"]
    print_frame("phases per run", table[[c for c in shown if c in table.columns]])


def patching(lab, *, epochs: str = "final", n: int = 256) -> None:
    from rulelab.studies.shortcut_saturation.analyses.tables import patching_table

    frame = _stored(lab, "patching", lambda tr: patching_table(tr, n), epochs)
    print_patching_summary(frame, lab)


def print_patching_summary(frame: pd.DataFrame, lab) -> None:
    """Medians over runs, split by whether each run generalized (issue 8)."""
    from rulelab.studies.shortcut_saturation.analyses.patching import REL_GAP
    from rulelab.studies.shortcut_saturation.analyses.tables import patching_summary
    from rulelab.studies.shortcut_saturation.summary_frames import upgrade_runs

    runs = upgrade_runs(lab.runs(), lab.read_metrics)
    summary = patching_summary(frame, runs).drop(columns=["pos"])
    print_frame("patching: normalised logit difference recovered (1 = twin), median over runs "
                "by outcome", summary)
    console.print(f"outcome: the run's generalized flag (val and adv 100% at one evaluation); "
                  f"n_nan: runs without a score (twin–original gap < {REL_GAP:g} × "
                  "(|LD_twin| + |LD_orig|))", style="dim")


def fingerprints(lab, *, epochs: str = "final") -> None:
    from rulelab.studies.shortcut_saturation.analyses.tables import fingerprint_table

    frame = _stored(lab, "fingerprints", fingerprint_table, epochs)
    cols = [c for c in ("qk_rho", "first_mass", "ov_parity_rho", "ov_probe_acc") if c in frame]
    summary = (frame.groupby(["layers", "ratio", "epoch", "layer", "head"])[cols]
               .mean().reset_index())
    print_frame("fingerprints per head (mean over seeds)", summary)
    console.print("ov_parity_rho reads the head's direct path to the logits; ov_probe_acc: "
                  "held-out-value linear probe of v mod k on what the head writes (any "
                  "reader; chance ≈ 1/k)", style="dim")
    print_probe_band(lab)


def print_probe_band(lab) -> None:
    """The OV probe's null band beside its readings (issue 21): random heads at init, at each
    shape the lab holds (:mod:`.analyses.probe_null`) — a head's probe reads "writes the
    residue" only above the band."""
    from rulelab.studies.shortcut_saturation.analyses.probe_null import null_band
    from rulelab.study_registry import config_from_flat

    shapes = {}  # one config per model shape and data setting: the band depends on nothing else
    for row in lab.runs_json():
        if row["config"].get("task") == TASK:
            cfg = config_from_flat(row["config"])
            shapes.setdefault((cfg.layers, cfg.heads, cfg.d_model, cfg.vocab, cfg.label_mod), cfg)
    for cfg in shapes.values():
        mean, p95 = null_band(cfg)
        console.print(f"OV probe null band ({cfg.layers}L·{cfg.heads}H, d_model {cfg.d_model}, "
                      f"V = {cfg.vocab}, k = {cfg.label_mod}): random heads at init score "
                      f"{mean:.2f} on average, 97.5% of them at or below {p95:.2f}: "
                      + ("no head can score above it, so the probe calls nothing here"
                         if p95 >= 1.0 else "read a head as writing the residue only above it"),
                      style="dim")
