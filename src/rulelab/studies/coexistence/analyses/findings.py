"""Study M's claims checked against a lab: readings always, verdicts only where they mean
something (SPEC M.4; ``rulelab reproduce coexistence``).

Every row has ``claim, paper, here, verdict``. ``here`` is the reading: per-run values as mean
[min, max] over seeds with n, and counts of runs meeting the claim with a 95% Wilson interval.
``verdict`` is printed only where it can be earned:

- **At the paper's setting** (:func:`.analyses.scale.matches_paper`, decided from the
  runs' config values): every claim, "reproduced" when all of at least 3 runs meet it, "partly"
  when some do, "not reproduced" when none does, "inconclusive" with fewer than 3 runs.
- **Scale-free claims, at any scale:** only the learning order (M.4.2). It is a statement about
  the first steps of full-batch training from a small random init — which examples the
  full-batch gradient fits first — not about where training ends: the authors' account (their
  companion paper's label-collision count, Δ_noise = 2(1 − 1/P) vs Δ_clean = 2α(1 − 1/P)) holds
  for any P and width, and the reading needs no converged network. Every study-M run is full
  batch. Its verdict is "reproduced" when the Wilson interval of the share of α > 0 runs in which
  noisy leads over the early window lies above 50%, "not reproduced" when it lies below, else
  "inconclusive". (The window is in steps; a larger lr compresses the time axis, so the reading
  holds for the window it states.)
- **Not scale-free, so a "reading" elsewhere:** FF's G being near-perfect and R keeping the noise
  (M.4.3) need the run to have learned the Fourier rule, which depends on P, steps and
  regularization; the activation swap (M.4.4) and the partition-vs-FF gap (M.4.5) read the
  learned weights and inherit that; the double descent (M.4.1) depends on where the
  interpolation threshold falls in the width grid. "G ≥ R on test" is *not* an identity of FF:
  FF's identities are G + R = the original weights and G = the original network for one
  frequency per neuron (the analytic solution, tested in
  tests/studies/coexistence/test_fourier.py); neither says anything about a trained network,
  so they are tests, not claims.
"""

from __future__ import annotations

import pandas as pd

from rulelab.analysis.stats import format_rate
from rulelab.studies.coexistence.analyses.dd_dip import dip_reading
from rulelab.studies.coexistence.analyses.order import lead_verdict
from rulelab.studies.coexistence.analyses.scale import matches_paper
from rulelab.studies.coexistence.analyses.verdicts import (  # noqa: F401 (re-exported)
    INCONCLUSIVE,
    MIN_RUNS,
    NOT,
    PARTLY,
    READING,
    REPRODUCED,
    paper_verdict,
    scale_free_verdict,
)


def spread(values: pd.Series, pct: bool = True) -> str:
    """``"95.1% [93.0%, 97.2%] (n = 2)"``: mean [min, max] over runs."""
    v = pd.to_numeric(values, errors="coerce").dropna()
    if v.empty:
        return "– (n = 0)"
    f = (lambda x: f"{x:.1%}") if pct else (lambda x: f"{100 * x:+.1f}")
    return f"{f(v.mean())} [{f(v.min())}, {f(v.max())}] (n = {len(v)})"


def per_run(frame: pd.DataFrame, **where) -> pd.Series:
    """``acc`` per ``run_id`` of the rows matching ``where`` (one row per run expected)."""
    for k, v in where.items():
        frame = frame[frame[k] == v]
    if frame.empty:
        return pd.Series(dtype=float)
    return frame.groupby("run_id")["acc"].mean()


def _order_row(order: pd.DataFrame) -> tuple:
    noisy = order[order["noise"] > 0]
    has = noisy["lead_area"].notna()
    leads = noisy["noisy_leads"].map(lambda v: bool(v) if v is not None and v == v else False)
    k, n = int((leads & has).sum()), int(has.sum())
    window = noisy["window"].dropna()
    T = f"{window.iloc[0]:g}" if len(window) else "?"
    first = pd.to_numeric(noisy["first_lead"], errors="coerce")
    faster = (pd.to_numeric(noisy["loss_rate_noisy"], errors="coerce")
              > pd.to_numeric(noisy["loss_rate_clean"], errors="coerce"))
    reached = noisy["first_train_noisy_50"].notna()
    k50 = int((noisy["noisy_first_50"].astype(bool) & reached).sum())
    here = (f"over the first {T} steps noisy-train accuracy (vs the corrupted labels) leads "
            f"clean-train in {format_rate(k, n)} of runs with α > 0; mean lead in points "
            f"{spread(noisy['lead_area'], pct=False)}; at the first evaluation noisy is ahead "
            f"in {int((first > 0).sum())}/{int(first.notna().sum())} runs (lead in points "
            f"{spread(first, pct=False)}; at init {spread(noisy['init_lead'], pct=False)}, "
            f"chance offsets); the noisy loss falls faster in "
            f"{int(faster.sum())}/{n}. Old reading (first to 50%): noisy first in "
            f"{format_rate(k50, int(reached.sum()))}, leaving out "
            f"{int((~reached).sum())} run(s) whose noisy accuracy never reached 50%")
    return ("noisy labels are fit first (M.4.2; scale-free)",
            "yes, early in full-batch training (AdamW, Adam, Muon; MNIST epoch 1: noisy 10.9% "
            "vs clean 2.9%)", here, lead_verdict(noisy, leads & has) if n else INCONCLUSIVE)


def findings(runs: pd.DataFrame, order: pd.DataFrame, ff: pd.DataFrame, swap: pd.DataFrame,
             neurons: pd.DataFrame, dd: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per claim (module docstring) at the largest width and highest noise of the lab."""
    from rulelab.studies.coexistence.analyses.tables import best_pruned, dd_table

    paper = matches_paper(runs)

    def verdict(k: int, n: int) -> str:
        return paper_verdict(k, n) if paper else READING

    M, a = int(runs["width"].max()), float(runs["noise"].max())
    at = dict(width=M, noise=a)
    p = int(runs["p"].iloc[0])
    rows = [_order_row(order)]

    g, o = per_run(ff, network="G", subset="test", **at), per_run(ff, network="original",
                                                                  subset="test", **at)
    k = int((g >= 0.95).sum())
    rows.append((f"FF: G near-perfect on test at heavy noise (M.4.3; here α = {a:g}, M = {M})",
                 "≈100% test at α = 0.8", f"G test {spread(g)} vs the original {spread(o)}; "
                 f"runs with G ≥ 95%: {format_rate(k, len(g))}", verdict(k, len(g))))

    rn, gn = (per_run(ff, network=net, subset="train_noisy", **at) for net in ("R", "G"))
    both = pd.concat({"R": rn, "G": gn}, axis=1).dropna()
    k = int(((both["R"] >= 0.5) & (both["G"] <= 0.2)).sum())
    rows.append(("FF: R keeps the memorized noise (M.4.3)", "R fits the noisy labels, G does not",
                 f"noisy-train acc (vs corrupted labels): R {spread(rn)}, G {spread(gn)}; runs "
                 f"with R ≥ 50% and G ≤ 20%: {format_rate(k, len(both))}",
                 verdict(k, len(both))))

    relu_t, relu_n = (per_run(swap, activation_eval="relu", subset=s, **at)
                      for s in ("test", "train_noisy"))
    parts, ok = [], pd.Series(True, index=relu_t.index)
    for act in ("quadratic", "reverse_relu"):
        t, nz = (per_run(swap, activation_eval=act, subset=s, **at) for s in ("test",
                                                                              "train_noisy"))
        parts.append(f"{act}: test {spread(t)}, noisy {spread(nz)}")
        ok &= (t >= relu_t - 0.02) & (nz <= relu_n - 0.1)
    k = int(ok.sum())
    chance = (f" (the raw test accuracy is near chance, 1/P = {1 / p:.1%}, so 'kept' says "
              "little here)" if len(relu_t) and relu_t.mean() < 2 / p else "")
    rows.append(("activation swap keeps test, drops memorization (M.4.4)",
                 "ReLU → quadratic / reverse ReLU: test kept or better, noisy acc drops",
                 f"relu: test {spread(relu_t)}, noisy {spread(relu_n)}; " + "; ".join(parts)
                 + f"; runs where both swaps keep test (−2 points) and drop noisy (−10 points): "
                 f"{format_rate(k, len(ok))}" + chance, verdict(k, len(ok))))

    best = best_pruned(neurons[(neurons["width"] == M) & (neurons["noise"] == a)])
    best = best.groupby("run_id")["acc"].max() if len(best) else pd.Series(dtype=float)
    top_ff = per_run(neurons, kind="partition", network="top_ff", subset="test", **at)
    both = pd.concat({"best": best, "top_ff": top_ff, "G": g}, axis=1).dropna()
    k = int(((both["best"] <= both["G"] - 0.1) & (both["top_ff"] < both["G"])).sum())
    rows.append(("partition helps far less than FF (M.4.5)", "IPR / Str subnetworks: marginal "
                 "gains; FF on the top subnetwork < FF on the whole network",
                 f"best top-first pruned subnetwork test {spread(best)}; FF on the top half "
                 f"{spread(top_ff)}; FF on all {spread(g)}; runs where the best subnetwork is "
                 f"≥ 10 points below FF and FF on the top half is below FF on all: "
                 f"{format_rate(k, len(both))}", verdict(k, len(both))))

    dd = dd_table(runs) if dd is None else dd
    dips = dip_reading(dd)
    dip = dips[dips["noise"] == a] if "noise" in dips else dips
    called = bool(dip["called"].all()) if len(dip) else False
    here = "; ".join(dip["reading"]) if len(dip) else "no finished runs"
    rows.append((f"double descent: test dips near interpolation, then rises with width "
                 f"(M.4.1; α = {a:g})", "second descent: test rises with width up to M = 4097",
                 here, (REPRODUCED if called else NOT) if paper else READING))
    return pd.DataFrame(rows, columns=["claim", "paper", "here", "verdict"])

