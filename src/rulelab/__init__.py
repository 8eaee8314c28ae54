"""rulelab: controlled experiments on when a network learns the rule, a shortcut, or noise.

Layout (data flows one way): ``tasks`` → ``models`` → ``optim`` / ``train`` → ``store`` →
``analysis`` → ``report``, with ``cli`` and the Python API (``api``) on top.
``rulelab.load(lab)`` returns a :class:`~rulelab.api.LoadedLab`: ``runs`` and ``metrics``
DataFrames, stored ``analyses``, ``model(run_id)`` and ``analyze(name)``; it still unpacks as
``runs, metrics = rulelab.load(lab)``.
"""

from rulelab.store.load import LabFrames

__version__ = "0.1.0"
__all__ = ["LabFrames", "LoadedLab", "load", "__version__"]


def load(lab=None):
    """Open an existing lab: :func:`rulelab.api.load` (imported on first use, so that
    ``import rulelab`` stays light for the command line)."""
    from rulelab.api import load as load_lab

    return load_lab(lab)


def __getattr__(name: str):
    if name == "LoadedLab":
        from rulelab.api import LoadedLab

        return LoadedLab
    raise AttributeError(f"module 'rulelab' has no attribute {name!r}")
