"""Shape errors: msgspec validation errors as one line each, ``<path>: <code>: <message>``, siblings all reported."""
from __future__ import annotations

import difflib
import re
import types
import typing

import msgspec
from msgspec import UnsetType

from . import _paths
from .schema import convert


_MSG = [
    (re.compile(r"Object contains unknown field `([^`]*)`"), "unknown_field", "{0}", "not a field of this block"),
    (re.compile(r"Object missing required field `([^`]*)`"), "missing_field", "{0}", "required"),
    (re.compile(r"Expected `([^`]*)`, got `([^`]*)`"), "invalid_type", "", "expected {0}, got {1}"),
]


def render_validation_error(exc: msgspec.ValidationError, base: list[str | int], raw: object,
                            typ: object = None) -> str:
    """One line ``<path>: <code>: <message>`` for a msgspec validation error."""
    return _problem(exc, base, raw, typ)[1]


def _problem(exc: msgspec.ValidationError, base: list[str | int], raw: object,
             typ: object = None) -> tuple[list[str | int], str]:
    """``(steps, line)`` of a validation error; an enum error lists the values ``typ`` takes, when known."""
    text = str(exc)
    message, _, where = text.partition(" - at `")
    steps = base + _paths.steps_of(where.rstrip("`")) if where else list(base)
    code, detail = "invalid_value", message
    for pattern, c, extra_step, template in _MSG:
        m = pattern.search(message)
        if m:
            code, detail = c, template.format(*m.groups())
            if extra_step:
                steps.append(extra_step.format(*m.groups()))
            break
    values = literal_values(_type_at(typ, _paths.steps_of(where.rstrip("`")))) if where else literal_values(typ)
    if values and message.startswith("Invalid enum value"):
        detail = f"{detail} (one of: {', '.join(map(str, values))})"
    if code == "invalid_type" and detail.endswith(", got str"):
        # What YAML read as a string, said: YAML 1.1 reads 1e4 as one.
        found = _value_at(raw, steps)
        if isinstance(found, str):
            detail += f" {found[:60]!r}"
    elif code == "unknown_field":
        detail += did_you_mean(str(steps[-1]), _field_names(typ, _paths.steps_of(where.rstrip("`"))))
    return steps, f"{_paths.render(steps, raw)}: {code}: {detail}"


def did_you_mean(name: str, known) -> str:
    """``; did you mean <the closest of known>?``, or "" when none is close: every unknown field's suggestion."""
    near = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {near[0]}?" if near else ""


def _value_at(raw: object, steps: list[str | int]) -> object:
    for step in steps:
        try:
            raw = raw[step]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            return None
    return raw


def _type_at(typ: object, steps: list[str | int]) -> object:
    """The type of the node at ``steps`` below ``typ`` (None when the walk meets no Struct, list or dict)."""
    for step in steps:
        typ = _unwrap(typ)
        if isinstance(typ, type) and issubclass(typ, msgspec.Struct):
            typ = next((f.type for f in msgspec.structs.fields(typ) if f.encode_name == step), None)
        elif typing.get_origin(typ) in (list, dict):
            typ = typing.get_args(typ)[-1]
        else:
            return None
    return typ


def _field_names(typ: object, steps: list[str | int]) -> list[str]:
    """The field names of the block at ``steps`` below ``typ`` (none when it is not a Struct)."""
    typ = _unwrap(_type_at(typ, steps))
    if isinstance(typ, type) and issubclass(typ, msgspec.Struct):
        return [f.encode_name for f in msgspec.structs.fields(typ)]
    return []


def literal_values(typ: object) -> tuple | None:
    """The values a Literal type (through Annotated, Optional and Unset) takes, or None."""
    typ = _strip(typ)
    if typing.get_origin(typ) is typing.Literal:
        return typing.get_args(typ)
    if typing.get_origin(typ) in (typing.Union, types.UnionType):
        values: list = []
        for member in typing.get_args(typ):
            m = _strip(member)
            if typing.get_origin(m) is typing.Literal:
                values.extend(typing.get_args(m))
        return tuple(values) or None
    return None


def _strip(typ: object) -> object:
    while typing.get_origin(typ) is typing.Annotated:
        typ = typing.get_args(typ)[0]
    return typ


def collect_shape_errors(value: object, typ: object, steps: list[str | int], raw: object) -> list[str]:
    """Every shape error in ``value``, descending so that sibling errors are all reported.

    msgspec stops at the first error; we re-check each child on its own so one
    load lists every bad block. An error that no child explains is this level's.
    """
    return [line for _, line in collect_shape_problems(value, typ, steps, raw)]


def collect_shape_problems(value: object, typ: object, steps: list[str | int],
                           raw: object) -> list[tuple[list[str | int], str]]:
    """``collect_shape_errors`` with each error's steps, so a caller can set the bad node aside."""
    try:
        convert(value, typ)  # type: ignore[arg-type]
        return []
    except msgspec.ValidationError as exc:
        here = _problem(exc, steps, raw, typ)
    problems: list[tuple[list[str | int], str]] = []
    for child_value, child_type, child_steps in _children(value, typ, steps):
        problems.extend(collect_shape_problems(child_value, child_type, child_steps, raw))
    return problems or [here]


def _children(value: object, typ: object, steps: list[str | int]):
    typ = _unwrap(typ, value)
    origin = typing.get_origin(typ)
    if origin is list and isinstance(value, list):
        (item_type,) = typing.get_args(typ)
        for i, item in enumerate(value):
            yield item, item_type, steps + [i]
    elif origin is dict and isinstance(value, dict):
        # msgspec names a dict's key "..." in its paths; descending names it (deployments.<name>...).
        _, item_type = typing.get_args(typ)
        for key, item in value.items():
            yield item, item_type, steps + [str(key)]
    elif isinstance(typ, type) and issubclass(typ, msgspec.Struct) and isinstance(value, dict):
        for f in msgspec.structs.fields(typ):
            if f.encode_name in value:
                yield value[f.encode_name], f.type, steps + [f.encode_name]


def _unwrap(typ: object, value: object = None) -> object:
    """Strip Annotated, Optional and Unset so the descent sees the container or Struct; of a union of several,
    the one member that takes ``value``'s kind (a mapping, a list), so an error inside it has its own path."""
    while True:
        origin = typing.get_origin(typ)
        if origin is typing.Annotated:
            typ = typing.get_args(typ)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(typ) if a is not type(None) and a is not UnsetType]
            if len(args) != 1:
                args = [a for a in args if _takes(a, value)]
                if len(args) != 1:
                    return typ
            typ = args[0]
        else:
            return typ


def _takes(typ: object, value: object) -> bool:
    """Whether ``typ`` is the container that reads ``value``'s kind: a dict or Struct a mapping, a list a list."""
    typ = _strip(typ)
    if isinstance(value, dict):
        return typing.get_origin(typ) is dict or isinstance(typ, type) and issubclass(typ, msgspec.Struct)
    return isinstance(value, list) and typing.get_origin(typ) is list
