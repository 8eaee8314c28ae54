"""``rulelab verify``'s check of every run (issue 24; think ``git fsck``): registry rows parse
and hash to their run id, summaries hold possible values, match their recorded hash and
recompute from their metrics, metrics files and final checkpoints match their hashes (or, where
none was recorded, read), no orphan or temp files, statuses agree with what is on disk.

Each finding is a :class:`Problem` with a kind, printed as one line; ``info`` findings
("no hash recorded", an interrupted run) are not damage. Nothing is written here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from rulelab.config.base import stable_hash
from rulelab.store import Lab, StoreError, checkpoints, metrics
from rulelab.store.atomic import TEMP_NAME
from rulelab.store.digests import Stamp, file_problem
from rulelab.store.errors import first_line
from rulelab.store.integrity import stored_summary_problem
from rulelab.store.lock import lock_holder
from rulelab.store.paths import DAMAGED_DIR
from rulelab.verify.replay import disagreement, replay

FINISHED = ("done", "failed")


@dataclass(frozen=True)
class Problem:
    kind: str  # e.g. "metrics-hash"; the part before "-" is what is damaged
    run_id: str | None
    detail: str
    path: Path | None = None
    info: bool = False  # information, not damage

    def line(self) -> str:
        where = f"run {self.run_id}: " if self.run_id else ""
        return f"{'info' if self.info else self.kind}: {where}{self.detail}"


@dataclass
class RunState:
    """What the scan learned of one run, for the repair."""

    run_id: str
    status: str
    experiment: str | None
    error: str | None
    config: dict | None  # None: unreadable or not hashing to the run id
    summary: dict | None
    summary_text: str | None = None  # as stored: for its hash
    config_text: str | None = None
    problems: list[Problem] = field(default_factory=list)

    def damaged(self, part: str) -> bool:
        return any(p.kind.startswith(part + "-") and not p.info for p in self.problems)


@dataclass
class Scan:
    lab: Lab
    runs: dict[str, RunState]
    stamps: dict[tuple[str, str], Stamp]
    others: list[Problem]  # not of one run: orphans, temp files
    files_checked: int = 0

    @property
    def problems(self) -> list[Problem]:
        return [p for r in self.runs.values() for p in r.problems] + self.others

    @property
    def damage(self) -> list[Problem]:
        return [p for p in self.problems if not p.info]


def scan(lab: Lab) -> Scan:
    """Check every run of ``lab`` in full (every file hashed)."""
    with lab.registry.reading() as conn:
        rows = [dict(r) for r in conn.execute("SELECT * FROM runs ORDER BY created_at, run_id")]
    result = Scan(lab, {}, lab.stamps(), [])
    for row in rows:
        state = _row_state(row)
        result.runs[state.run_id] = state
        if state.config is not None:
            _check_files(result, state)
    result.others += _strays(lab, set(result.runs))
    return result


def _row_state(row: dict) -> RunState:
    rid = str(row["run_id"])
    state = RunState(rid, row["status"], row["experiment"], row["error"], None, None)
    try:
        config = json.loads(row["config_json"] or "")
    except ValueError as err:
        state.problems.append(Problem("config-unreadable", rid, f"its stored config is not "
                                      f"valid JSON ({first_line(err)})"))
        config = None
    if config is not None and (not isinstance(config, dict) or stable_hash(config) != rid):
        state.problems.append(Problem("config-id", rid, "its stored config does not hash to its "
                                      "run id (changed after it was written)"))
        config = None
    state.config, state.config_text = config, row["config_json"] if config else None
    text = row["summary_json"]
    try:
        summary = json.loads(text) if text else None
    except ValueError as err:
        state.problems.append(Problem("summary-unreadable", rid, f"its stored summary is not "
                                      f"valid JSON ({first_line(err)})"))
        return state
    if summary is not None and not isinstance(summary, dict):
        state.problems.append(Problem("summary-unreadable", rid, "its stored summary is not a "
                                      "JSON object"))
        return state
    state.summary = summary
    state.summary_text = text
    return state


def _check_files(result: Scan, state: RunState) -> None:
    lab, rid, stamps = result.lab, state.run_id, result.stamps
    paths = {"metrics": metrics.metrics_path(lab.metrics_dir, rid),
             "checkpoint": checkpoints.checkpoint_path(lab.checkpoints_dir, rid)}
    finished = state.status in FINISHED
    for kind, path in paths.items():
        recorded = stamps.get((rid, kind))
        if not path.exists() and not finished:
            continue  # a pending run has no files yet
        result.files_checked += path.exists()
        if recorded is not None:  # the file as written, or not: no need to read it
            if why := file_problem(path, recorded, full=True):
                what = "missing" if why == "missing" else "hash"
                state.problems.append(Problem(f"{kind}-{what}", rid, f"{kind} file {path}: {why}",
                                              path))
            continue
        if not path.exists():
            if state.status == "done":  # a failed run may have stopped before writing any
                state.problems.append(Problem(f"{kind}-missing", rid,
                                              f"done but no {kind} file {path}", path))
            continue
        why = _unreadable(lab, kind, rid, path)
        if why:
            state.problems.append(Problem(f"{kind}-unreadable", rid, why, path))
        elif finished:
            state.problems.append(Problem(f"{kind}-nohash", rid, f"no hash recorded for "
                                          f"{path.name} (a lab made before issue 24)", path,
                                          info=True))
    if state.status == "running" and not lock_holder(lab.root):
        state.problems.append(Problem("status-interrupted", rid, "'running' but no sweep runs: "
                                      "re-run its sweep to resume it", info=True))
    if finished and state.summary is not None:
        _check_summary(result, state)
    elif state.status == "done" and not state.damaged("summary"):
        state.problems.append(Problem("summary-missing", rid, "done but no summary stored"))


def _unreadable(lab: Lab, kind: str, rid: str, path: Path) -> str | None:
    """Why a file without a (matching) hash does not read as what it should be."""
    try:
        if kind == "metrics":
            pq.read_table(path, schema=metrics.SCHEMA)
        else:
            lab.load_checkpoint(rid)
    except StoreError as err:
        return str(err).split(";")[0]
    except Exception as err:  # pyarrow raises several types for damaged files
        return f"{kind} file {path} does not read ({first_line(err)})"
    return None


def _check_summary(result: Scan, state: RunState) -> None:
    rid = state.run_id
    why = stored_summary_problem(state.summary_text, result.stamps.get((rid, "summary")),
                                 state.summary)
    if why:
        kind = "summary-hash" if "hash" in why else "summary-range"
        state.problems.append(Problem(kind, rid, f"stored summary {why}"))
        return
    if state.damaged("metrics"):
        return  # nothing to recompute it from: the metrics problem is named already
    rows = result.lab.read_metrics([rid])
    replayed = replay(state.config, rows, state.summary.get("failed_reason"))
    if keys := disagreement(state.config, state.summary, replayed):
        shown = ", ".join(f"{k} {state.summary[k]!r} (metrics say {replayed[k]!r})"
                          for k in keys[:3])
        state.problems.append(Problem("summary-metrics", rid, f"stored summary disagrees with "
                                      f"its metrics: {shown}"))


def _strays(lab: Lab, known: set[str]) -> list[Problem]:
    """Files of no registered run, and temp files no live writer holds."""
    out = []
    for folder, suffix in ((lab.metrics_dir, ".parquet"), (lab.checkpoints_dir, ".pt")):
        for path in sorted(folder.glob(f"*{suffix}")) if folder.is_dir() else []:
            if path.stem not in known and not TEMP_NAME.fullmatch(path.name):
                out.append(Problem("orphan", None, f"{path} belongs to no registered run", path))
    if lock_holder(lab.root):  # a writer is at work: its temp files are live
        return out
    for path in sorted(lab.root.rglob("*.tmp")):
        if TEMP_NAME.fullmatch(path.name) and DAMAGED_DIR not in path.relative_to(
                lab.root).parts:
            out.append(Problem("temp-file", None, f"{path} was left by an interrupted write",
                               path))
    return out
