"""Typed, validated run configs, one module per task; see :mod:`rulelab.config.base`."""

from rulelab.config.base import ConfigError, flag_name, make_config, stable_hash
from rulelab.config.digits import DIGITS_MEMBER_FIELDS, DigitsRunConfig
from rulelab.config.modular import MODULAR_MEMBER_FIELDS, ModularRunConfig
from rulelab.config.mpsp import MPSP_MEMBER_FIELDS, MPSPRunConfig

CONFIGS = {"mpsp": MPSPRunConfig, "modular": ModularRunConfig, "digits": DigitsRunConfig}


def config_from_flat(flat: dict):
    """Rebuild a config object from its stored flat dict (the ``task`` key picks the class)."""
    return CONFIGS[flat["task"]](**flat)


__all__ = [
    "CONFIGS", "ConfigError", "DIGITS_MEMBER_FIELDS", "DigitsRunConfig",
    "MODULAR_MEMBER_FIELDS", "MPSPRunConfig", "MPSP_MEMBER_FIELDS",
    "ModularRunConfig", "config_from_flat",
    "flag_name", "make_config", "stable_hash",
]
