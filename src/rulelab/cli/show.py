"""``rulelab show RUN``: one run on one screen (issue 23 item 4).

The run (its id or a unique prefix, :func:`rulelab.api.find_runs.resolve_run`) with what the
lab holds of it: status and versions (code, engine, device, when), its config, its summary as
``rulelab runs`` reads it (older summaries upgraded by the task's view), its curves as one
sparkline per metric and split (``--out fig.png``: a small figure of them; both drawn by
:mod:`rulelab.report.run_curves`), its final checkpoint and weight snapshots, and the
analysis tables that hold rows of it. A running run shows its curves up to the last epoch its
chunk flushed (:mod:`rulelab.engine.live_metrics`)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import typer

from rulelab.cli.options import (
    LabOpt,
    check_out,
    lab_dir,
    open_lab,
    print_warnings,
    write_out,
)
from rulelab.errors import UserError

RunArg = typer.Argument(..., metavar="RUN", help="the run: its id or a unique prefix "
                        "(`rulelab runs --ids` lists them)")
OutOpt = typer.Option(None, "--out", help="also draw its curves into this .png file")


def held_analyses(lab, run_id: str) -> list[str]:
    """``name: n rows at epochs … (tracked/post-hoc)`` for each analysis with rows of the run;
    a table without ``run_id`` (pooled over runs) is named as such."""
    import pyarrow.parquet as pq

    from rulelab.report.stored_analyses import sources

    root = lab.analyses_dir
    out = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        frames, pooled = [], False
        for path in sorted(folder.glob("*.parquet")):
            try:
                names = pq.read_schema(path).names
                if "run_id" not in names:
                    pooled = True
                    continue
                cols = [c for c in ("run_id", "epoch", "member", "source") if c in names]
                frame = pq.read_table(path, columns=cols).to_pandas()
            except Exception:  # noqa: BLE001 — a damaged table: `rulelab verify` names it
                continue
            frames.append(frame[frame["run_id"] == run_id])
        rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        if len(rows):
            epochs = sorted(rows["epoch"].unique()) if "epoch" in rows else []
            shown = ", ".join(map(str, epochs[:8])) + (" …" if len(epochs) > 8 else "")
            kinds = "/".join(sorted(set(sources(rows))))
            at = f" at epoch{'s' if len(epochs) > 1 else ''} {shown}" if epochs else ""
            out.append(f"{folder.name}: {len(rows)} row{'s' if len(rows) > 1 else ''}{at} "
                       f"({kinds})")
        elif pooled:
            out.append(f"{folder.name}: a table pooled over runs (no run_id column)")
    return out


def show_cmd(run: str = RunArg, lab: Path | None = LabOpt, out: Path | None = OutOpt) -> None:
    """One run: status and versions, config, summary, curves (sparklines; --out: a figure),
    checkpoints and snapshots stored, and the analyses that hold rows of it."""
    from rulelab.api.find_runs import query_columns, resolve_run, short_ids
    from rulelab.report.run_curves import curves_figure
    from rulelab.report.terminal import console
    from rulelab.report.views import upgrade_by_task
    from rulelab.store import StoreError

    if out is not None:
        out = check_out("--out", out, ".png")
    the_lab = open_lab(lab_dir(lab), create=False)
    try:
        rows = {r["run_id"]: r for r in the_lab.runs_json()}
        rid = resolve_run(run, list(rows), the_lab.root, what="RUN")
        runs = the_lab.runs()
        metrics = the_lab.read_metrics([rid], skip_damaged=True)
        row = upgrade_by_task(runs[runs["run_id"] == rid], metrics).iloc[0]
        summary = query_columns(runs, list(rows.values()))["summary"]
        lines = sheet(the_lab, rows[rid], row, summary, metrics, short_ids(rows)[rid])
        if out is not None and metrics.empty:
            lines.append(f"{out} not written: no metrics stored yet")
        elif out is not None:
            fig = curves_figure(metrics, f"run {short_ids(rows)[rid]} · "
                                f"{rows[rid]['experiment']} · {rows[rid]['status']}")
            write_out(out, lambda p: fig.savefig(p, dpi=100))
            lines.append(f"wrote {out}")
    except StoreError as e:
        raise UserError(str(e)) from None
    finally:
        print_warnings(the_lab)
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def sheet(lab, record: dict, row: pd.Series, summary: list[str], metrics: pd.DataFrame,
          short: str) -> list[str]:
    """The lines ``rulelab show`` prints for one run."""
    from rulelab.report.run_curves import curve_lines
    from rulelab.store.checkpoints import checkpoint_path
    from rulelab.store.lock import lock_holder

    rid, status = record["run_id"], record["status"]
    last = int(metrics["epoch"].max()) if len(metrics) else None
    total = record["config"].get("epochs")
    state = status
    if status == "running":
        live = "its sweep is training it" if lock_holder(lab.root) else (
            "interrupted: no sweep holds the lab; re-run its sweep to resume it")
        state = (f"running ({live}); metrics through epoch {last} of {total}" if last is not None
                 else f"running ({live}); no metrics flushed yet")
    lines = [f"run {rid} ({short}) · experiment {record['experiment']} · task "
             f"{record['config'].get('task', '?')}", f"  status: {state}"]
    if record.get("error"):
        lines.append(f"  error: {record['error']}")
    versions = [f"code {record.get('code_version') or '?'}"]
    if record.get("engine_version") is not None:
        versions.append(f"engine {record['engine_version']}"
                        + (f" ({record['engine_switch']})" if record.get("engine_switch")
                           else ""))
    versions += [f"{k.replace('_at', '')} {when(row[k]) if k.endswith('_at') else row[k]}"
                 for k in ("device", "created_at", "updated_at")
                 if k in row.index and isinstance(row[k], str)]
    lines += ["  " + " · ".join(versions), "config"]
    lines += wrapped(f"{k} {v}" for k, v in record["config"].items() if k != "task")
    lines.append("summary")
    shown = [f"{k} {cell(row[k])}" for k in summary if k in row.index  # this task's keys
             and (k.removeprefix("summary_") in record["summary"] or cell(row[k]) != "–")]
    lines += wrapped(shown) if shown and record["summary"] else ["  none yet"]
    lines.append("curves" + (f" (epochs {int(metrics['epoch'].min())}…{last}, "
                             f"{metrics['epoch'].nunique()} evaluations)" if last is not None
                             else ""))
    lines += curve_lines(metrics)
    snaps = lab.snapshot_epochs(rid)
    final = checkpoint_path(lab.checkpoints_dir, rid).is_file()
    ckpt = ("final checkpoint" if status == "done" else "checkpoint (resumes from it)") \
        if final else "no checkpoint"
    lines += ["stored", f"  {ckpt} · weight snapshots: "
              f"{'epochs ' + ', '.join(map(str, snaps)) if snaps else 'none'}"]
    if final and (numerics := numerics_line(lab, rid)):
        lines.append(f"  {numerics}")
    held = held_analyses(lab, rid)
    lines += ["  analyses:" + ("" if held else " none"), *(f"    {h}" for h in held)]
    lines.append(f"next: lab.model({short!r}) · rulelab export tl {short} · rulelab analyze "
                 f"NAME --where \"run_id == '{rid}'\"")
    return lines


def numerics_line(lab, run_id: str) -> str | None:
    """What else fixed a run's numbers, from its checkpoint: the examples per member a step was
    summed in (``store.version.recorded_pass``) and, under engine 11, the tile each pass ran
    in, the precision, and the kind of CPU each
    stretch of epochs ran on (``hardware.cpu_kernels``: bitwise the same only on one kind);
    None where the checkpoint cannot be read (the driver's own check says why) or records none
    of them."""
    from rulelab.store import StoreError
    from rulelab.store.version import recorded_pass

    try:
        state = lab.load_checkpoint(run_id)
    except StoreError:
        return None
    if state is None:
        return None
    parts = []
    if (examples := recorded_pass(state)) is not None:
        tile = state.get("tile")
        parts.append(f"steps summed in passes of {examples:,}"
                     + (f", tiles of {tile}" if tile else ""))
    if state.get("precision"):
        parts.append(str(state["precision"]))
    if cpus := state.get("cpus"):
        parts.append("on " + ", then ".join(f"a {kind} CPU from epoch {epoch}"
                                            for epoch, kind in cpus))
    return "numerics: " + " · ".join(parts) if parts else None


def when(stamp: str) -> str:
    """``2026-12-01T19:33:42.98+00:00`` → ``2026-12-01 19:33 UTC`` (as stored where not)."""
    try:
        t = pd.Timestamp(stamp)
    except ValueError:
        return stamp
    return t.tz_convert("UTC").strftime("%Y-%m-%d %H:%M UTC") if t.tzinfo else str(t)


def cell(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def wrapped(items, width: int = 100) -> list[str]:
    """``items`` joined by `` · `` into lines of at most ``width`` characters, indented."""
    lines, line = [], ""
    for item in items:
        if line and len(line) + 3 + len(item) > width:
            lines.append("  " + line)
            line = ""
        line = f"{line} · {item}" if line else item
    return [*lines, "  " + line] if line else lines
