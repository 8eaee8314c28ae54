"""One self-contained HTML report of a lab: rate table, figures, notes, provenance.

The file embeds every figure as a base64 PNG and its CSS inline, so it can be mailed or
archived alone. Rates carry their 95% Wilson interval and k/n (SPEC S.3, "Cross-cutting"), and
the footer names every code version that produced the runs shown (SPEC "Cross-cutting":
every stored result carries the code version that produced it).

Generic over studies: the rate table, the study's figures and its curves come from the runs'
task view (:class:`rulelab.report.views.RunsView`), one section per task when a lab holds
several (issue 10); a study's own report page (e.g. study M's findings) is built from the
public pieces here (:func:`figure_html`, :func:`page`, :func:`write_page`) and draws the same
figures as its view.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import os
import tempfile
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from rulelab.report.figure_check import figure_problems
from rulelab.report.figures import accuracy_curves, loss_curves, no_data_messages
from rulelab.report.rates import RateTable, rate_tables
from rulelab.report.views import view_of
from rulelab.store.errors import write_errors

_CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222;
       margin: 0; background: #fafafa; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 32px; background: #fff; }
h1 { font-size: 1.6em; margin: 0 0 4px; }
h2 { font-size: 1.2em; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.meta, footer { color: #666; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.9em; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 10px; border-bottom: 1px solid #eee; text-align: right; }
th { background: #f3f3f3; }
tr:hover td { background: #f7f9ff; }
figure { margin: 16px 0; }
figure img { max-width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.9em; }
.empty { padding: 24px; background: #f6f6f6; color: #555; border-radius: 6px; }
pre.text { white-space: pre-wrap; font: inherit; }
footer { margin-top: 36px; border-top: 1px solid #ddd; padding-top: 8px; }
"""


def figure_png_base64(fig: Figure, dpi: int = 110) -> str:
    """PNG bytes of ``fig``, base64-encoded for a ``data:image/png`` URI."""
    buf = io.BytesIO()
    fig.set_dpi(dpi)  # drawn at the dpi it is saved at: its layout is then the one checked
    fig.savefig(buf, format="png", dpi=dpi)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def figure_html(fig: Figure, caption: str) -> str:
    """``fig`` as an embedded PNG under ``caption``; panels that show a message in place of
    data ("no metrics yet") are listed in the ``data-no-data`` attribute, so a check of
    the page (tests/e2e/test_report_browser.py) can tell them from drawn data, and
    what :func:`rulelab.report.figure_check.figure_problems` finds (clipped text, curves
    outside their axes, legend entries that draw nothing) in ``data-figure-problems``."""
    src = "data:image/png;base64," + figure_png_base64(fig)  # draws it: checked as saved
    alt = html.escape(caption, quote=True)
    empty = no_data_messages(fig)
    mark = (' data-no-data="' + html.escape("; ".join(empty), quote=True) + '"'
            if empty else "")
    if problems := figure_problems(fig, drawn=True):
        mark += ' data-figure-problems="' + html.escape("; ".join(problems), quote=True) + '"'
    return (f'<figure{mark}><img src="{src}" alt="{alt}"><figcaption>{alt}</figcaption>'
            "</figure>")


def rate_table_html(table: RateTable) -> str:
    """A :class:`RateTable` as HTML: its lines, the table (``77% [59%, 88%] (23/30)``), notes."""
    above = "".join(f'<p class="meta">{html.escape(line)}</p>' for line in table.above)
    header = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in table.head) + "</tr>"
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                   for row in table.rows)
    notes = "".join(f'<p class="meta">{html.escape(n)}</p>' for n in table.notes)
    return f"{above}<table><thead>{header}</thead><tbody>{rows}</tbody></table>{notes}"


def _has_series(metrics: pd.DataFrame, series) -> bool:
    if not {"split", "metric"} <= set(metrics.columns):
        return False
    rows = (metrics["split"].isin([s for s, *_ in series])
            & metrics["metric"].isin([m for _, m, *_ in series]))
    return bool(rows.any())


def section_body(body: str) -> str:
    """A body that starts with ``<`` is trusted HTML; anything else is escaped plain text."""
    if body.lstrip().startswith("<"):
        return body
    return f'<pre class="text">{html.escape(body)}</pre>'


def status_line(runs: pd.DataFrame) -> str:
    counts = runs["status"].astype(str).value_counts() if "status" in runs.columns else {}
    parts = [f"{n} {html.escape(s)}" for s, n in sorted(dict(counts).items())]
    return f"{len(runs)} runs" + (": " + ", ".join(parts) if parts else "")


def footer(runs: pd.DataFrame) -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    if "code_version" in runs.columns and runs["code_version"].notna().any():
        counts = runs["code_version"].dropna().astype(str).value_counts()
        versions = ", ".join(f"<code>{html.escape(v)}</code> ({n} runs)" for v, n in counts.items())
    else:
        versions = "none recorded"
    return f"<footer>Code versions: {versions}.<br>Generated {now} by rulelab.</footer>"


def write_report(
    path: str | os.PathLike,
    *,
    title: str,
    runs: pd.DataFrame,
    metrics: pd.DataFrame,
    sections: list[tuple[str, str]] | None = None,
    analyses: dict[str, pd.DataFrame] | None = None,
    lead: str = "",
    rates: bool = True,
) -> Path:
    """Write one self-contained HTML report and return its path.

    Per task in ``runs`` (a lab with two tasks gets a section per task; issue 10), from the
    task's view (:class:`rulelab.report.views.RunsView`): the rate table (Wilson CI and k/n
    per configuration, under the view's scale line and above its notes), the view's figures
    (study S: rate vs spurious ratio, with the paper's points only where the runs are at its
    setting; study M: double descent and learning order), accuracy and loss curves with
    per-seed lines, the view's analysis section built from ``analyses`` (name → table as
    :func:`rulelab.report.stored_analyses.read_analyses` returns it; study S: "Mechanistic
    analyses", SPEC S.4). Then ``sections`` as (heading, body) pairs — a body starting with
    ``<`` is inserted as HTML, any other is escaped text — and a footer with the code versions
    and the generation time. The write is atomic (temp file + ``os.replace``).

    ``lead`` (HTML: what the lab shows, :mod:`rulelab.report.results`) opens the page, right
    under the title; it holds the scale line, so the rate tables then leave theirs out, and
    ``rates=False`` leaves the tables out too (where ``lead`` holds a richer one).
    """
    parts = [f"<h1>{html.escape(title)}</h1>", f'<p class="meta">{status_line(runs)}</p>',
             lead]
    analyses = {k: v for k, v in (analyses or {}).items() if v is not None and not v.empty}
    if runs.empty:
        parts.append('<p class="empty">This lab has no runs yet: nothing to plot.</p>')
    parts += [part for task, task_runs in by_task(runs)
              for part in task_section(task_runs, metrics, analyses, task,
                                       scale_line=not lead, rates=rates)]
    for heading, body in sections or []:
        parts += [f"<h2>{html.escape(heading)}</h2>", section_body(body)]
    parts.append(footer(runs))
    return write_page(path, page(title, parts))


def by_task(runs: pd.DataFrame) -> list[tuple[str | None, pd.DataFrame]]:
    """``[(task, its runs)]`` — one pair with task None when ``runs`` hold one task or none;
    each part keeps only the columns its task fills."""
    if runs.empty or "task" not in runs.columns or runs["task"].nunique() < 2:
        return [(None, runs)] if not runs.empty else []
    return [(str(t), part.dropna(axis=1, how="all")) for t, part in runs.groupby("task")]


def task_section(runs: pd.DataFrame, metrics: pd.DataFrame, analyses: dict[str, pd.DataFrame],
                 task: str | None = None, *, scale_line: bool = True,
                 rates: bool = True) -> list[str]:
    """The HTML parts of one task's runs: rate table (its scale line unless ``scale_line`` is
    False: the page printed it already), figures, curves, analysis figures; under an ``<h2>``
    naming ``task`` (its headings one level down) when given."""
    view = view_of(runs)
    runs = view.upgrade(runs, metrics)  # e.g. labs summarised by an older criterion
    ids = set(runs["run_id"]) if "run_id" in runs.columns else set()
    if "run_id" in metrics.columns:
        metrics = metrics[metrics["run_id"].isin(ids)]
    analyses = {k: v[v["run_id"].isin(ids)] if "run_id" in v.columns else v
                for k, v in analyses.items()}
    analyses = {k: v for k, v in analyses.items() if not v.empty}
    h = "h3" if task else "h2"
    parts = [f"<h2>Task {html.escape(task)}: {status_line(runs)}</h2>"] if task else []
    tables = rate_tables(runs, metrics) if rates or scale_line else []
    if not scale_line:
        tables = [RateTable(t.title, t.head, t.rows, [], t.notes) for t in tables]
    if rates and {"status", "generalized"} <= set(runs.columns):
        parts.append(f"<{h}>{html.escape(tables[0].title[:1].upper() + tables[0].title[1:])}"
                     f"</{h}>" if tables else f"<{h}>Generalization rate</{h}>")
        parts += [rate_table_html(t) for t in tables]
    else:
        parts += [f'<p class="meta">{html.escape(line)}</p>' for t in tables for line in t.above]
    parts.append(f"<{h}>Figures</{h}>")
    parts += [figure_html(fig, caption) for fig, caption in view.figures(runs, metrics, analyses)]
    if view.curves:
        parts.append(figure_html(accuracy_curves(runs, metrics, view=view),
                                 "Accuracy per configuration, one line per seed"))
    if view.losses and _has_series(metrics, view.losses):
        parts.append(figure_html(loss_curves(runs, metrics, view=view),
                                 "Loss per configuration, one line per seed"))
    heading, extra = view.extra_figures(runs, metrics, analyses)
    if extra:
        parts.append(f"<{h}>{html.escape(heading)}</{h}>")
        parts += [figure_html(fig, caption) for fig, caption in extra]
    return parts


def page(title: str, parts: list[str]) -> str:
    """A whole HTML document: ``parts`` (HTML strings) in the report's style."""
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>"
            f"<body><main>\n{chr(10).join(parts)}\n</main></body></html>\n")


def write_page(path: str | os.PathLike, doc: str) -> Path:
    """Write ``doc`` to ``path`` atomically; a full disk or a read-only place is one line
    (:class:`rulelab.store.StoreError`)."""
    path = Path(path)
    with write_errors(path):
        _write_atomic(path, doc)
    return path


def _write_atomic(path: Path, doc: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(doc)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a report is meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
