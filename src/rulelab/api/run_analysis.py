"""``lab.analyze(name, runs=…, epochs=…, save=False)``: a study's declared analysis from
Python, returned as a DataFrame (issue 10).

The analysis is the one ``rulelab analyze NAME`` runs (:class:`rulelab.study.Analysis`), with
the same option checks. It sees the lab through :class:`RecordingLab`: only the chosen runs,
and a ``write_table`` that keeps the tables it writes — in memory, and also in the lab only
with ``save=True`` — so exploring from a notebook leaves the lab as it was.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Sequence

import pandas as pd

from rulelab.api.find_runs import resolve_runs
from rulelab.errors import UserError
from rulelab.store import Lab, StoreError
from rulelab.study import Analysis, resolve
from rulelab.study_registry import studies


class RecordingLab:
    """A :class:`~rulelab.store.Lab` seen through a run filter, recording table writes."""

    def __init__(self, lab: Lab, run_ids: Sequence[str] | None, save: bool) -> None:
        self.inner, self.save = lab, save
        self.run_ids = None if run_ids is None else set(run_ids)
        self.written: list[pd.DataFrame] = []

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def runs_json(self) -> list[dict]:
        rows = self.inner.runs_json()
        return rows if self.run_ids is None else [r for r in rows if r["run_id"] in self.run_ids]

    def runs(self) -> pd.DataFrame:
        runs = self.inner.runs()
        return runs if self.run_ids is None else runs[runs["run_id"].isin(self.run_ids)]

    def read_metrics(self, run_ids: list[str] | None = None, **kw) -> pd.DataFrame:
        if run_ids is None and self.run_ids is not None:
            run_ids = sorted(self.run_ids)
        return self.inner.read_metrics(run_ids, **kw)

    def write_table(self, name: str, key: str, frame: pd.DataFrame):
        self.written.append(frame.copy())
        return self.inner.write_table(name, key, frame) if self.save else None


def declared(name: str, tasks: set[str]) -> Analysis:
    """The analysis ``name`` of the studies; where two studies declare one name, the one whose
    tasks the lab holds."""
    found = [(s, a) for s in studies() for a in s.analyses if a.name == name]
    if len(found) > 1:
        found = [(s, a) for s, a in found if tasks & {t.name for t in s.tasks}] or found
    if not found:
        names = sorted({a.name for s in studies() for a in s.analyses})
        raise UserError(f"name: no analysis {name!r}; use one of {', '.join(names)}")
    return found[0][1]


def epochs_text(epochs) -> str:
    """``"final"``, ``"all"``, an epoch or a list of epochs → the ``--epochs`` text."""
    if isinstance(epochs, int) and not isinstance(epochs, bool):
        epochs = [epochs]
    if isinstance(epochs, list | tuple):
        if not epochs or not all(isinstance(e, int) and e >= 0 for e in epochs):
            raise UserError(f"epochs: {epochs!r} is not allowed; use 'final', 'all', an epoch "
                            "or a list of epochs ≥ 0")
        return ",".join(map(str, epochs))
    text = str(epochs)
    if text in ("final", "all") or (text and all(e.strip().isdigit() for e in text.split(","))):
        return text
    raise UserError(f"epochs: {epochs!r} is not allowed; use 'final', 'all', an epoch or a "
                    "list of epochs")


def run_analysis(lab: Lab, name: str, *, runs: Sequence[str] | None = None,
                 epochs="final", save: bool = False, show: bool = False,
                 **options) -> pd.DataFrame:
    """Run analysis ``name`` over ``runs`` (all when None) at ``epochs``; the rows of every
    table it wrote, concatenated. ``show`` lets its printed summary through."""
    tasks = {r["config"].get("task") for r in lab.runs_json()}
    analysis = declared(name, tasks)
    values = check_options(analysis, epochs, options)
    if runs is not None:
        runs = [runs] if isinstance(runs, str) else list(runs)
        runs = resolve_runs(runs, [r["run_id"] for r in lab.runs_json()], lab.root)
    if values.get("epochs") == "all" and not any(
            lab.snapshot_epochs(r) for r in (runs or [r["run_id"] for r in lab.runs_json()])):
        # the README's `lab.analyze("gradients", epochs="all")` on a lab trained without
        # snapshots (the quick preset's): its only stored weights are the final ones
        warnings.warn("epochs='all': no run has weight snapshots (train with snapshots=N to "
                      "keep some), so the final weights are analysed", stacklevel=3)
        values["epochs"] = "final"
    view = RecordingLab(lab, runs, save)
    try:
        with contextlib.nullcontext() if show else quiet_consoles():
            resolve(analysis.run)(view, **values)
    except (StoreError, UserError) as e:  # worded for the command line: name the keyword
        raise type(e)(python_words(str(e))) from None
    return pd.concat(view.written, ignore_index=True) if view.written else pd.DataFrame()


def python_words(message: str) -> str:
    """A command-line message as Python names its keywords: ``--epochs`` → ``epochs``,
    ``--snapshots N`` → ``snapshots=N``."""
    message = re.sub(r"--([a-z0-9-]+) N\b", lambda m: f"{m.group(1).replace('-', '_')}=N",
                     message)
    return re.sub(r"--([a-z0-9-]+)", lambda m: m.group(1).replace("-", "_"), message)


@contextlib.contextmanager
def quiet_consoles():
    """Silence the printed summary and progress lines (rich's ``capture`` would still emit
    empty outputs in Jupyter; ``quiet`` drops them)."""
    from rulelab.report.terminal import console, err_console

    before = console.quiet, err_console.quiet
    console.quiet = err_console.quiet = True
    try:
        yield
    finally:
        console.quiet, err_console.quiet = before


def check_options(analysis: Analysis, epochs, options: dict) -> dict:
    """The keyword values for the run function, each checked as the command line does."""
    allowed = {o.name: o for o in analysis.options}
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        names = ", ".join(allowed) if allowed else "none"
        raise UserError(f"{', '.join(unknown)}: not an option of {analysis.name} (options: "
                        f"{names})")
    values = {o.name: options.get(o.name, o.default) for o in analysis.options}
    for o in analysis.options:
        why = o.check(values[o.name]) if o.check else None
        if why:
            raise UserError(f"{o.name}: {values[o.name]} is not allowed; {why}")
    if analysis.epochs:
        values["epochs"] = epochs_text(epochs)
    elif epochs != "final":
        raise UserError(f"epochs: {analysis.name} reads stored curves, not weights; leave "
                        "epochs out")
    return values
