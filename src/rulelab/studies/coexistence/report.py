"""Study M's report page (SPEC M.4): the findings beside the paper's under the scale line, then
double descent, learning order, frequency filtering, activation swap and the neuron partition,
each with its figure and table; self-contained HTML, written atomically. The figures come from
:mod:`.panels`, which ``rulelab report`` draws too."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from rulelab.report.html import figure_html, footer, page, section_body, status_line, write_page
from rulelab.studies.coexistence.analyses.dd_dip import dip_reading
from rulelab.studies.coexistence.analyses.order import order_display, order_summary
from rulelab.studies.coexistence.analyses.tables import ff_summary, partition_summary
from rulelab.studies.coexistence.panels import (
    activation_swap,
    double_descent,
    early_lead,
    frequency_filtering,
    learning_order,
    pruning,
)


def _figure(panel) -> str:
    return figure_html(*panel) if panel is not None else ""


def _table_html(frame: pd.DataFrame) -> str:
    frame = frame.copy()
    for col in ("width", "epoch", "p", "n"):  # integers, even where a NaN made them float
        if col in frame.columns:
            frame[col] = frame[col].map(lambda v: v if v != v else int(v)).astype(object)
    return frame.to_html(index=False, border=0, na_rep="–", float_format=lambda v: f"{v:.3g}")


def findings_html(table: pd.DataFrame) -> str:
    """The findings table (claim, paper, here, verdict), left-aligned text cells."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    cell = '<td style="text-align:left">{}</td>'.format
    body = "".join("<tr>" + "".join(cell(html.escape(str(v))) for v in row) + "</tr>"
                   for row in table.itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_coexistence_report(path, *, title: str, runs: pd.DataFrame, metrics: pd.DataFrame,
                             tables: dict[str, pd.DataFrame], found: pd.DataFrame,
                             notes: list[tuple[str, str]] = (), scale: str = "",
                             lead: str = "") -> Path:
    """One self-contained HTML page (figures as base64 PNG, CSS inline): findings beside the
    paper — under the ``scale`` line (what scale the runs are and how they depart from the
    paper) — then double descent, learning order, FF, activation swap and the neuron partition
    (SPEC M.4), the ``notes`` and the code versions. Written atomically. ``lead`` (what the
    lab shows: :func:`rulelab.report.results.results_html`, holding the scale line and the
    findings) takes the place of the findings section."""

    ff, swap, neurons = tables["ff"], tables["swap"], tables["neurons"]
    order = tables["order"]
    lead_new, lead_old = order_display(order_summary(order))
    dips = tables.get("dips")
    dips = dip_reading(tables["dd"]) if dips is None else dips
    parts = [f"<h1>{html.escape(title)}</h1>", f'<p class="meta">{status_line(runs)}</p>',
             *([lead] if lead else ["<h2>Findings beside the paper</h2>",
                                    f"<p><b>{html.escape(scale)}</b></p>" if scale else "",
                                    findings_html(found)]),
             "<h2>Double descent (M.4.1)</h2>", _figure(double_descent(runs, ff)),
             _table_html(tables["dd"]),
             "<p>The dip, per curve (called by a max-statistic test over seeds at 2.5%: "
             "≤ 5% of flat curves called):</p>",
             _table_html(dips[[c for c in dips.columns if c in ("noise", "activation",
                                                                 "reading")]]),
             "<h2>Learning order (M.4.2)</h2>", _figure(learning_order(runs, metrics, order)),
             _figure(early_lead(order)),
             "<p>Early lead (every run with α > 0 counts):</p>", _table_html(lead_new),
             "<p>Old reading, first step at 50% (runs whose noisy accuracy never reaches 50% "
             "are left out of its n):</p>", _table_html(lead_old),
             "<h2>Frequency filtering (M.4.3)</h2>", _figure(frequency_filtering(ff)),
             _table_html(ff_summary(ff, "test")),
             "<h2>Activation swap (M.4.4)</h2>", _figure(activation_swap(swap)),
             "<h2>Neuron partition and pruning (M.4.5)</h2>", _figure(pruning(neurons)),
             _table_html(partition_summary(neurons, "test"))]
    for heading, body in notes:
        parts += [f"<h2>{html.escape(heading)}</h2>", section_body(body)]
    parts.append(footer(runs))
    return write_page(path, page(title, parts))
