"""Learning-order tables over stored runs (SPEC M.4.2): the early lead beside the old reading.

Per run (:func:`order_table`): the early-lead reading of :mod:`.analyses.early_lead`
over the first ``window`` steps (its test needs each run's subset sizes,
:mod:`.analyses.subsets`), and the old 50% / 90% first-crossing reading of
:func:`.analyses.modular_summary.learning_order`, with the run's config.

Per configuration (:func:`order_summary`, runs with α > 0): ``n`` counts every run with a lead
test (none is dropped for staying at low accuracy); ``k_noisy_leads`` of them gained a lead
beyond the subset sampling noise since init (``noisy_leads``), with the share and its 95% Wilson
interval; the mean lead, the lead gained, the first-evaluation lead, the lead at init and the
loss-decrease rates as mean and [min, max] over runs; ``data_seeds``, how many draws of the
data (split and noisy labels) those runs share. The old reading keeps its own count: ``n_50``
runs whose noisy accuracy reached 50% (the old code's ``n``), ``k_50`` of them reached it
strictly before clean-train, with its Wilson interval.

Independent trials (issue 21, item 6). The runs of one configuration differ only in the model
seed, so its interval is over model seeds *for the data seeds it names*. Across configurations
(widths, α) runs share those data seeds — the same noisy examples, the same label collisions —
and are not independent draws of "is the noisy subset fit first": :func:`lead_units` counts one
unit per data seed (leading when most of its runs lead) for the scale-free verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from rulelab.analysis.stats import wilson
from rulelab.studies.coexistence.analyses.early_lead import DEFAULT_WINDOW, lead_readings
from rulelab.studies.coexistence.analyses.modular_summary import learning_order
from rulelab.studies.coexistence.analyses.subsets import subset_sizes
from rulelab.studies.coexistence.analyses.verdicts import scale_free_verdict

ORDER_BY = ("width", "hidden", "activation", "optimizer", "lr", "weight_decay", "p")
RUN_COLUMNS = ("run_id", "task", "noise", "width", "hidden", "activation", "optimizer", "lr",
               "weight_decay", "p", "seed", "data_seed")
MIN_UNITS = 4  # data seeds, all leading: the fewest whose Wilson interval clears 50% (4/4: 51%)


def order_table(runs: pd.DataFrame, metrics: pd.DataFrame, *,
                window: float = DEFAULT_WINDOW) -> pd.DataFrame:
    """One row per finished run: the old crossing columns (``first_train_*``, ``noisy_first_*``,
    ``noisy_lead_*``), the early-lead columns (NaN for α = 0) and the run's config."""
    runs = runs[runs["status"].astype(str) == "done"] if "status" in runs else runs
    metrics = metrics[metrics["run_id"].isin(runs["run_id"])]
    keep = [c for c in RUN_COLUMNS if c in runs.columns]
    old = learning_order(metrics)
    new = lead_readings(metrics, window=window, sizes=subset_sizes(runs))
    return old.merge(new, on="run_id", how="left").merge(runs[keep], on="run_id", how="left")


def _truth(values: pd.Series) -> pd.Series:
    """True/False/None/NaN (as stored, or read back from Parquet) → bool; missing is False."""
    return values.map(lambda v: bool(v) if v is not None and v == v else False).astype(bool)


def _count(flags: pd.Series, valid: pd.Series) -> dict:
    k, n = int((_truth(flags) & valid).sum()), int(valid.sum())
    lo, hi = wilson(k, n)
    return {"k": k, "n": n, "rate": k / n if n else np.nan, "ci_low": lo, "ci_high": hi}


def _data_seeds(g: pd.DataFrame) -> int:
    """Distinct data seeds among ``g``'s runs; a frame without the column ran at the default,
    one shared seed."""
    if "data_seed" not in g:
        return 1
    return max(1, int(g["data_seed"].nunique()))


def lead_units(noisy: pd.DataFrame, leads: pd.Series) -> tuple[int, int]:
    """``(k, n)``: of the ``n`` data seeds among the α > 0 runs ``noisy``, ``k`` in which more
    than half the runs lead (``leads``, one bool per row) — the independent units of the
    scale-free verdict (module docstring)."""
    seeds = noisy["data_seed"] if "data_seed" in noisy else pd.Series(0, noisy.index)
    share = leads.astype(float).groupby(seeds.fillna(0).to_numpy()).mean()
    return int((share > 0.5).sum()), int(len(share))


def lead_verdict(noisy: pd.DataFrame, leads: pd.Series) -> str:
    """Scale-free verdict of the early lead (:func:`.analyses.verdicts.scale_free_verdict`)
    over data seeds (:func:`lead_units`), saying so when there are too few to decide."""
    k, n = lead_units(noisy, leads)
    verdict = scale_free_verdict(k, n)
    if verdict == "inconclusive" and n < MIN_UNITS:
        verdict += (f" ({k}/{n} data seeds lead; the runs of one data seed share its noisy "
                    f"labels, so each seed is one trial: ≥ {MIN_UNITS} are needed)")
    return verdict


def _spread(values: pd.Series, name: str) -> dict:
    v = pd.to_numeric(values, errors="coerce").dropna()
    nan = np.nan
    return {f"{name}_mean": v.mean() if len(v) else nan, f"{name}_min": v.min() if len(v) else nan,
            f"{name}_max": v.max() if len(v) else nan}


def order_summary(order: pd.DataFrame, by: Sequence[str] | None = None) -> pd.DataFrame:
    """Per configuration of the α > 0 runs (``noise`` and every column of :data:`ORDER_BY` that
    varies, unless ``by`` is given): the new readings and the old one, each with its own n."""
    noisy = order[order["noise"] > 0] if "noise" in order else order
    if by is None:
        by = ["noise", *(c for c in ORDER_BY if c in noisy.columns
                         and noisy[c].nunique(dropna=False) > 1)]
    rows = []
    for key, g in noisy.groupby(list(by), dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key, strict=True))
        flags = g.get("noisy_leads", pd.Series(None, g.index))
        tested = flags.map(lambda v: v is not None and v == v)
        lead = _count(flags, tested)
        row.update(n=lead["n"], k_noisy_leads=lead["k"], share_noisy_leads=lead["rate"],
                   ci_low=lead["ci_low"], ci_high=lead["ci_high"],
                   window=g["window"].dropna().iloc[0] if g["window"].notna().any() else np.nan,
                   data_seeds=_data_seeds(g))
        row.update(_spread(g["lead_area"], "lead"))
        row.update(_spread(g["lead_gain"], "gain"))
        row.update(_spread(g["first_lead"], "first_lead"))
        row.update(_spread(g["init_lead"], "init_lead"))
        row["k_first_lead"] = int((pd.to_numeric(g["first_lead"]) > 0).sum())
        for s in ("noisy", "clean"):
            row[f"loss_rate_{s}"] = pd.to_numeric(g[f"loss_rate_{s}"]).mean()
        faster = pd.to_numeric(g["loss_rate_noisy"]) > pd.to_numeric(g["loss_rate_clean"])
        row["k_noisy_loss_faster"] = int(faster.sum())
        reached = g["first_train_noisy_50"].notna()
        old = _count(g["noisy_first_50"], reached)
        row.update(n_50=old["n"], k_50=old["k"], share_50=old["rate"], ci_low_50=old["ci_low"],
                   ci_high_50=old["ci_high"])
        for s in ("clean", "noisy"):
            row[f"step_{s}_50"] = g[f"first_train_{s}_50"].mean()
        rows.append(row)
    return pd.DataFrame(rows)


def _pct(v: float) -> str:
    return "–" if v != v else f"{100 * v:+.1f}"


def _rate(k: int, n: int, lo: float, hi: float) -> str:
    return "— (0/0)" if n == 0 else f"{k}/{n} = {k / n:.0%} [{lo:.0%}, {hi:.0%}]"


def order_display(summary: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(new, old)`` frames of readable strings for the CLI and the report.

    New: runs where noisy gains a lead beyond the sampling noise since init (k/n over model
    seeds, share, Wilson CI) and the data seeds they share, the mean lead, the lead gained since
    init, the first-evaluation lead and the lead at init (the untrained network's chance offset)
    in accuracy points as mean [min, max] over runs, and the loss-decrease rates (per step, mean
    over runs). Old: the 50% first-crossing reading with its own n.
    """
    if summary.empty:
        return summary, summary
    keys = [c for c in summary.columns if c in ("noise", *ORDER_BY)]
    new, old = summary[keys].copy(), summary[keys].copy()
    new["window"] = summary["window"].map(lambda v: "–" if v != v else f"{v:g}")
    new["noisy gains a lead since init (k/n model seeds, 95% CI)"] = [
        _rate(r.k_noisy_leads, r.n, r.ci_low, r.ci_high) for r in summary.itertuples()]
    new["data seeds"] = summary["data_seeds"]
    for col, name in (("lead", "mean lead, pts [min, max]"),
                      ("gain", "lead gained since init, pts [min, max]"),
                      ("first_lead", "first-eval lead, pts [min, max]"),
                      ("init_lead", "lead at init, pts [min, max]")):
        new[name] = [f"{_pct(m)} [{_pct(lo)}, {_pct(hi)}]" for m, lo, hi in
                     zip(summary[f"{col}_mean"], summary[f"{col}_min"], summary[f"{col}_max"],
                         strict=True)]
    new["mean −dloss/dstep, noisy | clean"] = [
        f"{a:.3g} | {b:.3g}" for a, b in zip(summary["loss_rate_noisy"],
                                            summary["loss_rate_clean"], strict=True)]
    old["noisy first to 50% (k/n, 95% CI)"] = [
        _rate(r.k_50, r.n_50, r.ci_low_50, r.ci_high_50) for r in summary.itertuples()]
    old["runs left out (noisy < 50%)"] = summary["n"] - summary["n_50"]
    for s in ("noisy", "clean"):
        old[f"mean step to 50%, {s}"] = summary[f"step_{s}_50"].map(
            lambda v: "–" if v != v else f"{v:.0f}")
    return new, old
