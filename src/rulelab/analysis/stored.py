"""Run an ensemble analysis over a lab's stored runs and epochs, and store its table.

Every analysis of :mod:`rulelab.analysis` is a function of one loaded ensemble (a
:class:`~rulelab.analysis.loading.LoadedEnsemble`: ``model``, ``data``, ``configs``; no trainer,
issue 22) returning a tidy frame with a ``member`` column; this module maps
members to run ids, loops over the requested epochs (final checkpoint or weight snapshots),
and writes ``analyses/<name>/<key>.parquet`` (DESIGN §3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from rulelab.analysis.loading import LoadedEnsemble, load_ensembles, require_runs, stored_configs
from rulelab.config import stable_hash
from rulelab.store import Lab, StoreError
from rulelab.store.checkpoints import checkpoint_path

EnsembleAnalysis = Callable[[LoadedEnsemble], pd.DataFrame]


def resolve_epochs(lab: Lab, configs: Sequence, which: str) -> list[int | None]:
    """``final`` → [None] (final checkpoint); ``all`` → every snapshot; ``"0,100"`` → those,
    each of which must be stored for at least one run (else a :class:`StoreError` naming
    ``--epochs`` and the stored epochs). ``all`` without any snapshot is such an error too:
    it would otherwise quietly mean ``final``."""
    if which == "final":
        return [None]
    stored = sorted({e for c in configs for e in lab.snapshot_epochs(c.run_id)})
    none_stored = "no run has weight snapshots (train with --snapshots N to keep some)"
    if which == "all":
        if not stored:
            raise StoreError(f"--epochs: all is not allowed; {none_stored}; use final")
        return stored
    wanted = [int(e) for e in which.split(",") if e.strip()]
    missing = [e for e in wanted if e not in stored]
    if missing:
        have = f"stored: {_epochs_text(stored)}" if stored else none_stored
        raise StoreError(f"--epochs: {','.join(map(str, missing))} is not allowed; no run has "
                         f"weights stored at that epoch ({have}); or use final")
    return wanted


def plan_epochs(lab: Lab, configs: Sequence, which: str
                ) -> list[tuple[int | None, list]]:
    """``(epoch, configs with weights at it)`` per requested epoch (None: final checkpoint),
    checked before anything runs: no weights at all is one :class:`StoreError`; runs left
    out at some epochs (runs of different lengths, deleted checkpoints) are one warning on
    ``lab`` naming them, never a silent drop (issue 10)."""
    plan = []
    for epoch in resolve_epochs(lab, configs, which):
        if epoch is None:
            have = [c for c in configs
                    if checkpoint_path(lab.checkpoints_dir, c.run_id).is_file()]
        else:
            have = [c for c in configs if epoch in lab.snapshot_epochs(c.run_id)]
        plan.append((epoch, have))
    ids = [c.run_id for c in configs]
    if plan == [(None, [])]:
        raise StoreError(f"--epochs: final is not allowed; none of the {len(configs)} finished "
                         f"run(s) has its final checkpoint in {lab.checkpoints_dir} "
                         f"({_ids_text(ids)}); {_snapshot_hint(lab, configs)}")
    short = []
    for e, have in plan:
        kept = {c.run_id for c in have}
        if len(kept) < len(ids):
            short.append((e, len(ids) - len(kept), [i for i in ids if i not in kept]))
    if short:
        parts = [f"{'final' if e is None else e} ({n} of {len(ids)}: {_ids_text(left, 3)})"
                 for e, n, left in short[:5]]
        more = f" and {len(short) - 5} more epochs" if len(short) > 5 else ""
        lab.warn(f"--epochs {which}: runs without weights at an epoch are left out there: "
                 f"{'; '.join(parts)}{more}")
    return [(e, have) for e, have in plan if have]


def _snapshot_hint(lab: Lab, configs: Sequence) -> str:
    stored = sorted({e for c in configs for e in lab.snapshot_epochs(c.run_id)})
    if stored:
        return f"use --epochs with a stored snapshot epoch ({_epochs_text(stored)})"
    return "re-train them to analyze them"


def _ids_text(ids: list[str], most: int = 5) -> str:
    return ", ".join(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most else "")


def _epochs_text(epochs: list[int], most: int = 12) -> str:
    if len(epochs) <= most:
        return ", ".join(map(str, epochs))
    return ", ".join(map(str, epochs[: most - 1])) + f", …, {epochs[-1]}"


def with_run_ids(frame: pd.DataFrame, ensemble: LoadedEnsemble, epoch: int,
                 columns: Sequence[str] = ()) -> pd.DataFrame:
    """Add ``run_id``, ``epoch`` and the member's config ``columns`` that group results."""
    frame = frame.copy()
    cfgs = ensemble.configs
    frame.insert(0, "run_id", [cfgs[int(m)].run_id for m in frame["member"]])
    frame.insert(1, "epoch", int(epoch))
    for col in columns:
        if hasattr(cfgs[0], col):
            frame[col] = [getattr(cfgs[int(m)], col) for m in frame["member"]]
    return frame


def analyze_stored(
    lab: Lab,
    name: str,
    analysis: EnsembleAnalysis,
    *,
    task: str,
    columns: Sequence[str] = (),
    epochs: str = "final",
    run_ids: Sequence[str] | None = None,
    max_members: int = 64,
    on_step: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Apply ``analysis`` to every stored ensemble of ``task`` at every requested epoch, with
    the config ``columns`` its study groups by; store and return."""
    configs = stored_configs(lab, task=task, run_ids=run_ids)
    require_runs(configs, lab, task)
    frames = []
    for epoch, have in plan_epochs(lab, configs, epochs):
        for i, ens in enumerate(load_ensembles(lab, have, epoch=epoch,
                                               max_members=max_members), 1):
            frame = with_run_ids(analysis(ens), ens, ens.epoch, columns)
            key = stable_hash({"runs": [c.run_id for c in ens.configs], "epoch": ens.epoch})
            lab.write_table(name, key, frame)
            frames.append(frame)
            if on_step:
                n = ens.n_members  # one line per ensemble, each named (issue 23)
                on_step(f"{name}: ensemble {i} ({ens.cfg.label()}, {n} "
                        f"run{'s' if n != 1 else ''}) at epoch {ens.epoch}")
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
