"""Shared config machinery: stable hashes and one-line validation errors.

A run is fully determined by its config (SPEC "Cross-cutting"). Configs are flat pydantic
models: every key is named like its CLI flag (``ratio``, ``weight_decay``, ``seed``,
``layers``), so the registry, ``rulelab runs --json`` and DataFrames all speak the same names.

Values are typed strictly where lax conversion would hide a mistake: a boolean is never read
as a number, nor a number or a string as a boolean (:class:`StrictTypes`).

Fields come in two kinds (DESIGN §1): *shape* fields must be equal for all members of one
ensemble (architecture, sizes, steps); *member* fields may differ per member (data, seeds,
optimizer hyperparameters) and become per-member data or ``[E]`` tensors. Each config class
lists its member fields and provides ``shape_key()``, ``flat()``, ``run_id`` and ``label()``.
"""

from __future__ import annotations

import hashlib
import json
import math
from types import UnionType
from typing import ClassVar, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from rulelab.errors import UserError


class ConfigError(UserError, ValueError):
    """A config value out of range, reported as one line naming the flag and what is allowed."""


class StrictTypes(BaseModel):
    """Refuses a boolean where a number is expected and anything but a boolean where a boolean
    is expected (pydantic's lax mode would read ``layers: [true]`` as 1 layer and
    ``ln: "no"`` as False). Other conversions (``2`` for ``2.0``) stay allowed."""

    @model_validator(mode="before")
    @classmethod
    def _strict_bools(cls, data):
        if not isinstance(data, dict):
            return data
        for name, value in data.items():
            field = cls.model_fields.get(name)
            if field is None or value is None:
                continue
            kinds = _kinds(field.annotation)
            flag = _flag_of(cls, name)
            if isinstance(value, bool) and bool not in kinds and kinds & {int, float}:
                what = "an integer" if float not in kinds else "a number"
                raise ValueError(f"{flag}: {str(value).lower()} is not allowed; it "
                                 f"must be {what}, not a boolean")
            if not isinstance(value, bool) and kinds == {bool}:
                raise ValueError(f"{flag}: {value!r} is not allowed; use true or false")
            if float in kinds and _not_finite(value):  # else "nan" fails a bound, misleadingly
                raise ValueError(f"{flag}: {str(value).strip().lower()} is not allowed; it is "
                                 "not a number (give a finite value)")
        return data


def _not_finite(value) -> bool:
    """``nan``/``inf`` as a float or as the text pydantic would read as one."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return False
    return isinstance(value, float) and not math.isfinite(value)


def _kinds(annotation) -> set:
    """The plain types an annotation admits (``int | None`` → {int}); Literal values
    count as their types."""
    if get_origin(annotation) is Literal:
        return {type(v) for v in get_args(annotation)}
    args = get_args(annotation)
    if args and get_origin(annotation) in (Union, UnionType):
        return set().union(*(_kinds(a) for a in args)) - {type(None)}
    return {annotation} if isinstance(annotation, type) else set()


class RunConfig(StrictTypes):
    """Base of every task's run config: flat, frozen, hashed (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    member_fields: ClassVar[tuple[str, ...]] = ()  # fields that may differ within an ensemble
    # Flags whose name differs from their field's (the field name is stored and hashed, so it
    # cannot change without moving run ids): e.g. study S's ``act`` is ``--activation``.
    flags: ClassVar[dict[str, str]] = {}

    @classmethod
    def flag(cls, field: str) -> str:
        """The command-line flag of ``field`` (``weight_decay`` → ``--weight-decay``)."""
        return cls.flags.get(field) or flag_name(field)

    def flat(self) -> dict:
        return self.model_dump(mode="json")

    @property
    def run_id(self) -> str:
        """Stable id: hash of the canonical config JSON (which includes the seed)."""
        return stable_hash(self.flat())

    def shape_key(self) -> str:
        """Hash of the fields members of one ensemble must share."""
        return stable_hash({k: v for k, v in self.flat().items() if k not in self.member_fields})

    def label(self) -> str:
        """Short name of the ensemble's shape, for progress bars."""
        return self.flat().get("task", "run")


def stable_hash(obj: dict, n: int = 12) -> str:
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:n]


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _flag_of(cls, field: str) -> str:
    return cls.flag(field) if hasattr(cls, "flag") else flag_name(field)


def format_validation_error(err: ValidationError, cls=None) -> str:
    """One line naming the offending flag and what is allowed (first error only)."""
    e = err.errors()[0]
    field = ".".join(str(p) for p in e.get("loc", ()))
    msg = e.get("msg", "invalid value")
    if e.get("type") == "value_error":
        msg = msg.removeprefix("Value error, ")
    value = e.get("input")
    if field:
        shown = "" if isinstance(value, dict) else f" {value!r}"
        name = _flag_of(cls, field) if cls is not None else flag_name(field)
        return f"{name}:{shown} is not allowed; {msg.lower()}"
    return msg


def make_config(cls: type[BaseModel], **values) -> BaseModel:
    """Build a config, turning pydantic's report into a one-line :class:`ConfigError`."""
    try:
        return cls(**values)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, cls)) from None
