"""``rulelab status``: progress per experiment, read from the registry (never written).

Experiment names, paths and failure reasons come from users and from the lab: they are
printed as text, never as rich markup (``[/bold]`` in a name would otherwise crash the table,
``[link=…]`` inject a hyperlink).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from rulelab.store import Lab
from rulelab.store.lock import lock_holder
from rulelab.store.registry import STATUSES
from rulelab.study_registry import tasks
from rulelab.sweep.driver import active_sweep
from rulelab.sweep.live import running_chunks


def generalized_of(row: dict) -> bool | None:
    """A stored run's ``generalized`` flag, read by its task's view (a study may know old
    summaries: study S's adv-only ones are None, unknown); runs of unknown tasks: the flag."""
    summary = row.get("summary") or {}
    spec = tasks().get((row.get("config") or {}).get("task"))
    return bool(summary.get("generalized")) if spec is None else spec.view().generalized_of(
        summary)


def experiment_status(lab: Lab) -> list[dict]:
    """One dict per experiment: run counts per status, generalized runs (as each run's study
    reads its summary; ``generalized_unknown``: old summaries that need their metrics),
    failure reasons."""
    by_exp: dict[str, list[dict]] = defaultdict(list)
    for row in lab.runs_json():
        by_exp[row["experiment"] or "-"].append(row)
    out = []
    for name, rows in by_exp.items():
        counts = Counter(r["status"] for r in rows)
        done = [r for r in rows if r["status"] == "done"]
        reasons = Counter(_short(r["error"]) for r in rows if r["status"] == "failed")
        out.append({
            "experiment": name, "runs": len(rows),
            **{s: counts.get(s, 0) for s in STATUSES},
            "generalized": sum(generalized_of(r) is True for r in done),
            "generalized_unknown": sum(generalized_of(r) is None for r in done),
            "failed_reasons": dict(reasons.most_common(3)),
        })
    return out


def lab_status(lab: Lab) -> dict:
    active = active_sweep(lab)
    return {"lab": str(lab.root), "active_sweep": active,
            "last_writer": None if active else lock_holder(lab.root, probe=False),
            "chunks": running_chunks(lab) if active else [],
            "experiments": experiment_status(lab)}


RESUME = {  # how to resume what an interrupted writer left, by the command it was
    "train": "run the same `rulelab train …` command (or rulelab.train call) again with this "
             "--lab",
    "sweep": "run the same `rulelab sweep RECIPE` again with this --lab",
    "reproduce": "run the same `rulelab reproduce …` again",
}


def interrupted_line(status: dict, stale: int) -> str:
    """What ``status`` says of runs left 'running' when no command holds the lab: which
    command was interrupted, and how to resume it (issue 23: it used to say "re-run their
    sweep" after a killed ``train``)."""
    last = status.get("last_writer") or {}
    command = last.get("command")
    exps = sorted({str(e["experiment"]) for e in status["experiments"] if e["running"]})
    who = (f"rulelab {command} (pid {last.get('pid', '?')}, experiment "
           f"{last.get('experiment', '?')})" if command else "the command that wrote them")
    how = RESUME.get(command, "run that command again with this --lab")
    return (f"nothing is training this lab: {stale} run(s) of {', '.join(exps)} left 'running' "
            f"by {who}, which was interrupted; to resume them from their checkpoints, {how} "
            "(finished runs are skipped)")


def _short(error: str | None) -> str:
    text = (error or "failed").strip()
    return text if len(text) <= 100 else text[:97] + "…"


def print_status(console, status: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"lab {escape(status['lab'])}", title_justify="left")
    for col in ("experiment", "runs", "done", "running", "pending", "failed", "generalized"):
        table.add_column(col, justify="left" if col == "experiment" else "right")
    for e in status["experiments"]:
        gen = f"{e['generalized']}/{e['done']}" if e["done"] else "-"
        if e.get("generalized_unknown"):
            gen += f" ({e['generalized_unknown']} old: see rulelab runs)"
        table.add_row(escape(str(e["experiment"])), str(e["runs"]), str(e["done"]),
                      str(e["running"]),
                      str(e["pending"]), str(e["failed"]), gen)
    console.print(table)
    active = status["active_sweep"]
    stale = sum(e["running"] for e in status["experiments"])
    if active:
        console.print(f"{active.get('command', 'sweep')} running: pid {active.get('pid')}, "
                      f"experiment {active.get('experiment')}", markup=False, highlight=False)
        for c in status.get("chunks", []):
            console.print(f"  chunk {c['chunk'] + 1}: {c['label']} at epoch {c['epoch']}/"
                          f"{c['epochs']}, generalized {c['generalized']}, failed {c['failed']}",
                          markup=False, highlight=False)
    elif stale:
        console.print(interrupted_line(status, stale), markup=False, highlight=False,
                      soft_wrap=True)
    for e in status["experiments"]:
        for reason, n in e["failed_reasons"].items():
            console.print(f"failed in {e['experiment']}: {n} × {reason}", markup=False,
                          highlight=False)
