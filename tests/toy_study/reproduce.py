"""``rulelab reproduce toy``: the lab's report page of the recipe's runs, through the shared
writer (:func:`rulelab.report.html.write_report`)."""

from __future__ import annotations

from pathlib import Path


def reproduce(r) -> Path:
    from rulelab.report.html import write_report

    runs = r.lab.runs()
    runs = runs[runs.run_id.isin(r.run_ids)]
    metrics = r.lab.read_metrics()
    metrics = metrics[metrics.run_id.isin(r.run_ids)]
    r.console.print(f"toy: {int(runs.generalized.sum())} of {len(runs)} runs generalized")
    return write_report(r.out, title=f"{r.study.title} ({r.scale})", runs=runs, metrics=metrics)
