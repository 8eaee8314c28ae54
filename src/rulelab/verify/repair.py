"""``rulelab verify --repair``: fix exactly what can be fixed, and say how exactly (issue 24).

Every run is deterministic (same config and seed → bitwise the same numbers, DESIGN §1), so
what was lost can be made again rather than guessed:

- a damaged config is restored from the copy ``register`` kept (the one that hashes to the run
  id); without one, the next ``train``/``sweep`` naming that config restores it;
- a damaged metrics file is rewritten from the metric rows the final checkpoint holds;
- a damaged final checkpoint (and, with it, metrics that the checkpoint cannot give back) is
  made again by training the run from the start through the driver, as ``rulelab train`` does
  (default execution settings unless given: a run first trained on another device or with
  another micro-batch may differ in its last bits, and the fix says so);
- a damaged or impossible summary is re-derived from the (now intact) metrics
  (:mod:`rulelab.verify.replay`);
- a damaged checkpoint of an unfinished run is moved aside: the next sweep restarts the run;
- files of no run and temp files of killed writers are moved aside (temp files: removed, as
  every writer does).

Files that cannot be used are moved into ``<lab>/damaged/``, never deleted. Each fix says
whether the result is bitwise what was recorded (its hash matches), and finished runs without
hashes (labs made before issue 24) get them recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

from rulelab.config.base import stable_hash
from rulelab.settings import Settings
from rulelab.store import Lab, checkpoints, digests, metrics
from rulelab.store.atomic import remove_stale_temp_files
from rulelab.store.lock import lab_lock
from rulelab.store.paths import move_aside
from rulelab.store.registry import to_json
from rulelab.verify.replay import replay
from rulelab.verify.scan import FINISHED, RunState, Scan, scan


def repair(found: Scan, settings: Settings | None = None) -> list[str]:
    """Repair what ``found`` names; returns one line per fix (or per thing left as it is)."""
    lab, lines = found.lab, []
    with lab_lock(lab.root, command="verify", experiment="-"):
        lines += _strays(found)
        lines += [_restore_config(found, s) for s in found.runs.values() if s.config is None]
        again = scan(lab)  # restored configs: their files can be checked now
        retrain = []
        for state in again.runs.values():
            if state.config is not None and state.status in FINISHED:
                lines += _repair_finished(again, state, retrain)
            elif state.config is not None and state.damaged("checkpoint"):
                aside = move_aside(lab.root, _ckpt(lab, state.run_id))
                lines.append(f"moved: run {state.run_id}: its unfinished checkpoint to {aside}; "
                             "the next train/sweep of it starts it afresh")
    if retrain:
        lines += _retrain(again, retrain, settings or Settings(quiet=True))
    return [line for line in lines if line]


def _ckpt(lab: Lab, run_id: str) -> Path:
    return checkpoints.checkpoint_path(lab.checkpoints_dir, run_id)


def _metrics(lab: Lab, run_id: str) -> Path:
    return metrics.metrics_path(lab.metrics_dir, run_id)


def _strays(found: Scan) -> list[str]:
    lines = []
    if any(p.kind == "temp-file" for p in found.others):
        removed = remove_stale_temp_files(found.lab.root)
        lines.append(f"removed: {len(removed)} temp file(s) of interrupted writes")
    for p in found.others:
        if p.kind == "orphan" and p.path is not None and p.path.exists():
            lines.append(f"moved: {p.path} (no registered run) to "
                         f"{move_aside(found.lab.root, p.path)}")
    return lines


def _restore_config(found: Scan, state: RunState) -> str:
    rid = state.run_id
    copy = found.stamps.get((rid, "config"))
    config = json.loads(copy.copy) if copy is not None and copy.copy else None
    if not isinstance(config, dict) or stable_hash(config) != rid:
        return (f"not repaired: run {rid}: its config is lost (no intact copy); re-run the "
                "train or sweep that made it: that restores it")
    found.lab.registry.update([rid], config_json=copy.copy)
    return f"restored: run {rid}: its config, from the copy kept at registration (bitwise)"


def _repair_finished(found: Scan, state: RunState, retrain: list[str]) -> list[str]:
    lab, rid, lines = found.lab, state.run_id, []
    if state.damaged("checkpoint"):
        for path in (_ckpt(lab, rid), *([_metrics(lab, rid)] if state.damaged("metrics")
                                         else [])):
            if path.exists():
                lines.append(f"moved: {path} to {move_aside(lab.root, path)}")
        retrain.append(rid)
        return lines
    if state.damaged("metrics"):
        path = _metrics(lab, rid)
        if path.exists():
            lines.append(f"moved: {path} to {move_aside(lab.root, path)}")
        from rulelab.engine.runner import metrics_frame

        lab.write_metrics(rid, metrics_frame(rid, lab.load_checkpoint(rid)["rows"]))
        lines.append(f"rewritten: run {rid}: metrics, from its final checkpoint's rows — "
                     f"{_exact(found, rid, 'metrics')}")
    text = state.summary_text
    if state.damaged("summary") or (state.summary is None and state.status == "done"):
        reason = state.error if state.status == "failed" else None
        text = to_json(replay(state.config, lab.read_metrics([rid]), reason))
        lab.registry.update([rid], stamps={"summary": digests.text_stamp(text)},
                             summary_json=text)
        same = _same_text(found, rid, text)
        lines.append(f"re-derived: run {rid}: summary, from its metrics — {same}")
    now = {**lab.file_stamps(rid, text),
           "config": digests.text_stamp(state.config_text or "", keep=True)}
    missing = {k: v for k, v in now.items() if (rid, k) not in found.stamps and v is not None}
    if missing:  # a lab made before hashes: record them now that the files are checked
        lab.registry.update([rid], stamps=missing)
    return lines


def _exact(found: Scan, rid: str, kind: str) -> str:
    """Whether ``rid``'s remade ``kind`` file is bitwise what was recorded; its new stamp is
    recorded (a new mtime at least, so the cheap check stays cheap)."""
    recorded = found.stamps.get((rid, kind))
    path = _ckpt(found.lab, rid) if kind == "checkpoint" else _metrics(found.lab, rid)
    now = digests.file_stamp(path)
    if now is not None:
        found.lab.registry.update([rid], stamps={kind: now})
    if recorded is None or now is None:
        return "no hash was recorded to compare with"
    if now.sha256 == recorded.sha256:
        return "bitwise what was recorded"
    return "DIFFERS from what was recorded (another code version or device?)"


def _same_text(found: Scan, rid: str, text: str) -> str:
    recorded = found.stamps.get((rid, "summary"))
    if recorded is None:
        return "no hash was recorded to compare with"
    return ("bitwise what was recorded" if digests.text_stamp(text).sha256 == recorded.sha256
            else "DIFFERS from what was recorded")


def _retrain(found: Scan, run_ids: list[str], settings: Settings) -> list[str]:
    """Train ``run_ids`` again from the start (their checkpoints were moved aside)."""
    from rulelab.study_registry import config_from_flat
    from rulelab.sweep.driver import run_configs

    lab = found.lab
    by_experiment: dict[str, list] = {}
    for rid in run_ids:
        state = found.runs[rid]
        by_experiment.setdefault(state.experiment or "verify", []).append(
            config_from_flat(state.config))
    lab.registry.update(run_ids, status="pending")
    for experiment, configs in by_experiment.items():
        run_configs(configs, lab, experiment=experiment, settings=settings, command="verify")
    lines = []
    for rid in run_ids:
        exact = {k: _exact(found, rid, k) for k in ("checkpoint", "metrics")}
        status = lab.status(rid)
        with lab.registry.reading() as conn:
            (summary,) = conn.execute("SELECT summary_json FROM runs WHERE run_id = ?",
                                      (rid,)).fetchone()
        same = _same_text(found, rid, summary) if summary is not None else ""
        lines.append(f"retrained: run {rid} ({status}): checkpoint {exact['checkpoint']}; "
                     f"metrics {exact['metrics']}" + (f"; summary {same}" if same else ""))
    return lines
