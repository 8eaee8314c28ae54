"""Execution flags, generated from :class:`rulelab.settings.Settings` as config flags are from a
config class (issue 22): ``rulelab train``, ``sweep`` and ``reproduce`` take one flag per field
in :attr:`Settings.FLAGS`, named by the field (``max_members`` → ``--max-members``), with the
field's description as help and the field's bounds as the flag's. Adding an execution flag to
the three commands is adding a field there.

``train`` defaults each flag to the setting's default (shown in its help; a task may set its
own, e.g. ``checkpoint_every``); ``sweep`` and ``reproduce`` default each to the recipe's value
(None: not given; a boolean flag only switches on). :func:`settings_from_flags` checks what
was given — one line naming the flag and what is allowed — and merges it into the recipe's
settings.
"""

from __future__ import annotations

import inspect
import operator
import typing
from collections.abc import Mapping

import typer
from pydantic import ValidationError

from rulelab.cli import options
from rulelab.cli.commands import base_type
from rulelab.config.base import flag_name
from rulelab.errors import UserError
from rulelab.settings import Settings

KW = inspect.Parameter.KEYWORD_ONLY
BOUNDS = (("ge", operator.ge, "≥"), ("gt", operator.gt, ">"), ("le", operator.le, "≤"),
          ("lt", operator.lt, "<"))


def flag_type(name: str) -> type:
    """The type a flag's value has on the command line (a tuple field: a comma list)."""
    kind = base_type(Settings.model_fields[name].annotation)
    return str if typing.get_origin(kind) is tuple else kind


def settings_options(*, from_recipe: bool, defaults: Mapping[str, object] | None = None,
                     notes: Mapping[str, str] | None = None) -> list[inspect.Parameter]:
    """One option per field of :attr:`Settings.FLAGS`: defaulting to the recipe's value
    (``from_recipe``), else to ``defaults`` or the field's default; ``notes`` end a flag's help
    (e.g. the analyses a task can track)."""
    out = []
    for name in Settings.FLAGS:
        field = Settings.model_fields[name]
        kind, help_ = flag_type(name), (field.description or "") + (notes or {}).get(name, "")
        unset = (field.json_schema_extra or {}).get("unset")
        if kind is bool:
            default = False
        elif from_recipe:
            default = None
            shown = unset or (",".join(field.default) if isinstance(field.default, tuple)
                              else field.default)
            help_ += f" (default: the recipe's, else {'none' if shown == '' else shown})"
        else:
            default = (defaults or {}).get(name, field.default)
            default = ",".join(default) if isinstance(default, tuple) else default
            if default is None and unset:
                help_ += f" (default: {unset})"
        annotation = kind | None if default is None else kind
        out.append(inspect.Parameter(name, KW, annotation=annotation, default=typer.Option(
            default, flag_name(name), help=help_)))
    return out


def check_bounds(values: Mapping[str, object]) -> None:
    """Each given value (not None) within its field's bounds: one line naming the flag."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue  # None (not given), or a type pydantic refuses when merging
        for bound in Settings.model_fields[name].metadata:
            for attr, holds, sign in BOUNDS:
                limit = getattr(bound, attr, None)
                if limit is not None and not holds(value, limit):
                    shown = f"{limit:,}" if isinstance(limit, int) else f"{limit:g}"
                    raise UserError(f"{flag_name(name)}: {value} is not allowed; it must be "
                                    f"{sign} {shown}")


def settings_from_flags(base: Settings, values: Mapping[str, object], *, trackers=(),
                        task: str = "", here: bool = True, off_is_unset: bool = True
                        ) -> Settings:
    """``base`` with every flag given in ``values`` (None, or with ``off_is_unset`` a boolean
    flag left off: not given), each checked first: bounds, then ``--device`` (with ``here``:
    one torch can use on this machine), ``--precision`` on that device, ``--track`` against
    ``trackers`` (task ``task``'s) and ``--track-every``. One :class:`UserError` line naming
    the flag."""
    given = {k: v for k, v in values.items()
             if v is not None and not (off_is_unset and v is False)}
    check_bounds(given)
    device = str(given.get("device", base.device))
    options.check_device(device, here=here)
    options.check_precision(str(given.get("precision", base.precision)), device, here=here)
    if "track" in given or "track_every" in given:
        track = given.get("track", ",".join(base.track))
        if isinstance(track, list | tuple):
            track = ",".join(map(str, track))
        given["track"] = options.check_track(str(track), str(given.get(
            "track_every", base.track_every)), trackers, task)
    try:
        return base.merged(**given)
    except ValidationError as err:  # a type the checks above do not cover (Python callers)
        e = err.errors()[0]
        name = str(e["loc"][0]) if e.get("loc") else "settings"
        raise UserError(f"{flag_name(name)}: {e.get('input')!r} is not allowed; "
                        f"{str(e.get('msg', err)).lower()}") from None
