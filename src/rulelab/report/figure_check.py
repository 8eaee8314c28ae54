"""What a reviewer rejects in a figure, found by reading the drawn figure (issue 23).

:func:`figure_problems` draws a figure the way it is saved and lists, one line each:

- **clipped text** — a title, axis label, drawn tick label, legend text, colour-bar label or
  free text whose box leaves the figure (``"Δ accuracy (pp)"`` cut at the right edge);
  neighbouring tick labels of one axis drawn over each other, a figure title over a legend;
- **curves leaving their axes** — a line with a finite point outside its axes' box (drawn
  cut off by the axes' limits, or an ``axhline`` at a level outside them);
- **legend entries that draw nothing** — an entry whose handle matches no artist drawn in
  the figure: no line (or marker, bar, band, scatter) of its colour, style and width with a
  point inside its axes ("thick: median" where no median is drawn, "one seed" where no seed
  is plotted).

The report runs it on every figure it embeds (:func:`rulelab.report.html.figure_html` marks
the ``<figure>`` with what it found) and the tests fail on any mark
(tests/e2e/test_report_browser.py, tests/report/test_report_figures.py).
"""

from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import Collection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text

TOLERANCE_PX = 1.0  # rounding of a box to whole pixels
WIDTH_KEPT = 0.7  # a legend line matches drawn lines at least this share of its width


def figure_problems(fig: Figure, *, drawn: bool = False) -> list[str]:
    """Every clipped text, curve outside its axes and legend entry that draws nothing in
    ``fig`` as saved: drawn first (a constrained layout places everything then), unless
    ``drawn`` says it just was (by ``savefig``: a second layout of many panels costs seconds)."""
    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)  # a Figure made without a canvas (savefig picks Agg too)
        drawn = False
    if not drawn:
        fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    return [*_clipped_texts(fig, renderer), *_overlapping_texts(fig, renderer),
            *_lines_outside(fig), *_empty_legend_entries(fig)]


def _drawn_texts(fig: Figure) -> list[Text]:
    """Every visible, non-empty text the figure draws: tick labels only of the ticks drawn
    (inside the view limits), nothing of a hidden axes."""
    hidden: set[int] = set()
    ticks: list[Text] = []
    for ax in fig.axes:
        for axis in ax._axis_map.values():
            every = [t for tick in axis.get_major_ticks() + axis.get_minor_ticks()
                     for t in (tick.label1, tick.label2)]
            hidden |= {id(t) for t in every}
            if ax.get_visible() and axis.get_visible():
                lo, hi = sorted(axis.get_view_interval())
                span = (hi - lo) * 1e-9
                ticks += [t for tick in axis._update_ticks() if lo - span <= tick.get_loc()
                          <= hi + span for t in (tick.label1, tick.label2)]
        if not ax.get_visible():
            hidden |= {id(t) for t in ax.findobj(Text)}
    texts = [t for t in fig.findobj(Text) if id(t) not in hidden] + ticks
    return [t for t in texts if t.get_visible() and t.get_text().strip()]


def _clipped_texts(fig: Figure, renderer) -> list[str]:
    box = fig.bbox
    out = []
    for t in _drawn_texts(fig):
        ext = t.get_window_extent(renderer)
        over = {"left": box.x0 - ext.x0, "right": ext.x1 - box.x1,
                "bottom": box.y0 - ext.y0, "top": ext.y1 - box.y1}
        cut = [f"{side} by {px:.0f} px" for side, px in over.items() if px > TOLERANCE_PX]
        if cut:
            out.append(f"text {t.get_text()!r} is cut at the figure's {', '.join(cut)}")
    return out


def _overlap(a, b) -> bool:
    t = TOLERANCE_PX
    return a.x0 < b.x1 - t and b.x0 < a.x1 - t and a.y0 < b.y1 - t and b.y0 < a.y1 - t


def _overlapping_texts(fig: Figure, renderer) -> list[str]:
    """Tick labels of one axis drawn over each other, and a figure title over a legend."""
    drawn = {id(t) for t in _drawn_texts(fig)}
    out = []
    for ax in fig.axes:
        for axis in ax._axis_map.values():
            labels = [t for tick in axis.get_major_ticks() for t in (tick.label1,)
                      if id(t) in drawn]
            boxes = [t.get_window_extent(renderer) for t in labels]
            out += [f"tick labels {a.get_text()!r} and {b.get_text()!r} overlap"
                    for (a, ba), (b, bb) in zip(zip(labels, boxes, strict=True),
                                                zip(labels[1:], boxes[1:], strict=True),
                                                strict=False) if _overlap(ba, bb)]
    titles = [t for t in (fig._suptitle,) if t is not None and id(t) in drawn]
    for title in titles:
        for legend in _legends(fig):
            if legend.get_visible() and _overlap(title.get_window_extent(renderer),
                                                 legend.get_window_extent(renderer)):
                out.append(f"title {title.get_text()!r} overlaps a legend")
    return out


def _points(artist) -> np.ndarray:
    """An artist's data points in display pixels (finite ones only)."""
    xy = np.asarray(artist.get_xydata(), dtype=float).reshape(-1, 2)
    with np.errstate(all="ignore"):
        px = artist.get_transform().transform(xy) if len(xy) else xy
    return px[np.isfinite(px).all(axis=1)]


def _inside(points: np.ndarray, ax) -> np.ndarray:
    b = ax.bbox
    t = TOLERANCE_PX
    return ((points[:, 0] >= b.x0 - t) & (points[:, 0] <= b.x1 + t)
            & (points[:, 1] >= b.y0 - t) & (points[:, 1] <= b.y1 + t))


def _lines_outside(fig: Figure) -> list[str]:
    out = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for line in ax.lines:
            pts = _points(line)
            if line.get_visible() and len(pts) and not _inside(pts, ax).all():
                name = line.get_label()
                name = "a line" if name.startswith("_") else f"line {name!r}"
                title = ax.get_title() or ax.get_ylabel() or "an axes"
                out.append(f"{name} leaves its axes ({title!r}): "
                           f"{int((~_inside(pts, ax)).sum())} of {len(pts)} points outside")
    return out


def _rgb(c) -> tuple[float, float, float] | None:
    if c is None or (isinstance(c, str) and c.lower() == "none"):
        return None
    rgba = to_rgba(c)
    return None if rgba[3] == 0 else tuple(round(v, 3) for v in rgba[:3])


def _line_style(line: Line2D) -> tuple[bool, str | None, set]:
    """(draws a line, its marker, its colours) of a Line2D."""
    ls = line.get_linestyle()
    drawn = ls not in ("None", "none", "", " ") and line.get_linewidth() > 0
    marker = line.get_marker()
    marker = None if marker in (None, "None", "none", "", " ") else str(marker)
    colours = {_rgb(line.get_color())}
    if marker:
        colours |= {_rgb(line.get_markeredgecolor()), _rgb(line.get_markerfacecolor())}
    return drawn, marker, colours - {None}


def _matches_line(handle: Line2D, line: Line2D) -> bool:
    h_drawn, h_marker, h_colours = _line_style(handle)
    drawn, marker, colours = _line_style(line)
    if h_drawn != drawn or (h_marker and h_marker != marker) or not h_colours & colours:
        return False
    if drawn and handle.get_linestyle() != line.get_linestyle():
        return False
    # a handle promises at least its line width: "median" (thick) needs a thick line drawn
    return not drawn or line.get_linewidth() >= WIDTH_KEPT * handle.get_linewidth()


def _face(artist) -> set:
    """The colours an artist fills or strokes with (a patch or a collection)."""
    out = set()
    for colours in (artist.get_facecolor(), artist.get_edgecolor()):
        if isinstance(colours, str) or np.ndim(colours) <= 1:  # one colour
            colours = [colours]
        out |= {_rgb(c) for c in colours if not isinstance(c, str) or c != "face"}
    return out - {None}


def _draws(ax, artist) -> bool:
    """Whether ``artist`` (in ``ax``) puts anything inside the axes."""
    if isinstance(artist, Line2D):
        pts = _points(artist)
        return bool(len(pts)) and bool(_inside(pts, ax).any())
    if isinstance(artist, Patch):
        ext = artist.get_window_extent()
        return (np.isfinite([ext.x0, ext.x1, ext.y0, ext.y1]).all()
                and (ext.width > 0 or ext.height > 0))
    if isinstance(artist, Collection):
        offsets = np.asarray(artist.get_offsets())
        return bool(len(offsets) and np.isfinite(offsets).all(axis=-1).any()
                    or any(len(p.vertices) for p in artist.get_paths()))
    return True


def _entry_drawn(handle, fig: Figure) -> bool:
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        if isinstance(handle, Line2D):
            pool = [a for a in ax.lines if _matches_line(handle, a)]
            if handle.get_marker() not in (None, "None", "none", "", " "):
                # a marker entry also stands for a scatter of its colour
                pool += [c for c in ax.collections if _line_style(handle)[2] & _face(c)]
        elif isinstance(handle, Patch):
            pool = [p for p in ax.patches if _face(handle) & _face(p)]
        elif isinstance(handle, Collection):
            pool = [c for c in ax.collections if _face(handle) & _face(c)]
        else:
            return True  # a handle kind this check does not read
        if any(a.get_visible() and _draws(ax, a) for a in pool):
            return True
    return False


def _legends(fig: Figure) -> list:
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]


def _empty_legend_entries(fig: Figure) -> list[str]:
    out = []
    for legend in _legends(fig):
        if not legend.get_visible():
            continue
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=False):
            if handle is not None and not _entry_drawn(handle, fig):
                out.append(f"legend entry {text.get_text()!r} draws nothing in the figure")
    return out
