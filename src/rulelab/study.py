"""What a study declares: everything particular to one line of research, in one place
(DESIGN §2 "superseded"; issue 9 "One study interface").

A study is a package ``rulelab/studies/<name>/`` whose ``__init__`` defines ``STUDY``, a
:class:`Study`; the registry (:mod:`rulelab.study_registry`) lists those packages, one line each.
The engine (trainer loop, optimizers, store, planner, executors), the command line and the
report look studies and tasks up there and name none of them.

A study runs one or more tasks (:class:`Task`): a run config class and what trains, costs,
tabulates and reports runs of that config. Heavy parts (trainers, which import torch;
analyses; figures) are named by ``"module:attribute"`` strings and imported on first use, so
listing the studies — every command does, to build its flags — costs no torch import.

Vocabulary shared by every study (issue 9): an *epoch* is one pass over the training set, so a
full-batch run takes one step per epoch; the engine counts epochs (``cfg.epochs``), and so do
``--epochs``, ``--checkpoint-every``, ``--snapshots``, progress bars and tables.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def resolve(ref: str) -> Any:
    """The object a ``"package.module:attribute"`` string names (imported now)."""
    module, _, attr = ref.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class DataCommand:
    """``rulelab data TASK``: one data set of the task written as Parquet."""

    fields: tuple[str, ...]  # the config fields it takes as flags (one value each)
    make: str  # "module:function": make(cfg) -> data; bad input raises UserError (no write yet)
    write: str  # "module:function": write(data, out: Path) -> str, a line saying what it wrote


@dataclass(frozen=True)
class Option:
    """An option of an analysis command beyond ``--lab`` and ``--epochs``."""

    name: str  # the keyword the run function receives; the flag is --name-with-dashes
    default: int | float | str
    help: str
    check: Callable[[Any], str | None] | None = None  # why a value is not allowed, or None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class Analysis:
    """``rulelab analyze NAME``: an analysis over a lab's stored runs (SPEC S.4, M.4).

    The command line checks every option (``--epochs``, then :attr:`options`), opens the lab,
    and calls ``run(lab, **options)``; ``run`` stores its table under ``<lab>/analyses/`` and
    prints a summary, raising :class:`rulelab.errors.UserError` for input it cannot use."""

    name: str
    help: str
    run: str  # "module:function"
    epochs: bool = True  # takes --epochs final|all|0,100 (final checkpoint or weight snapshots)
    options: tuple[Option, ...] = ()


@dataclass(frozen=True)
class Task:
    """One task of a study: its run config and what trains, costs, checks and shows its runs.

    ``rulelab train NAME`` takes one flag per config field (named by the config class,
    :meth:`rulelab.config.base.RunConfig.flag`); every value flag takes one or more values,
    and lists expand to a grid × ``--seeds`` (:mod:`rulelab.grid`).
    """

    name: str  # the configs' ``task`` value: `rulelab train NAME`, `rulelab data NAME`
    config: type  # a rulelab.config.base.RunConfig subclass
    trainer: str  # "module:Class", a rulelab.engine.base.EnsembleTrainerBase subclass
    cost: Callable  # (cfg, micro_batch, eval_chunk) -> rulelab.sweep.estimate.RunCost
    views: str  # "module:object", a rulelab.report.views.RunsView: tables, figures, summaries
    help: str = ""
    axes: tuple[str, ...] = ()  # grid axes of `train`, in this order first (run order)
    defaults: Mapping[str, Any] = field(default_factory=dict)  # `train` defaults ≠ the config's
    hidden: tuple[str, ...] = ()  # config fields without a flag (set by ``prepare``)
    prepare: Callable[[dict], dict] | None = None  # flag values → config values
    check: Callable[[Sequence], None] | None = None  # cheap checks before anything is written
    shape_flags: str = "the model size"  # named when one run cannot fit the memory
    checkpoint_every: int = 500  # default of --checkpoint-every (epochs)
    trackers: Mapping[str, str] = field(default_factory=dict)  # name → "module:fn(trainer)"
    data: DataCommand | None = None
    # config fields that name a path (e.g. a data folder): the command line refuses an empty
    # one, which would silently mean the current directory (issue 22: declared, not listed)
    path_fields: tuple[str, ...] = ()
    # "module:function" for `rulelab export tl` (issue 22): f(model: MemberModel) → the run's
    # EnsembleTransformer and a batch of its inputs as tokens [B, n] (no CLS), or None where
    # this run's network has no TransformerLens counterpart; None: the task's never has one
    tl_export: str | None = None
    # How a run's data and model are built from configs alone (issue 22): the trainer and the
    # post-hoc loader (:mod:`rulelab.analysis.loading`) call the same two functions, so a
    # stored run's model is rebuilt with no trainer and no optimizer.
    # "module:function": f(configs, device) → the members' data stacked on the member axis
    data_builder: str | None = None
    # "module:function": f(configs, data) → the ensemble model ``[E, B, …] → [E, B, k]``, each
    # member initialized from its config's seed (``data``: for a model that reads its input
    # width from the data)
    model_builder: str | None = None
    # "module:function": f(cfg) → the engine version the eager engine trains ``cfg`` with, for
    # a model whose eager numerics moved on alone (issue 25: a new engine version for one model,
    # :mod:`rulelab.store.version`); a function of the shape fields. None: every config trains
    # with the default eager engine (``ENGINE_VERSION``)
    eager_engine: str | None = None
    # "module:function": f(cfg, engine) → the examples per member per pass that engine version
    # cuts ``cfg``'s steps into, or None (Settings' default): part of the engine's numerics, as
    # engine 10 sizes the transformer's passes to its shape (issue 25). None: no engine does
    pass_examples: str | None = None
    # The sustained FLOP/s its runs train at on a GPU, by precision, and the fixed cost of a
    # pass, as measured (bench/gpu_check.sh; the planner's estimate, rulelab.sweep.estimate).
    # Empty: the slowest rates another task declares.
    gpu_flops: Mapping[str, float] = field(default_factory=dict)
    gpu_pass_s: float = 0.0
    gpu_measured: str = ""  # where and when, for the estimate's line ("one H200, 2026-12-04")

    def trainer_class(self) -> type:
        return resolve(self.trainer)

    def eager_engine_of(self, cfg) -> int | None:
        """The eager engine version ``cfg`` declares (:attr:`eager_engine`), or None: the
        default one."""
        return None if self.eager_engine is None else int(resolve(self.eager_engine)(cfg))

    def pass_examples_of(self, cfg, engine: int) -> int | None:
        """The examples per pass engine version ``engine`` trains ``cfg`` in
        (:attr:`pass_examples`), or None: the settings' default."""
        return None if self.pass_examples is None else resolve(self.pass_examples)(cfg, engine)

    def build_data(self, configs: Sequence, device: Any):
        """The stacked data of shape-compatible ``configs`` (see :attr:`data_builder`)."""
        return resolve(self._builder("data_builder"))(configs, device)

    def build_model(self, configs: Sequence, data: Any):
        """The freshly initialized ensemble model of ``configs`` (:attr:`model_builder`)."""
        return resolve(self._builder("model_builder"))(configs, data)

    def _builder(self, name: str) -> str:
        ref = getattr(self, name)
        if ref is None:
            raise TypeError(f"task {self.name!r} declares no {name} (rulelab.study.Task): its "
                            "stored runs cannot be loaded without a trainer")
        return ref

    def view(self):
        return resolve(self.views)

    def tracker(self, name: str) -> Callable:
        return resolve(self.trackers[name])


@dataclass(frozen=True)
class Claim:
    """A headline claim of a study, read at every scale the user holds (``rulelab scale-map``,
    issue 11): which scale shows it, which does not.

    ``read`` gets ``{scale: rulelab.report.scale_map.ScaleLab}`` (every lab of the study that
    exists, smallest scale first) and returns a :class:`rulelab.report.scale_map.ClaimReading`:
    one figure with the reading at every scale (with its intervals) and one sentence per scale
    saying whether the claim shows there."""

    name: str  # short id, e.g. "S1"; the figure's file stem
    title: str  # the claim in words, as the paper states it
    read: str  # "module:function"
    # Names of the study's invariants (:class:`Invariant`) the claim depends on: at a scale
    # that breaks one of them the claim reads "not testable at this scale", whatever its rates.
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Invariant:
    """One quantity a smaller scale must keep for a claim read there to be a fair test of the
    paper's (issue 20): e.g. parameters per training example, or the AdamW weight-decay time
    constants lr·wd·steps. A study computes them per scale from the configs its lab ran."""

    name: str  # short id a claim's ``needs`` names, e.g. "params_per_example"
    label: str  # what it is, in words
    value: str  # this scale's value, formatted (a range where the lab's runs differ)
    paper: str  # the paper's value, formatted
    allowed: str  # the range a fair scale keeps, in words, e.g. "3–6.5"
    kept: bool  # whether this scale keeps it (True where it could not be measured)
    measured: bool = True  # False: the lab holds nothing to measure it on (e.g. no curves yet)

    @property
    def mark(self) -> str:
        """✓ kept, ✗ broken, ? not measured (nothing in the lab to measure it on yet)."""
        return "✗" if not self.kept else "✓" if self.measured else "?"


@dataclass(frozen=True)
class Calibration:
    """A detector of the study checked against its null (``rulelab calibrate``, issue 21).

    ``run(configs, n_sims, seed)`` gets the run configs of the lab or preset at hand (their
    grid, seeds and evaluation sizes set the simulation) and returns one
    :class:`rulelab.analysis.calibration.NullCheck`, or None where the configs hold nothing the
    detector reads (e.g. no widths to find a dip in)."""

    name: str  # the detector, e.g. "phase-2 onset"
    reading: str  # what it calls, in the words the reports print
    run: str  # "module:function"


@dataclass(frozen=True)
class Study:
    """A study: its tasks, recipes (``recipes/<scale>.yaml``), analyses and reproduction.

    ``rulelab reproduce NAME --scale S`` trains ``recipes/S.yaml`` through the planner, then
    calls ``reproduce`` — the study's analyses, printed tables and report, by default
    ``reports/NAME-S.html`` (:class:`Reproduction` holds what it gets).
    """

    name: str  # "shortcut-saturation": `rulelab reproduce NAME`, reports/NAME-<scale>.html
    title: str
    tasks: tuple[Task, ...]
    recipes: Path  # folder of <scale>.yaml recipes (quick, paper, …)
    reproduce: str  # "module:function": reproduce(r: Reproduction) -> Path of the report
    analyses: tuple[Analysis, ...] = ()
    claims: tuple[Claim, ...] = ()  # headline claims for `rulelab scale-map NAME`
    # "module:function": invariants(runs, metrics) -> tuple[Invariant, ...], a scale's
    # invariants from the configs and curves of the runs its lab holds (issue 20); None: none
    invariants: str | None = None
    calibrations: tuple[Calibration, ...] = ()  # detectors and their nulls (issue 21)

    def scales(self) -> list[str]:
        """The recipe names in :attr:`recipes` (``quick``, ``paper``, …), sorted."""
        return sorted(p.stem for p in self.recipes.glob("*.yaml"))

    def recipe_path(self, scale: str) -> Path:
        return self.recipes / f"{scale}.yaml"


@dataclass(frozen=True)
class Reproduction:
    """What a study's ``reproduce`` function gets once its recipe has trained."""

    study: Study
    scale: str
    recipe: Any  # rulelab.sweep.recipe.Recipe
    lab: Any  # rulelab.store.Lab
    run_ids: tuple[str, ...]  # the recipe's runs, in recipe order
    out: Path  # the report to write
    device: str
    console: Any  # rich Console for stdout
    train_seconds: float  # wall time of the training (a resumed run counts only the rest)
