"""Finding runs (issue 23 item 4): short run ids, id prefixes, and ``--where`` filters.

A run id is 12 hex digits (a hash of its config, :meth:`rulelab.config.base.RunConfig.run_id`);
people read, type and paste 8 (:func:`short_ids`, longer only where 8 would collide, as git's
abbreviated hashes). Wherever a run is named (``lab.model``, ``lab.analyze(runs=…)``,
``lab.compare``, ``rulelab export tl``) any unique prefix works (:func:`resolve_run`).

``where`` is pandas' ``DataFrame.query`` syntax over a runs frame (``layers == 2 and
ratio > 0.5``), checked first so that a typo is one line naming the columns there are rather
than a pandas traceback (:func:`where`). The commands that act on runs (``runs``, ``analyze``,
``report``, ``export``) take it as ``--where`` through :func:`select`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence

import pandas as pd

from rulelab.errors import UserError

SHORT = 8  # characters of a shown run id (more where two runs share 8)


def short_ids(run_ids: Iterable[str], n: int = SHORT) -> dict[str, str]:
    """``{run id: its shortest prefix of at least n characters unique among run_ids}``."""
    ids = sorted(set(run_ids))
    short = {}
    for i, rid in enumerate(ids):
        need = n
        for other in ids[max(i - 1, 0) : i + 2]:  # sorted: a clash is with a neighbour
            if other != rid:
                common = next((k for k, (a, b) in enumerate(zip(rid, other, strict=False))
                               if a != b), min(len(rid), len(other)))
                need = max(need, common + 1)
        short[rid] = rid[:need]
    return short


def config_columns(rows: Iterable[dict]) -> list[str]:
    """The config fields of ``lab.runs_json()`` rows, in first-seen order (the columns of
    ``Lab.runs()`` between the registry's and the summary's)."""
    seen: dict[str, None] = {}
    for r in rows:
        seen.update(dict.fromkeys(r["config"]))
    return [k for k in seen if k != "run_id"]


def resolve_run(prefix: str, run_ids: Sequence[str], where: object = "this lab",
                what: str = "run_id") -> str:
    """The one run id of ``run_ids`` that is ``prefix`` or starts with it; an unknown or
    ambiguous prefix is one :class:`UserError` line naming the candidates."""
    prefix = str(prefix).strip()
    if prefix in run_ids:
        return prefix
    hits = sorted(r for r in run_ids if prefix and r.startswith(prefix))
    if len(hits) == 1:
        return hits[0]
    shown = short_ids(run_ids)
    if hits:
        names = ", ".join(shown[h] for h in hits[:8]) + (" …" if len(hits) > 8 else "")
        raise UserError(f"{what}: {prefix!r} is ambiguous in {where}: {len(hits)} runs start "
                        f"with it ({names}); give more characters")
    known = sorted(shown.values())
    names = ", ".join(known[:8]) + (" …" if len(known) > 8 else "")
    raise UserError(f"{what}: {prefix!r} is not a run of {where} (runs: {names or 'none'}; "
                    "`rulelab runs --ids` lists them)")


def resolve_runs(prefixes: Iterable[str], run_ids: Sequence[str], where: object = "this lab",
                 what: str = "runs") -> list[str]:
    """:func:`resolve_run` for each of ``prefixes``, in order."""
    return [resolve_run(p, run_ids, where, what) for p in prefixes]


RUN_FIELDS = ("run_id", "experiment", "task", "status")  # registry columns worth filtering on


def query_columns(runs: pd.DataFrame, rows: Iterable[dict]) -> dict[str, list[str]]:
    """The columns a ``where`` may name, by kind: ``config`` (from ``lab.runs_json()``
    rows), ``run`` (:data:`RUN_FIELDS`) and ``summary`` (the rest of ``Lab.runs()``'s after
    the config's)."""
    config = [c for c in config_columns(rows) if c in runs.columns and c not in RUN_FIELDS]
    last = max((list(runs.columns).index(c) for c in config), default=len(RUN_FIELDS) - 1)
    summary = [c for c in list(runs.columns)[last + 1:] if c not in config]
    return {"config": config, "run": [c for c in RUN_FIELDS if c in runs.columns],
            "summary": summary}


def where(runs: pd.DataFrame, expr: str | None, columns: dict[str, list[str]] | None = None,
          *, what: str = "--where") -> pd.DataFrame:
    """The rows of ``runs`` for which pandas' ``runs.query(expr)`` holds (all when ``expr`` is
    empty). ``columns`` (:func:`query_columns`; every column when None) are the names it may
    use; another name, or an expression that is not one, is one :class:`UserError` line
    naming them."""
    if not expr or not expr.strip():
        return runs
    columns = columns or {"columns": [str(c) for c in runs.columns]}
    allowed = {c for cs in columns.values() for c in cs if c.isidentifier()}
    named = "; ".join(f"{kind}: {', '.join(cs)}" for kind, cs in columns.items() if cs)
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as e:
        raise UserError(f"{what}: {expr!r} is not an expression ({e.msg}); write e.g. "
                        f"\"layers == 2 and ratio > 0.5\" ({named})") from None
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    unknown = sorted(names - allowed - {"True", "False", "None"})
    if unknown:
        raise UserError(f"{what}: {', '.join(unknown)} is not a column of the runs; the "
                        f"columns allowed are {named}")
    try:  # eval, not query: query would take an int column's values as row labels
        mask = runs.eval(expr, engine="python")
    except Exception as e:  # pandas' own errors (e.g. `@name`, a bad comparison)
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(f"{what}: {expr!r} does not evaluate ({why}); the columns allowed "
                        f"are {named}") from None
    if not isinstance(mask, pd.Series) or not pd.api.types.is_bool_dtype(mask):
        raise UserError(f"{what}: {expr!r} is not a condition on each run (e.g. "
                        f"\"layers == 2\"); the columns allowed are {named}")
    return runs[mask]


def select(lab, expr: str | None, what: str = "--where") -> pd.DataFrame:
    """``lab.runs()`` where ``expr`` holds (every run when it is empty), checked as ``rulelab
    runs --where`` checks it (:func:`where` over :func:`query_columns`); a filter that picks
    no run is one :class:`UserError` line."""
    runs = lab.runs()
    if not expr or not expr.strip():
        return runs
    picked = where(runs, expr, query_columns(runs, lab.runs_json()), what=what)
    if picked.empty:
        raise UserError(f"{what}: no run matches {expr!r} (of the {len(runs)} runs in "
                        f"{lab.root}); `rulelab runs --ids` lists them with their config")
    return picked
