"""``rulelab status``: progress per experiment, read from the registry (never written)."""

from __future__ import annotations

from collections import Counter, defaultdict

from rulelab.store import Lab
from rulelab.store.registry import STATUSES
from rulelab.sweep.driver import active_sweep


def experiment_status(lab: Lab) -> list[dict]:
    """One dict per experiment: run counts per status, generalized runs, failure reasons."""
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
            "generalized": sum(bool(r["summary"].get("generalized")) for r in done),
            "failed_reasons": dict(reasons.most_common(3)),
        })
    return out


def lab_status(lab: Lab) -> dict:
    return {"lab": str(lab.root), "active_sweep": active_sweep(lab.root),
            "experiments": experiment_status(lab)}


def _short(error: str | None) -> str:
    text = (error or "failed").strip()
    return text if len(text) <= 100 else text[:97] + "…"


def print_status(console, status: dict) -> None:
    from rich.table import Table

    table = Table(title=f"lab {status['lab']}", title_justify="left")
    for col in ("experiment", "runs", "done", "running", "pending", "failed", "generalized"):
        table.add_column(col, justify="left" if col == "experiment" else "right")
    for e in status["experiments"]:
        gen = f"{e['generalized']}/{e['done']}" if e["done"] else "-"
        table.add_row(e["experiment"], str(e["runs"]), str(e["done"]), str(e["running"]),
                      str(e["pending"]), str(e["failed"]), gen)
    console.print(table)
    active = status["active_sweep"]
    stale = sum(e["running"] for e in status["experiments"])
    if active:
        console.print(f"sweep running: pid {active.get('pid')}, experiment "
                      f"{active.get('experiment')}")
    elif stale:
        console.print(f"no sweep is running: the {stale} 'running' run(s) were interrupted; "
                      "re-run their sweep to resume them from their checkpoints")
    for e in status["experiments"]:
        for reason, n in e["failed_reasons"].items():
            console.print(f"failed in {e['experiment']}: {n} × {reason}", markup=False,
                          highlight=False)
