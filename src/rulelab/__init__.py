"""rulelab: controlled experiments on when a network learns the rule, a shortcut, or noise.

Layout (data flows one way): ``tasks`` → ``models`` → ``optim`` / ``engine`` → ``store`` →
``analysis`` → ``report``, with ``cli`` and the Python API (``api``) on top.
``rulelab.load(lab)`` returns a :class:`~rulelab.api.LoadedLab`: ``runs`` and ``metrics``
DataFrames, stored ``analyses``, ``model(run_id)`` and ``analyze(name)``; it still unpacks as
``runs, metrics = rulelab.load(lab)``. ``rulelab.train(task, **config, lab=…)`` (or
``recipe=…``) trains as ``rulelab train`` / ``rulelab sweep`` do and returns the loaded lab.
"""

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


def __getattr__(name: str):
    if name == "LoadedLab":
        from rulelab.api import LoadedLab

        return LoadedLab
    raise AttributeError(f"module 'rulelab' has no attribute {name!r}")
