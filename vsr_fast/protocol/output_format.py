"""The structured-output request a client names (Chat's ``response_format``, Responses' ``text.format``), checked
as OpenAI checks it: a shape it refuses is a 400 naming the field here, not prose from a backend that dropped it.
A type of another server's (vLLM's ``structural_tag``) passes: a backend of the client's format may take it, and
where the body is translated it is dropped with a warning."""
from __future__ import annotations

from typing import Any

from .errors import Path, Problem

def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "str", bool: "bool", int: "int", float: "float"}.get(
        type(value), "null")


def format_problem(fmt: Any, path: Path, schema_at: Path) -> Problem | None:
    """Why ``fmt`` (at ``path``) is no format at all, else None: it needs a type, and a json_schema one a JSON
    Schema object at ``schema_at`` below it (Chat's ``json_schema``, Responses' ``schema``)."""
    if not isinstance(fmt, dict):
        return None     # the request's schema types the field: a non-object was refused by the decoder
    kind = fmt.get("type")
    if kind is None:
        return Problem("missing", (*path, "type"), "Object missing required field `type`")
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
