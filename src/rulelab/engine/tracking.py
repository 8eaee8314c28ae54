"""Analyses as training callbacks: run at a schedule, stored per run (SPEC S.4, ``--track``).

Each study declares the analyses its runs can track (``Task.trackers``: name → a function of
the live trainer returning a tidy frame with a ``member`` column). ``--track a,b
--track-every log`` runs them on the whole ensemble at log-spaced epochs (early dynamics are
dense) and stores one table per analysis and run, ``analyses/<name>/<run_id>.parquet``. On
resume the rows up to the checkpoint epoch are kept, so a killed-and-resumed run tracks the
same rows as an uninterrupted one. Tracked rows carry ``source = "tracked"``: a post-hoc
``rulelab analyze`` of the same name writes to the same folder, and readers
(:mod:`rulelab.report.stored_analyses`) keep the two apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

TrackFn = Callable[[object], pd.DataFrame]


def track_epochs(total: int, every: str) -> set[int]:
    """``log``: 0, then ~8 points per decade up to ``total``; an integer ``k``: every k epochs."""
    if every == "log":
        n = max(2, int(8 * np.log10(max(total, 10))))
        points = np.unique(np.round(np.geomspace(1, max(total, 1), num=n)).astype(int))
        return {0, total, *points.tolist()}
    k = int(every)
    return set(range(0, total + 1, k)) | {total}


class Tracker:
    """Runs the analyses ``fns`` (name → function of the trainer) at ``epochs`` and keeps
    their rows per run id."""

    def __init__(self, fns: Mapping[str, TrackFn], epochs: set[int]) -> None:
        self.fns, self.names, self.epochs = dict(fns), tuple(fns), epochs
        self.rows: dict[str, list[pd.DataFrame]] = {n: [] for n in self.names}

    def resume(self, lab, run_ids: list[str], epoch: int) -> None:
        """Keep the rows stored for ``run_ids`` up to ``epoch`` (the checkpoint)."""
        for name in self.names:
            for rid in run_ids:
                frame = lab.read_run_table(name, rid)
                if frame is not None and len(frame):
                    self.rows[name].append(frame[frame["epoch"] <= epoch])

    def maybe_run(self, trainer) -> None:
        if trainer.epoch not in self.epochs or not self.fns:
            return
        was_training = trainer.model.training
        trainer.model.eval()
        for name, fn in self.fns.items():
            frame = fn(trainer)
            frame.insert(0, "run_id", [trainer.configs[int(m)].run_id for m in frame["member"]])
            frame.insert(1, "epoch", trainer.epoch)
            frame["source"] = "tracked"  # apart from `rulelab analyze` rows of the same name
            self.rows[name].append(frame.drop(columns="member"))
        trainer.model.train(was_training)

    def flush(self, lab, run_ids: list[str]) -> None:
        for name, frames in self.rows.items():
            if not frames:
                continue
            frame = pd.concat(frames, ignore_index=True)
            for rid in run_ids:
                lab.write_table(name, rid, frame[frame["run_id"] == rid])
