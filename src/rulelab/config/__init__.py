"""Run configs: the shared machinery (:mod:`rulelab.config.base`); each study declares its
own config classes in its package (``rulelab/studies/<name>/config.py``), and
:func:`rulelab.study_registry.config_from_flat` rebuilds any stored config."""

from rulelab.config.base import ConfigError, RunConfig, flag_name, make_config, stable_hash

__all__ = ["ConfigError", "RunConfig", "flag_name", "make_config", "stable_hash"]
