"""Per-run summary of a sparse-parity run: when it learned, and when hidden progress showed.

- ``learned`` / ``steps_to_learn``: evaluation accuracy ≥ ``LEARNED_ACC`` (99%) at an
  evaluation, and the first such step (Barak et al. 2022 report the iterations to convergence).
- ``visible_step``: the first step evaluation accuracy reaches ``VISIBLE_ACC`` (60%) — where
  progress first shows in the usual metrics (chance is 50%; on 4,096 evaluation examples its
  standard deviation is 0.8 points).
- ``hidden_progress_step``: hidden progress *called against its null band* (issue 21;
  :mod:`.hidden_null`): before visible progress, the support mass rose by more than 95% of
  the off-support k-subsets of the same run did (``hidden_band``, the band; ``hidden_rise``,
  the support's largest rise; ``hidden_called``) and reached :func:`mass_threshold`; the step
  is the first evaluation where it stood above both. ``None`` when not called, for the
  transformer, and where there are too few off-support subsets for a 5% band.
- ``mass_rise_step``: the first step the first layer's support mass reaches
  :func:`mass_threshold` of its value at init ``m₀`` — ``min(1.1 m₀, (1 + m₀)/2)``: a 10% rise
  (or half-way to 1 where that is lower) — the reading before issue 21, which random
  k-subsets other than S make too. ``None`` for the transformer. Why 10% and not a
  doubling: the share moves only through signal — weight decay shrinks every column alike and
  SGD noise feeds every column alike, so without signal it stays at m₀ (within ≈ 2% in the
  pilots, n = 30: 0.104–0.106 over the first 500 steps) — but it is dominated by the n − k
  init-size columns, so it doubles only once the network is already visibly learning (pilot
  n = 30: 2× at step 900, accuracy 70% at 800, learned at 1,100; +10% at 700, while accuracy
  was 50%). :func:`rulelab.studies.sparse_parity.steps_tables.progress_steps` rereads any factor
  from the stored curves.
- ``fourier_step``: the first step the parity χ_S is the largest Fourier coefficient of the
  output among the k-subsets (Fourier gap > 0).

Every step is an optimizer step (``epoch · steps_per_epoch``; see :mod:`.config`); ``learned``
is also stored as ``generalized``, the name the generic rate table, ``rulelab runs`` and
``rulelab status`` read.

Hidden progress is ``hidden_progress_step`` (or ``fourier_step``) well before ``visible_step``
and ``steps_to_learn``. :func:`first_crossing` is the same reading on a stored curve.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

LEARNED_ACC = 0.99
VISIBLE_ACC = 0.60
MASS_FACTOR = 1.1


def mass_threshold(m0: float, factor: float = MASS_FACTOR) -> float:
    """The support mass that counts as hidden progress from ``m0`` at init (NaN stays NaN)."""
    return min(factor * m0, (1.0 + m0) / 2.0)


def first_crossing(steps: Sequence[int], values: Sequence[float], level: float) -> int | None:
    """The first step whose value is ≥ ``level`` (NaN never crosses), or None."""
    for s, v in zip(steps, values, strict=True):
        if v >= level:
            return int(s)
    return None


@dataclass
class SparseParitySummary:
    steps_per_epoch: int = 1
    learned: bool = False
    generalized: bool = False
    steps_to_learn: int | None = None
    visible_step: int | None = None
    hidden_progress_step: int | None = None  # called against the null band (issue 21)
    hidden_called: bool = False
    hidden_band: float = math.nan  # the band at the last evaluation before visible progress
    hidden_rise: float = math.nan  # the support mass's largest rise over init before it
    hidden_first_above: int | None = None  # first step above the band then and +10%
    mass_rise_step: int | None = None  # support mass +10% at any evaluation (uncalibrated)
    fourier_step: int | None = None
    support_mass_init: float = math.nan
    support_mass_threshold: float = math.nan
    final_support_mass: float = math.nan
    max_eval_acc: float = math.nan
    final_eval_acc: float = math.nan
    final_eval_loss: float = math.nan
    final_train_acc: float = math.nan  # fixed samples only
    final_epoch: int = 0
    failed_reason: str | None = None

    def update(self, epoch: int, metrics: dict[tuple[str, str], float]) -> None:
        acc, mass = metrics["eval", "acc"], metrics["weights", "support_mass"]
        if math.isnan(self.support_mass_init) and epoch == 0:
            self.support_mass_init = mass
            self.support_mass_threshold = mass_threshold(mass)
        self.final_epoch, step = epoch, epoch * self.steps_per_epoch
        self.final_eval_acc, self.final_eval_loss = acc, metrics["eval", "loss"]
        self.final_support_mass = mass
        self.final_train_acc = metrics.get(("train", "acc"), math.nan)
        if not math.isnan(acc):
            self.max_eval_acc = acc if math.isnan(self.max_eval_acc) else max(self.max_eval_acc,
                                                                              acc)
        if self.steps_to_learn is None and acc >= LEARNED_ACC:
            self.learned = self.generalized = True
            self.steps_to_learn = step
        if self.visible_step is None and acc >= VISIBLE_ACC:
            self.visible_step = step
        if self.mass_rise_step is None and mass >= self.support_mass_threshold:
            self.mass_rise_step = step
        if self.visible_step is None and not acc >= VISIBLE_ACC:  # before visible progress
            self._hidden_window(step, mass, metrics.get(("weights", "null_band"), math.nan))
        if self.fourier_step is None and metrics["eval", "fourier_gap"] > 0:
            self.fourier_step = step

    def _hidden_window(self, step: int, mass: float, band: float) -> None:
        """One evaluation before visible progress: the call of :func:`.hidden_null.hidden_reading`
        made online (the band of this evaluation; the call against the latest)."""
        rise = mass / self.support_mass_init - 1.0
        self.hidden_band = band
        self.hidden_rise = rise if math.isnan(self.hidden_rise) else max(self.hidden_rise, rise)
        if self.hidden_first_above is None and mass >= self.support_mass_threshold and rise > band:
            self.hidden_first_above = step
        self.hidden_called = bool(self.hidden_rise > band and self.hidden_first_above is not None)
        self.hidden_progress_step = self.hidden_first_above if self.hidden_called else None

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, cfg=None) -> SparseParitySummary:
        return cls(**d)
