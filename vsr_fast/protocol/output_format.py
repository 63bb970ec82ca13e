"""The structured-output request a client names (Chat's ``response_format``, Responses' ``text.format``), checked
as OpenAI checks it: a shape it refuses is a 400 naming the field here, not prose from a backend that dropped it."""
from __future__ import annotations

from typing import Any

from .errors import Path, Problem

FORMAT_TYPES = ("text", "json_object", "json_schema")


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "str", bool: "bool", int: "int", float: "float"}.get(
        type(value), "null")


def format_problem(fmt: Any, path: Path, schema_at: Path) -> Problem | None:
    """Why ``fmt`` (at ``path``) is no format OpenAI takes, else None. A json_schema format needs a JSON Schema
    object at ``schema_at`` below it (Chat's ``json_schema``, Responses' ``schema``)."""
    if not isinstance(fmt, dict):
        return None     # the request's schema types the field: a non-object was refused by the decoder
    kind = fmt.get("type")
    if kind is None:
        return Problem("missing", (*path, "type"), "Object missing required field `type`")
    if kind not in FORMAT_TYPES:
        return Problem("enum", (*path, "type"), f"Invalid enum value '{kind}'", str(kind), FORMAT_TYPES)
    if kind != "json_schema":
        return None
    schema = fmt
    for i, key in enumerate(schema_at):
        if key not in schema:
            return Problem("missing", (*path, *schema_at[:i + 1]), f"Object missing required field `{key}`")
        schema = schema[key]
        if not isinstance(schema, dict):
            return Problem("type", (*path, *schema_at[:i + 1]), f"Expected `object`, got `{_json_type(schema)}`",
                           expected="object", got=_json_type(schema))
    return None
