"""Commands generated from what studies declare (issue 9): ``rulelab train TASK`` and
``rulelab data TASK`` take one flag per config field (named by the config class,
:meth:`rulelab.config.base.RunConfig.flag`; its description is the help), ``rulelab analyze
NAME`` the options its study declares. Studies name no command-line code; this module names no
study.

A typer command is a function whose signature lists its options; a generated one is a
``**values`` function given an :class:`inspect.Signature` built from the declaration.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable

import typer
from pydantic.fields import FieldInfo

# Every value flag of `train` takes one or more values (lists expand to a grid); these
# commands' list flags, by command path, for the entry point to split `--ratio 0.5 0.9`.
LIST_FLAGS: dict[tuple[str, ...], set[str]] = {}


def base_type(annotation) -> type:
    """The scalar type a field's values have (``Literal[2, 3]`` → int, ``str | None`` → str)."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return type(args[0])
    if args and typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return base_type(next(a for a in args if a is not type(None)))
    return annotation


def is_bool(field: FieldInfo) -> bool:
    return base_type(field.annotation) is bool


def field_option(cls, name: str, field: FieldInfo, default, *, many: bool) -> inspect.Parameter:
    """The option of config field ``name``: ``--flag/--no-flag`` for a boolean, else a value
    flag (``many``: one or more values)."""
    flag, help_ = cls.flag(name), field.description or ""
    if is_bool(field):
        decl = f"{flag}/--no-{flag.removeprefix('--')}"
        annotation = bool | None if default is None else bool
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                 default=typer.Option(default, decl, help=help_))
    kind = base_type(field.annotation)
    if many:
        kind = list[kind]
        default = default if default is None or isinstance(default, list) else [default]
    allowed = typing.get_args(field.annotation) if typing.get_origin(
        field.annotation) is typing.Literal else ()
    if allowed:
        help_ = f"{help_} ({', '.join(map(str, allowed))})".strip()
    annotation = kind | None if default is None else kind
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                             default=typer.Option(default, flag, help=help_))


def command(run: Callable[..., None], params: list[inspect.Parameter], doc: str) -> Callable:
    """A typer command calling ``run(**values)`` with the options ``params``."""
    def cmd(**values) -> None:
        run(**values)

    cmd.__signature__ = inspect.Signature(params)
    cmd.__annotations__ = {p.name: p.annotation for p in params}
    cmd.__doc__ = doc
    return cmd


def list_flags(params: list[inspect.Parameter]) -> set[str]:
    """The flags of ``params`` that take lists."""
    out = set()
    for p in params:
        kind = base_type(p.annotation)
        if typing.get_origin(kind) is list:
            out.update(p.default.param_decls)
    return out
