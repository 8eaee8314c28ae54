"""rulelab: controlled experiments on when a network learns the rule, a shortcut, or noise.

Layout (data flows one way): ``tasks`` → ``models`` → ``optim`` / ``train`` → ``store`` →
``analysis`` → ``report``, with ``cli`` and the Python API (``api``) on top.
``rulelab.load(lab)`` returns a :class:`~rulelab.api.LoadedLab`: ``runs`` and ``metrics``
DataFrames, stored ``analyses``, ``model(run_id)`` and ``analyze(name)``; it still unpacks as
``runs, metrics = rulelab.load(lab)``. ``rulelab.train(task, **config, lab=…)`` (or
``recipe=…``) trains as ``rulelab train`` / ``rulelab sweep`` do and returns the loaded lab.
"""

import sys
import types

from rulelab.store.load import LabFrames

__version__ = "0.1.0"
__all__ = ["LabFrames", "LoadedLab", "load", "train", "__version__"]


def load(lab=None):
    """Open an existing lab: :func:`rulelab.api.load` (imported on first use, so that
    ``import rulelab`` stays light for the command line)."""
    from rulelab.api import load as load_lab

    return load_lab(lab)


def train(task=None, recipe=None, *, lab=None, overrides=None, **config):
    """Train a lab from Python and return it loaded: :func:`rulelab.api.train.train`."""
    from rulelab.api.train import train as train_lab

    return train_lab(task, recipe, lab=lab, overrides=overrides, **config)


_train = train  # the name `train` is rebound to the package below once it is imported


class _TrainPackage(types.ModuleType):
    """The engine package ``rulelab.train``, callable as :func:`train` too: importing a
    subpackage sets it as its parent's attribute, which would hide the function."""

    __call__ = staticmethod(_train)


class _Package(types.ModuleType):
    """``rulelab`` itself: keeps ``rulelab.train(…)`` callable once ``rulelab.train.*`` is
    imported (the package stays reachable: ``rulelab.train.runner``)."""

    def __setattr__(self, name: str, value) -> None:
        if name == "train" and type(value) is types.ModuleType:
            value.__class__ = _TrainPackage
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
if isinstance(sys.modules.get(f"{__name__}.train"), types.ModuleType):  # imported already
    sys.modules[__name__].train = sys.modules[f"{__name__}.train"]


def __getattr__(name: str):
    if name == "LoadedLab":
        from rulelab.api import LoadedLab

        return LoadedLab
    raise AttributeError(f"module 'rulelab' has no attribute {name!r}")
