"""Every verdict calibrated (issue 21): a detector's false-positive rate under its null.

A reading that says "shows", "called", "onset" or "reproduced" is a detector; it is only as
good as how often it fires when nothing is there. A study declares, per detector, a function
that simulates that detector's *null* — flat curves with the measured seed and test-set noise,
frozen networks, random heads — at the grid and seed count of the lab or preset at hand, runs
the detector itself on each simulated case, and returns a :class:`NullCheck`: how many of the
simulated nulls were called (the false-positive rate, with its Wilson interval) and how many of
the simulated true effects of a stated size were (the power). ``rulelab calibrate STUDY``
prints them; the bar is a false-positive rate of at most :data:`MAX_FPR`.

This module names no study: the nulls are the studies' own (``Study.calibrations``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rulelab.analysis.stats import wilson

MAX_FPR = 0.05  # the bar: a detector calls at most 5% of its nulls


@dataclass(frozen=True)
class NullCheck:
    """One detector checked against its null at one setting."""

    null: str  # the null simulated, in words ("flat curves: no dip, 2 seeds, test n = 192")
    setting: str  # the grid / seeds / evaluation sizes it was simulated at
    n_null: int  # simulated null cases
    false_positives: int  # of them, called by the detector
    effect: str = ""  # the true effect simulated for the power, in words ("" when none)
    n_effect: int = 0
    detected: int = 0  # of the effect cases, called
    note: str = ""  # e.g. "too few seeds to call: 3 would reach 5%"

    @property
    def fpr(self) -> float:
        return self.false_positives / self.n_null if self.n_null else float("nan")

    @property
    def fpr_interval(self) -> tuple[float, float]:
        return wilson(self.false_positives, self.n_null)

    @property
    def power(self) -> float:
        return self.detected / self.n_effect if self.n_effect else float("nan")

    @property
    def within_bar(self) -> bool:
        """Whether the measured false-positive rate is at most :data:`MAX_FPR`."""
        return self.n_null > 0 and self.fpr <= MAX_FPR

    def line(self) -> str:
        """``"FPR 1.2% [0.5%, 2.9%] of 400 nulls (≤ 5% ✓); power 96% at …"``."""
        lo, hi = self.fpr_interval
        text = (f"FPR {self.fpr:.1%} [{lo:.1%}, {hi:.1%}] of {self.n_null} nulls "
                f"({'≤' if self.within_bar else '>'} {MAX_FPR:.0%} "
                f"{'✓' if self.within_bar else '✗'})")
        if self.n_effect:
            text += f"; power {self.power:.0%} of {self.n_effect} at {self.effect}"
        return text + (f"; {self.note}" if self.note else "")


def calibrate(study, configs, n_sims: int = 400, seed: int = 0) -> list[tuple]:
    """``[(Calibration, NullCheck | None, seconds)]`` for every detector ``study`` declares,
    simulated at ``configs``' grid and seeds."""
    import time

    from rulelab.study import resolve

    out = []
    for c in study.calibrations:
        t0 = time.perf_counter()
        out.append((c, resolve(c.run)(configs, n_sims, seed), time.perf_counter() - t0))
    return out


def calibration_text(results: list[tuple]) -> str:
    """The report's section: one paragraph per detector — what it calls, its null and setting,
    its false-positive rate against the bar and its power."""
    lines = [f"Each detector below was run on simulated nulls at this lab's own grid, seeds and "
             f"evaluation sizes (`rulelab calibrate`); the bar is a false-positive rate ≤ "
             f"{MAX_FPR:.0%}. A call by a detector above the bar is not evidence."]
    for c, check, _ in results:
        if check is None:
            lines.append(f"{c.name} ({c.reading}): nothing in these runs for it to read.")
            continue
        lines.append(f"{c.name} ({c.reading}). Null: {check.null}; at {check.setting}. "
                     f"{check.line()}.")
    return "\n".join(lines)
