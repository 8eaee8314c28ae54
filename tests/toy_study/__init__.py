"""A tiny test-only study (issue 22 item 5): the engine's tests train it, so they name no real
study and a study can be deleted with its folder and its tests folder.

**Task** ``toy``: the sign of a random linear function of ``d`` Gaussian inputs, learned by
``E`` two-layer ReLU networks (:mod:`.trainer`); a run of the defaults trains in milliseconds.
Files: ``config.py`` (run config), ``trainer.py`` (data, model, metrics, summary),
``cost.py`` (the planner's estimate), ``tracking.py`` (``--track weights``), ``views.py``,
``reproduce.py``, ``recipes/quick.yaml``, ``registered.py`` (registers it when imported: a
child process's way in).

The package lives in ``tests/`` (on ``sys.path`` while pytest runs, as ``toy_study``) and is in
the registry (:mod:`rulelab.study_registry`) only inside :func:`registered` — the fixture
``toy`` of ``tests/conftest.py`` — or, in a child process, after :func:`register`.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from rulelab.study import Study, Task
from toy_study.config import ToyRunConfig
from toy_study.cost import toy_cost

HERE = Path(__file__).parent

TOY = Task(
    name="toy",
    config=ToyRunConfig,
    trainer="toy_study.trainer:ToyTrainer",
    data_builder="toy_study.trainer:build_data",
    model_builder="toy_study.trainer:build_model",
    cost=toy_cost,
    views="toy_study.views:VIEW",
    help="Train tiny MLPs on a linear sign task (tests only).",
    axes=("width", "noise", "lr", "weight_decay", "data_seed"),
    shape_flags="--width/--d",
    checkpoint_every=20,
    trackers={"weights": "toy_study.tracking:weights"},
)

STUDY = Study(
    name="toy",
    title="Toy study (tests only)",
    tasks=(TOY,),
    recipes=HERE / "recipes",
    reproduce="toy_study.reproduce:reproduce",
)


def _forget() -> None:
    """Drop what was computed from the registry's list (the studies, tasks and CLI flags)."""
    import rulelab.study_registry as registry

    registry.studies.cache_clear()
    registry.tasks.cache_clear()
    app = sys.modules.get("rulelab.cli.app")
    if app is not None:
        app.build_app.cache_clear()


def register() -> None:
    """Add the toy study to the registry for the rest of this process."""
    import rulelab.study_registry as registry

    if __name__ not in registry.STUDIES:
        registry.STUDIES = (*registry.STUDIES, __name__)
        _forget()


@contextlib.contextmanager
def registered():
    """The toy study in the registry inside the ``with`` block, and out of it after."""
    import rulelab.study_registry as registry

    before = registry.STUDIES
    register()
    try:
        yield STUDY
    finally:
        registry.STUDIES = before
        _forget()
