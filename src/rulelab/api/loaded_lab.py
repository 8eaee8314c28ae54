"""``rulelab.load(path)``: a lab for a researcher in Python (issue 10 "Python API").

::

    lab = rulelab.load("rulelab-runs/shortcut-saturation-quick")
    lab.runs                      # one row per run, indexed by run id: status, config,
                                  # summary (upgraded); lab.runs.loc[run_id]
    lab.metrics                   # long: run_id, epoch, split, metric, value (a running
                                  # run's rows so far: see ``lab.running``)
    lab.analyses["gradients"]     # a stored table, with the runs' config columns
    model = lab.model("ec7154")   # a run (any unique id prefix): TransformerLens-style model
    lab.analyze("ablation", runs=[run_id], epochs="final")   # a DataFrame; the lab untouched
    lab.where("layers == 2 and ratio > 0.5")                # the runs where that holds
    lab.curves("acc", "val", by=["layers"])                 # one metric + config columns
    lab.compare("ec7154", "3f2b9a")                         # two runs' fields side by side

``runs, metrics = rulelab.load(path)`` still unpacks as before; ``lab.runs["run_id"]`` and
``.iloc`` work as before, the index is the run id. Reading never writes the lab; only
``analyze(..., save=True)`` stores a table. A lab is read as it is at ``load``: a run a sweep
is training (``status == "running"``) has its metrics up to the last epoch its chunk flushed
(every few seconds, :mod:`rulelab.engine.live_metrics`); load again for newer rows.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from rulelab.api.compare_runs import compare
from rulelab.api.curves import curves
from rulelab.api.find_runs import query_columns, resolve_run, short_ids, where
from rulelab.api.run_analysis import run_analysis
from rulelab.api.run_model import run_model
from rulelab.api.stored_tables import StoredTables
from rulelab.errors import UserError
from rulelab.models.member import MemberModel
from rulelab.report.views import upgrade_by_task
from rulelab.store import Lab
from rulelab.store.load import load as load_frames


class LoadedLab:
    """One lab's runs, metrics, stored analyses, models and analyses on demand."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        frames = load_frames(lab)
        self.metrics: pd.DataFrame = frames.metrics
        runs = upgrade_by_task(frames.runs, frames.metrics)
        # indexed by run id (unnamed: "run_id" stays a column, and merge/groupby on it work)
        self.runs: pd.DataFrame = runs.set_axis(pd.Index(runs["run_id"].to_numpy(dtype=object)))
        self.analyses = StoredTables(lab, self.runs)

    @property
    def path(self) -> Path:
        return self.lab.root

    # ``runs, metrics = rulelab.load(p)`` and ``frames[0]``, as when load returned a pair
    def __iter__(self):
        return iter((self.runs, self.metrics))

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> pd.DataFrame:
        return (self.runs, self.metrics)[i]

    def __repr__(self) -> str:
        task_names = ", ".join(sorted(self.runs["task"].dropna().unique())) \
            if "task" in self.runs.columns else ""
        running = self.running
        live = ""
        if len(running):
            last = self.metrics[self.metrics["run_id"].isin(running.index)]["epoch"]
            live = (f"; {len(running)} running, metrics "
                    f"{f'to epoch {int(last.max())}' if len(last) else 'not flushed yet'}")
        return (f"LoadedLab({str(self.path)!r}: {len(self.runs)} runs"
                f"{f' ({task_names})' if task_names else ''}{live}; analyses: "
                f"{', '.join(self.analyses) or 'none'})")

    @property
    def running(self) -> pd.Series:
        """``{run id: last epoch in lab.metrics}`` of the runs a sweep was training at
        ``load`` (their metrics stop at what their chunk flushed; NaN: none yet)."""
        ids = self.runs.index[self.runs["status"] == "running"] if len(self.runs) else []
        last = self.metrics[self.metrics["run_id"].isin(ids)].groupby("run_id")["epoch"].max()
        return last.reindex(ids).rename("epoch")

    # --- finding and comparing runs (issue 23) --------------------------------------------
    @property
    def short_ids(self) -> dict[str, str]:
        """``{run id: its short id}`` (8 characters, more where two runs share them), as
        ``rulelab runs --ids`` shows them; any unique prefix names a run here."""
        return short_ids(self.runs["run_id"])

    def run_id(self, prefix: str) -> str:
        """The full id of the run ``prefix`` names (one error line when none or several)."""
        return resolve_run(prefix, list(self.runs["run_id"]), self.path)

    def where(self, expr: str) -> pd.DataFrame:
        """The rows of ``runs`` where ``expr`` holds (pandas query syntax over the config,
        run and summary columns: ``"layers == 2 and ratio > 0.5"``)."""
        return where(self.runs, expr, self._columns(), what="where")

    def curves(self, metric: str, split: str, by: Sequence[str] | None = None, *,
               where: str | None = None) -> pd.DataFrame:
        """One metric's curves, ``run_id, *by, epoch, metric, split, value``, with the config
        columns ``by`` joined (None: those that differ between the runs), for the runs
        ``where`` selects (all when None)."""
        runs = self.where(where) if where else self.runs
        return curves(self.metrics, runs, metric, split, by, self._columns()["config"])

    def compare(self, a: str, b: str) -> pd.DataFrame:
        """Runs ``a`` and ``b`` (ids or unique prefixes) side by side: every config and
        summary field, indexed ``(part, field)``, the differing ones first (``differs``)."""
        a, b = self.run_id(a), self.run_id(b)
        if a == b:
            raise UserError(f"compare: {a!r} twice; give two different runs")
        rows = {r["run_id"]: r for r in self.lab.runs_json()}
        names = self.short_ids
        return compare(rows[a], rows[b], names[a], names[b])

    def _columns(self) -> dict[str, list[str]]:
        return query_columns(self.runs, self.lab.runs_json())

    # --- models and analyses ----------------------------------------------------------------
    def model(self, run_id: str, epoch: int | None = None, *, device: str = "cpu"
              ) -> MemberModel:
        """The trained network of ``run_id`` (or a unique prefix of it; final checkpoint, or
        the weight snapshot at ``epoch``) without the member axis: ``model(x [batch, …])``,
        ``run_with_cache`` (an ``ActivationCache``), ``run_with_hooks``, ``hooks``, ``cfg``,
        ``W_Q`` … and ``OV``/``QK`` as TransformerLens stacks them, ``to_tokens`` (adds CLS),
        ``to_transformer_lens()`` (transformers)."""
        model = run_model(self.lab, run_id, epoch, device)
        self._warn()
        return model

    def analyze(self, name: str, runs: Sequence[str] | str | None = None, epochs="final",
                save: bool = False, *, show: bool = False, **options) -> pd.DataFrame:
        """Run the declared analysis ``name`` (``rulelab analyze NAME``) over ``runs`` (all
        when None) at ``epochs`` (``"final"``, ``"all"``, an epoch or a list); its table as a
        DataFrame. Stored in the lab only with ``save=True``; ``show`` prints its summary."""
        try:
            return run_analysis(self.lab, name, runs=runs, epochs=epochs, save=save, show=show,
                                **options)
        finally:
            self._warn()

    def _warn(self) -> None:
        for line in self.lab.warnings:
            warnings.warn(line, stacklevel=3)
        self.lab.warnings.clear()


def load(path: str | Path | Lab | None = None) -> LoadedLab:
    """Open an existing lab (``path``, ``$RULELAB_HOME`` or ``./rulelab-runs``); never creates
    one. Runs whose registry row cannot be trusted are left out with a Python warning."""
    return LoadedLab(path if isinstance(path, Lab) else Lab(path, create=False))
