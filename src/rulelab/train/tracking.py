"""Analyses as training callbacks: run at a schedule, stored per run (SPEC S.4, issue "--track").

``--track gradients,fingerprints --track-every log`` runs those analyses on the whole ensemble
at log-spaced epochs (early dynamics are dense) and stores one table per analysis and run,
``analyses/<name>/<run_id>.parquet``. On resume the rows up to the checkpoint epoch are kept,
so a killed-and-resumed run tracks the same rows as an uninterrupted one.

The ``gradients`` rows carry, beside cos(g+, g−) and ‖g−‖/‖g+‖, ``eps`` = ‖g‖/(r‖g+‖) and
``identity_dominated`` (issue 8: where ε is small the identity g = r·g+ + (1−r)·g− alone pins
amplification to r/(1−r) and cos to −1) and each group's mean per-example gradient norm over up
to 256 examples per group (:mod:`rulelab.analysis.gradients`); ``fingerprints`` rows carry the
OV probe ``ov_probe_acc`` beside OV parity ρ (:mod:`rulelab.analysis.circuits`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

TrackFn = Callable[[object], pd.DataFrame]


def _gradients(trainer) -> pd.DataFrame:
    from rulelab.analysis.gradients import gradient_conflict

    return gradient_conflict(trainer.model, trainer.data)


def _fingerprints(trainer) -> pd.DataFrame:
    from rulelab.analysis.s_tables import fingerprint_table

    return fingerprint_table(trainer)


def _ablation(trainer) -> pd.DataFrame:
    from rulelab.analysis.ablation import ablation_table

    return ablation_table(trainer.model, trainer.data, methods=("mean",), where=("cls",))


TRACKERS: dict[str, TrackFn] = {
    "gradients": _gradients,
    "fingerprints": _fingerprints,
    "ablation": _ablation,
}


def track_epochs(total: int, every: str) -> set[int]:
    """``log``: 0, then ~8 points per decade up to ``total``; an integer ``k``: every k epochs."""
    if every == "log":
        n = max(2, int(8 * np.log10(max(total, 10))))
        points = np.unique(np.round(np.geomspace(1, max(total, 1), num=n)).astype(int))
        return {0, total, *points.tolist()}
    k = int(every)
    return set(range(0, total + 1, k)) | {total}


class Tracker:
    """Runs the named analyses at ``epochs`` and keeps their rows per run id."""

    def __init__(self, names: tuple[str, ...], epochs: set[int]) -> None:
        unknown = [n for n in names if n not in TRACKERS]
        if unknown:
            raise ValueError(f"unknown tracker(s) {unknown}; use {sorted(TRACKERS)}")
        self.names, self.epochs = names, epochs
        self.rows: dict[str, list[pd.DataFrame]] = {n: [] for n in names}

    def resume(self, lab, run_ids: list[str], epoch: int) -> None:
        """Keep the rows stored for ``run_ids`` up to ``epoch`` (the checkpoint)."""
        for name in self.names:
            for rid in run_ids:
                frame = lab.read_run_table(name, rid)
                if frame is not None and len(frame):
                    self.rows[name].append(frame[frame["epoch"] <= epoch])

    def maybe_run(self, trainer) -> None:
        if trainer.epoch not in self.epochs:
            return
        was_training = trainer.model.training
        trainer.model.eval()
        for name in self.names:
            frame = TRACKERS[name](trainer)
            frame.insert(0, "run_id", [trainer.configs[int(m)].run_id for m in frame["member"]])
            frame.insert(1, "epoch", trainer.epoch)
            self.rows[name].append(frame.drop(columns="member"))
        trainer.model.train(was_training)

    def flush(self, lab, run_ids: list[str]) -> None:
        for name, frames in self.rows.items():
            if not frames:
                continue
            frame = pd.concat(frames, ignore_index=True)
            for rid in run_ids:
                lab.write_table(name, rid, frame[frame["run_id"] == rid])
