"""One self-contained HTML report of a lab: rate table, figures, notes, provenance.

The file embeds every figure as a base64 PNG and its CSS inline, so it can be mailed or
archived alone. Rates carry their 95% Wilson interval and k/n (SPEC S.3, "Cross-cutting"), and
the footer names every code version that produced the runs shown (SPEC "Cross-cutting":
every stored result carries the code version that produced it).
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

from rulelab.analysis.stats import (
    cell_columns,
    format_range,
    format_rate,
    readings_differ,
    readings_table,
)
from rulelab.paper_s import PAPER_S, cell_paper, describe_scale, paper_note, run_matches
from rulelab.report.figures import accuracy_curves, loss_curves, rate_vs_ratio
from rulelab.report.figures_s import analysis_figures
from rulelab.store.errors import write_errors
from rulelab.tables import FLIPPED
from rulelab.train.summary_frames import upgrade_runs

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
    fig.savefig(buf, format="png", dpi=dpi)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _figure_html(fig: Figure, caption: str) -> str:
    src = "data:image/png;base64," + figure_png_base64(fig)
    alt = html.escape(caption, quote=True)
    return f'<figure><img src="{src}" alt="{alt}"><figcaption>{alt}</figcaption></figure>'


def _cell(v) -> str:
    if isinstance(v, float):
        return "–" if pd.isna(v) else f"{v:g}"
    return html.escape(str(v))


def rate_table_html(runs: pd.DataFrame, *, paper: dict | None = None) -> str:
    """The S.3 rate table as HTML: one row per configuration, ``77% [59%, 88%] (23/30)``.

    Study S: ``generalized`` is val and adv both 100% at one evaluation; the paper's adv-only
    reading gets its own column where the two differ; mean max adv carries the per-seed range;
    ``paper`` is shown beside the cells at the paper's setting only, else a line says why it is
    omitted (:mod:`rulelab.paper_s`).
    """
    by = cell_columns(runs)
    table = readings_table(runs, by)
    both = readings_differ(table)
    paper_col = cell_paper(runs, by, paper)
    head = [*by, "generalized: val and adv 100% (95% Wilson CI, k/n)"]
    if both:
        head.append("adv-only, the paper's text (95% Wilson CI, k/n)")
    head.append("failed")
    if "mean_max_adv" in table.columns:
        head.append("mean max adv acc [seed min, max]")
    if paper_col:
        head.append("paper")
    rows = []
    for i, (_, r) in enumerate(table.iterrows()):
        cells = [_cell(r[c]) for c in by]
        cells.append(html.escape(format_rate(int(r["k"]), int(r["n"]))))
        if both:
            cells.append(html.escape(format_rate(int(r["k_adv"]), int(r["n"]))))
        cells.append(str(int(r["n_failed"])))
        if "mean_max_adv" in table.columns:
            cells.append(format_range(r["mean_max_adv"], r["max_adv_min"], r["max_adv_max"]))
        if paper_col:
            cells.append(html.escape(paper_col[i]))
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    header = "<tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in head) + "</tr>"
    notes = [FLIPPED] if both else []
    if paper and (note := paper_note(runs)):
        notes.append(note)
    foot = "".join(f'<p class="meta">{html.escape(n)}</p>' for n in notes)
    return f"<table><thead>{header}</thead><tbody>{''.join(rows)}</tbody></table>{foot}"


def _has_losses(metrics: pd.DataFrame) -> bool:
    if not {"split", "metric"} <= set(metrics.columns):
        return False
    rows = metrics["metric"].eq("loss") & metrics["split"].isin(["train_consistent", "train_anti"])
    return bool(rows.any())


def _section_body(body: str) -> str:
    """A body that starts with ``<`` is trusted HTML; anything else is escaped plain text."""
    if body.lstrip().startswith("<"):
        return body
    return f'<pre class="text">{html.escape(body)}</pre>'


def _status_line(runs: pd.DataFrame) -> str:
    counts = runs["status"].astype(str).value_counts() if "status" in runs.columns else {}
    parts = [f"{n} {html.escape(s)}" for s, n in sorted(dict(counts).items())]
    return f"{len(runs)} runs" + (": " + ", ".join(parts) if parts else "")


def _footer(runs: pd.DataFrame) -> str:
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
    paper: dict | None = PAPER_S,
    analyses: dict[str, pd.DataFrame] | None = None,
) -> Path:
    """Write one self-contained HTML report and return its path.

    Holds the S.3 rate table (Wilson CI and k/n per configuration), the rate-vs-ratio figure
    with ``paper`` reference points (see :func:`rate_vs_ratio`; shown only where the runs are
    at the paper's setting, :mod:`rulelab.paper_s`, and a scale line says which), accuracy
    and loss curves with per-seed lines, then ``sections`` as (heading, body) pairs — a body
    starting with ``<`` is inserted as HTML, any other is escaped text — and a footer with the
    code versions and the generation time. ``analyses`` maps an analysis name (gradients,
    ablation, patching, fingerprints, …) to its table as ``Lab.read_table`` returns it; the
    tables that have rows add a "Mechanistic analyses" section (SPEC S.4, see
    :func:`rulelab.report.figures_s.analysis_figures`). The write is atomic (temp file +
    ``os.replace``).
    """
    path = Path(path)
    runs = upgrade_runs(runs, metrics)  # labs summarised before the val-and-adv criterion
    parts = [f"<h1>{html.escape(title)}</h1>", f'<p class="meta">{_status_line(runs)}</p>']
    study_s = not runs.empty and "ratio" in runs.columns and (
        "task" not in runs.columns or runs["task"].eq("mpsp").all())
    if study_s:  # every report says what scale it is (issue 8)
        parts.append(f'<p class="meta">{html.escape(describe_scale(runs))}</p>')
    if not study_s or not run_matches(runs).any():
        paper = None  # the paper's numbers only beside runs at the paper's setting
    if runs.empty:
        parts.append('<p class="empty">This lab has no runs yet: nothing to plot.</p>')
    else:
        if {"status", "generalized"} <= set(runs.columns):
            parts += ["<h2>Generalization rate</h2>", rate_table_html(runs, paper=paper)]
            if not paper and (note := paper_note(runs)) and study_s:
                parts.append(f'<p class="meta">{html.escape(note)}</p>')
        parts.append("<h2>Figures</h2>")
        if "ratio" in runs.columns and "generalized" in runs.columns:
            parts.append(_figure_html(rate_vs_ratio(runs, paper=paper),
                                      "Generalization rate vs spurious ratio (95% Wilson CI)"))
        caption = "Val and adversarial accuracy per configuration, one line per seed"
        parts.append(_figure_html(accuracy_curves(runs, metrics), caption))
        if _has_losses(metrics):
            parts.append(_figure_html(loss_curves(runs, metrics),
                                      "Train-consistent vs train-anti loss per configuration"))
        if mechanistic := analysis_figures(analyses, runs):
            parts.append("<h2>Mechanistic analyses</h2>")
            parts += [_figure_html(fig, caption) for fig, caption in mechanistic]
    for heading, body in sections or []:
        parts += [f"<h2>{html.escape(heading)}</h2>", _section_body(body)]
    parts.append(_footer(runs))

    doc = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>"
        f"<body><main>\n{chr(10).join(parts)}\n</main></body></html>\n"
    )
    with write_errors(path):  # a full disk or a read-only place: one line (StoreError)
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
