"""Why a request body does not decode, and that reason in each client protocol's own words.

Every client API decodes its body through ``decode_body``: the JSON nesting is
bounded first (``MAX_JSON_DEPTH``: what walks a decoded value recurses, and
msgspec itself raises RecursionError near 100,000 levels), and so are its items
(``MAX_JSON_ITEMS``: msgspec holds the GIL for a whole decode, so a body of
millions of small values stalls every request of the process, in a worker
thread too), and a key an object names twice is refused (msgspec and the router
read its last value, a backend may read the first: the request routed would not
be the one answered), then msgspec decodes and validates. A failure becomes one ``Problem`` (what is wrong, where, with
the allowed values when the schema has a list of them), which each protocol
renders as its API does:

- OpenAI (Chat, Responses, Images): ``{"error": {message, type, param, code}}``
  with ``param`` the field's path, ``messages[0].role``, and OpenAI's codes
  (``unknown_parameter``, ``empty_array``, ``invalid_type``, ``invalid_value``).
- Anthropic (Messages): ``{"type": "error", "error": {"type": "invalid_request_error",
  "message": "messages.1.role: Input should be 'user', 'assistant' or 'system'"}}``:
  the dotted path, then the validation message in Anthropic's wording.
"""
from __future__ import annotations

import functools
import math
import re
import types
import typing
from dataclasses import dataclass, replace
from typing import Any

import msgspec
from msgspec import inspect as mi

from .._ext.jsonscan import json_path, json_shape
from ..errors import (
    SHOWN_MAX, WITHHELD, EmptyArray, InvalidJson, InvalidType, InvalidUtf8, InvalidValue, RequestError, UnknownParameter, VsrError,
    shown,
)
from .chat import ENCODER, ErrorBody, ErrorResponse
from .error_types import openai_type

# Deeper than any real request (a tool's JSON Schema rarely passes 20) and far below
# the interpreter's recursion limit, which msgspec.to_builtins and our walks share.
MAX_JSON_DEPTH = 256
# Arrays, objects and the commas between their members and elements: about one per JSON value. Decoding
# 200,000 takes msgspec ~30 ms and the response cache's canonical form ~80 ms more, on one core, with the
# GIL held; past it the time grows faster than the count (the collector scans every object made). A
# conversation of 2,000 messages with 128 tools of rich schemas holds some tens of thousands; 64 MiB of
# 420,000 small tools held 4.2 million and froze the router for 20 s.
MAX_JSON_ITEMS = 200_000

_AT = re.compile(r" - at `\$([^`]*)`$")
_SEGMENT = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]")
_MISSING = re.compile(r"Object missing required field `([^`]*)`")
_UNKNOWN = re.compile(r"Object contains unknown field `([^`]*)`")
_WRONG_TYPE = re.compile(r"Expected `([^`]*)`, got `([^`]*)`")
_BOUND = re.compile(r"Expected `([^`]*)` (>=|<=|>|<) (\S+)$")
_LENGTH = re.compile(r"Expected `([^`]*)` of length (>=|<=) (\d+)$")
_ENUM = re.compile(r"Invalid enum value '(.*)'$")
_VALUE = re.compile(r"Invalid value '(.*)'$")

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason a body does not decode. ``kind``: json, utf8, depth, items, duplicate, missing, unknown,
    type, bound, length, enum, tag or invalid; ``path``: where, as keys and indices."""

    kind: str
    path: Path = ()
    detail: str = ""                 # msgspec's own words, without the path, nor the refused value
    value: str | None = None         # the refused enum value or tag, as sent: rendered only ``shown`` or withheld
    options: tuple[str, ...] = ()    # the allowed values, when the schema lists them
    expected: str = ""               # the expected type, or the bound/length constraint
    got: str = ""


class BodyProblem(Exception):
    """Raised by ``decode_body``; render ``problem`` in the client's protocol."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.detail)
        self.problem = problem


def decode_body(decoder: msgspec.json.Decoder, raw: bytes) -> Any:
    """``decoder.decode(raw)``, refusing over-deep JSON, JSON of too many items and a key named twice in one
    object first; BodyProblem on any failure."""
    problem = shape_problem(raw, decoder.type)
    if problem is not None:
        raise BodyProblem(problem)
    try:
        return decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise BodyProblem(_lone_surrogate(exc, raw) or keys_named(problem_of(exc, decoder.type), raw,
                                                                  decoder.type)) from None
    except RecursionError:   # unreachable past the depth check; kept so no decode can be a 500
        raise BodyProblem(Problem("depth", detail="JSON nested too deeply")) from None


def shape_problem(raw: bytes, schema: Any = None) -> Problem | None:
    """What the checks before any decode find wrong with ``raw`` (not UTF-8, nested deeper than MAX_JSON_DEPTH,
    more than MAX_JSON_ITEMS items, a key named twice in one object: the jsonscan kernel's one pass,
    GIL-free), or None. ``schema``, the type decoded next, tells its fields from the client's keys in a path."""
    utf8 = utf8_problem(raw, schema)
    if utf8 is not None:
        return utf8
    depth, items, key, repeated = json_shape(raw, MAX_JSON_DEPTH, MAX_JSON_ITEMS)
    if depth > MAX_JSON_DEPTH:
        return Problem("depth", _member(raw, key, schema), detail=f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    if items > MAX_JSON_ITEMS:
        return Problem("items", _member(raw, key, schema), detail=(
            f"JSON of more than {MAX_JSON_ITEMS} items (arrays, objects, and the members and elements they list)"))
    if repeated >= 0:
        return Problem("duplicate", path_at(raw, repeated, schema), detail="JSON object names this key twice")
    return None


def utf8_problem(raw: bytes, schema: Any = None) -> Problem | None:
    """Why ``raw`` is not UTF-8, naming the field the first bad byte is in, or None. msgspec validates only the
    strings it decodes: an unknown field's, a key's of a Struct, a passthrough's (``Raw``) would reach a backend,
    a log or a Redis key as they came. An ASCII body, most of them, costs one word-at-a-time scan (0.3 µs for
    2 KB, 40 µs for 1 MB); any other is decoded once (about 4 ms a non-ASCII MB, 5 µs for 2 KB)."""
    if raw.isascii():
        return None
    try:
        raw.decode()
    except UnicodeDecodeError as exc:
        return Problem("utf8", path_at(raw, exc.start, schema),
                       detail=f"Invalid UTF-8 encoded string (byte {exc.start})")
    return None


# A JSON string at an offset: its quotes and what is between them, escapes kept.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)


def _key_at(raw: bytes, offset: int) -> str | None:
    """The key whose opening quote is at ``offset``, unescaped; None if it does not decode (the body is refused
    all the same)."""
    found = _STRING.match(raw, offset)
    if found is None:
        return None
    try:
        return msgspec.json.decode(found.group())
    except msgspec.DecodeError:
        return None


def path_at(raw: bytes, offset: int, schema: Any = None) -> Path:
    """The path of the value (or key) at ``offset`` of JSON text ``raw``, as far as its keys decode: a key
    ``schema`` names as a field stays as it is, any other is the client's (``ClientKey``). Past MAX_JSON_DEPTH
    levels, only the top-level member: a path is a param, never a copy of the body. On the error path only
    (the kernel's one walk up to ``offset``)."""
    steps = json_path(raw, offset)
    if len(steps) > MAX_JSON_DEPTH:
        steps = steps[:1]
    candidates: list[Any] = [schema] if schema is not None else []
    path: list[str | int] = []
    for step in steps:
        if isinstance(step, int):
            path.append(step)
            candidates = [v for t in candidates for v in _py_step(t, step)]
            continue
        name = _key_at(raw, step[0]) if step[0] >= 0 else None
        if name is None:
            break
        fields = [v for t in candidates if t is not Any for v in _py_step(t, name)]
        if fields:
            path.append(name)
            candidates = fields
        else:
            path.append(ClientKey(name if _PLAIN_KEY.fullmatch(name) else json_key(name)))
            candidates = [v for t in candidates for v in _py_step(t, "...")]
    return tuple(path)


def _member(raw: bytes, key: int, schema: Any = None) -> Path:
    """The path of the top-level member whose name's opening quote is at ``key``; () if none or unreadable."""
    return path_at(raw, key, schema)[:1] if key >= 0 else ()


# msgspec (0.23) misnames one JSON error: a high surrogate escape (\ud800-\udbff) not followed by
# another escape is "Input data was truncated" in a field it decodes when fewer than 6 bytes follow (the
# body whole, the escape complete), "unexpected end of escaped utf-16 surrogate pair (byte N)" when more
# do, and "unexpected end of hex escape (byte N)" in a field it skips. Followed by an escape that is no
# low surrogate, it says "invalid utf-16 surrogate pair (byte N)", as for a lone low one: so do we.
_MISNAMED = re.compile(r"Input data was truncated|JSON is malformed: unexpected end of "
                       r"(?:hex escape|escaped utf-16 surrogate pair) \(byte (\d+)\)")
# An escaped backslash, or a high surrogate escape: scanning left to right, ``\\`` pairs are consumed
# whole, so ``\u`` matches only where an escape starts.
_HIGH_ESCAPE = re.compile(rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}")
_LOW_ESCAPE = re.compile(rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_ESCAPE_PREFIX = re.compile(rb"(\\(u[0-9a-fA-F]{0,3})?)?")


def _lone_surrogate(exc: msgspec.DecodeError, raw: bytes) -> Problem | None:
    """msgspec's misnamed error for a lone high surrogate, in the words it uses for a lone low one; None
    for every other error (a body cut off after a high surrogate, or within the escape after it, is
    truncated). Runs on the error path only: one scan of the body."""
    found = _MISNAMED.fullmatch(str(exc))
    if found is None or isinstance(exc, msgspec.ValidationError):
        return None
    for m in _HIGH_ESCAPE.finditer(raw):
        end = m.end()
        if m.group() == b"\\\\" or _LOW_ESCAPE.match(raw, end):
            continue
        if _ESCAPE_PREFIX.fullmatch(raw, end) or (found.group(1) is not None and int(found.group(1)) != end):
            return None
        return Problem("json", detail=f"JSON is malformed: invalid utf-16 surrogate pair (byte {end})")
    return None


def problem_of(exc: msgspec.DecodeError, schema: Any = None) -> Problem:
    """A msgspec error as a Problem; ``schema`` (the decoded type) supplies allowed values."""
    text = str(exc)
    if not isinstance(exc, msgspec.ValidationError):
        kind = "utf8" if "UTF-8" in text else "json"
        return Problem(kind, detail=text)
    # A block decoded by a hook (``anthropic.AnyBlock``) says where inside it, then msgspec says where the block
    # is: read from the end, the outer path comes first.
    path: Path = ()
    detail = text
    while (m := _AT.search(detail)) is not None:
        path = (*path, *_parse_path(m.group(1)))
        detail = detail[:m.start()]
    if (found := _MISSING.match(detail)) is not None:
        return Problem("missing", (*path, found.group(1)), detail)
    if (found := _UNKNOWN.match(detail)) is not None:
        # The field's name is the client's (any length, any characters): named in the path escaped and cut.
        name = found.group(1)
        if len(name) > SHOWN_MAX or not name.isprintable():
            name = repr(name[:SHOWN_MAX])[1:-1] + ("..." if len(name) > SHOWN_MAX else "")
            detail = f"Object contains unknown field `{name}`"
        return Problem("unknown", (*path, name), detail)
    if (found := _WRONG_TYPE.match(detail)) is not None:
        return Problem("type", path, detail, expected=found.group(1), got=found.group(2))
    if (found := _LENGTH.match(detail)) is not None:
        return Problem("length", path, detail, expected=f"{found.group(2)} {found.group(3)}", got=found.group(1))
    if (found := _BOUND.match(detail)) is not None:
        return Problem("bound", path, detail, expected=f"{found.group(2)} {found.group(3)}", got=found.group(1))
    # The value msgspec quotes leaves its words (the client's, any length, any characters): renderers show it cut
    # and escaped, or not at all (``unechoed``), and the logs never.
    if (found := _ENUM.match(detail)) is not None:
        return Problem("enum", path, "Invalid enum value", found.group(1), _literal_values(schema, path))
    if (found := _VALUE.match(detail)) is not None:
        tags = _tags(schema, path[:-1]) if path else ()
        if tags:
            return Problem("tag", path, "Invalid value", found.group(1), tags)
        return Problem("invalid", path, "Invalid value", found.group(1))
    return Problem("invalid", path, detail)


def quoted_values(text: str, withheld: str | None = None) -> str:
    """msgspec's words ``text`` with the value it quotes (``Invalid value 'x' - at ...``) ``shown``: for a protocol
    that renders msgspec's message as it is (System One); with ``withheld``, that in the value's place (the logs')."""
    def show(m: re.Match) -> str:
        return f"{m.group(1)} {withheld or shown(m.group(2))}"
    return _QUOTED.sub(show, text, count=1)


_QUOTED = re.compile(r"^(Invalid (?:enum )?value) '(.*)'(?=$| - at `)", re.S)


def _parse_path(text: str) -> Path:
    out: list[str | int] = []
    for m in _SEGMENT.finditer(text):
        if m.group(1) is not None:
            out.append(m.group(1))
        elif m.group(2) is not None:
            out.append(int(m.group(2)))
        else:
            out.append("...")
    return tuple(out)


# --- the keys msgspec does not name ---------------------------------------------------------

# A key shown as it is in a path; any other (a dot, a bracket, a space, past 64 characters) is quoted, as jq
# writes one (``metadata."a.b"``), and cut at 64 characters: a path is a param, never a copy of the body.
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
KEY_LIMIT = 64
# A client's key in a path is the client's text too ("metadata.\"Maria Gonzalez maria@example.com\""): the
# logs and a private request's client read this in its place, as they read ``WITHHELD`` for a value.
KEY_WITHHELD = "(key not shown)"


class ClientKey(str):
    """A path segment that is a key the client chose (a dict's), not a field the schema names."""


class _OutOfRange:
    """A JSON number past a float's range (``1e400``): what no numeric type converts from."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _number(text: str) -> float | _OutOfRange:
    value = float(text)
    return _OutOfRange(text) if math.isinf(value) else value


# The body read again on the error path: msgspec's decode to Python values refuses a number past a float's range
# ("Number out of range"), the very error being named; this one keeps it as a value no type accepts. An integer
# of any length stays an ``int``.
_LENIENT = msgspec.json.Decoder(float_hook=_number)


def keys_named(problem: Problem, raw: bytes, schema: Any) -> Problem:
    """``problem`` with each ``...`` of its path (msgspec's word for "some value of this dict") replaced by the key
    whose value fails: the first, in the body's order, that does not convert to the dict's value type; and an
    integer past 64 bits, which msgspec calls a ``float``, called an ``int``. Read from the body again, on the
    error path only (its size is bounded by then). Unchanged when no key can be told."""
    misnamed = problem.kind == "type" and problem.got == "float"
    if ("..." not in problem.path or schema is None) and not misnamed:
        return problem
    try:
        value = _LENIENT.decode(raw)
    except msgspec.DecodeError:
        return problem
    candidates: list[Any] = [schema]
    path: list[str | int] = []
    for segment in problem.path:
        if segment == "...":
            candidates = [v for t in candidates for v in _py_step(t, "...")]
            key = _failing_key(value, candidates) if isinstance(value, dict) else None
            if key is None:
                return problem
            path.append(ClientKey(key if _PLAIN_KEY.fullmatch(key) else json_key(key)))
            value = value[key]
            continue
        candidates = [v for t in candidates for v in _py_step(t, segment)]
        try:
            value = value[segment]
        except (KeyError, IndexError, TypeError):
            return problem
        path.append(segment)
    if misnamed and isinstance(value, int) and not isinstance(value, bool):
        problem = replace(problem, got="int", detail=problem.detail.replace("got `float`", "got `int`"))
    return replace(problem, path=tuple(path))


def json_key(key: str) -> str:
    """A key quoted for a path, cut at ``KEY_LIMIT`` characters (``...`` inside the quotes says it was)."""
    cut = key[:KEY_LIMIT] + ("..." if len(key) > KEY_LIMIT else "")
    return msgspec.json.encode(cut).decode()


def _failing_key(items: dict, candidates: list[Any]) -> str | None:
    if not candidates:
        return None
    for key, item in items.items():
        if not any(_converts(item, t) for t in candidates):
            return key
    return None


def _converts(value: Any, t: Any) -> bool:
    try:
        msgspec.convert(value, t)
    except msgspec.ValidationError:
        return False
    except Exception:   # a type only a decoder's hook reads: not one this check can judge, so not the culprit
        return True
    return not _out_of_range(value)     # an ``Any`` takes it as it is, where the decoder refused it


def _out_of_range(value: Any) -> bool:
    """Whether ``value`` holds a number past a float's range (its depth is bounded by the scan)."""
    if isinstance(value, _OutOfRange):
        return True
    if isinstance(value, dict):
        return any(_out_of_range(v) for v in value.values())
    if isinstance(value, list):
        return any(_out_of_range(v) for v in value)
    return False


def _py_step(t: Any, segment: str | int) -> list[Any]:
    """The Python types one step below ``t``: a dict's values (``...``), a list's items (an index), a Struct's
    field (a name); unions and Annotated looked through."""
    if t is Any:
        return [Any]     # anything below Any is Any
    origin = typing.get_origin(t)
    if origin is typing.Annotated:
        return _py_step(typing.get_args(t)[0], segment)
    if origin is typing.Union or isinstance(t, types.UnionType):
        return [found for member in typing.get_args(t) for found in _py_step(member, segment)]
    if segment == "...":
        return [typing.get_args(t)[1]] if origin is dict and len(typing.get_args(t)) == 2 else []
    if isinstance(segment, int):
        return [typing.get_args(t)[0]] if origin is list and typing.get_args(t) else []
    if isinstance(t, type) and issubclass(t, msgspec.Struct):
        return [f.type for f in msgspec.structs.fields(t) if f.encode_name == segment]
    return []


# --- allowed values, read from the schema ---------------------------------------------------


def _literal_values(schema: Any, path: Path) -> tuple[str, ...]:
    return tuple(str(v) for t in _types_at(schema, path) if isinstance(t, mi.LiteralType) for v in t.values)


def _tags(schema: Any, path: Path) -> tuple[str, ...]:
    """The tags of the tagged union found at ``path`` (a content block's ``type``s, say)."""
    return tuple(dict.fromkeys(str(t.tag) for t in _types_at(schema, path)
                               if isinstance(t, mi.StructType) and t.tag is not None))


def _types_at(schema: Any, path: Path) -> list[mi.Type]:
    if schema is None:
        return []
    return _walk(_info(schema), tuple("#" if isinstance(p, int) else p for p in path))


@functools.cache
def _info(schema: Any) -> mi.Type:
    return mi.type_info(schema)


def _walk(t: mi.Type, path: tuple[str, ...]) -> list[mi.Type]:
    """Every type that can stand at ``path`` below ``t`` (unions and containers looked through)."""
    if isinstance(t, mi.UnionType):
        return [found for member in t.types for found in _walk(member, path)]
    if isinstance(t, mi.Metadata):
        return _walk(t.type, path)
    if isinstance(t, mi.CustomType) and hasattr(t.cls, "schema_type"):
        return _walk(_info(t.cls.schema_type), path)   # a type decoded by a hook, standing for this one
    if not path:
        return [t]
    head, rest = path[0], path[1:]
    if isinstance(t, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)) and head == "#":
        return _walk(t.item_type, rest)
    if isinstance(t, mi.DictType):
        return _walk(t.value_type, rest)
    if isinstance(t, mi.StructType):
        return [found for f in t.fields if f.encode_name == head for found in _walk(f.type, rest)]
    return []


# --- OpenAI's words ---------------------------------------------------------------------------


def openai_path(path: Path) -> str:
    """``messages[0].content``: OpenAI's ``param``."""
    out = ""
    for p in path:
        if isinstance(p, int) or p == "...":   # "...": a dict key msgspec does not name
            out += f"[{p}]"
        else:
            out += f".{p}" if out else p
    return out


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def _code(p: Problem) -> str:
    """OpenAI's error code for the problem (kept on our errors for every protocol: events, metrics)."""
    if p.kind == "length" and p.expected == ">= 1" and p.got != "str":     # an empty string is no array
        return "empty_array"
    return {"json": "invalid_json", "utf8": "invalid_utf8", "depth": "invalid_json", "duplicate": "invalid_json",
            "type": "invalid_type", "unknown": "unknown_parameter"}.get(p.kind, "invalid_value")


# Each code a decode problem can have -> its class in the error tree.
_ERRORS: dict[str, type[RequestError]] = {
    "invalid_json": InvalidJson, "invalid_utf8": InvalidUtf8, "invalid_type": InvalidType,
    "invalid_value": InvalidValue, "empty_array": EmptyArray, "unknown_parameter": UnknownParameter,
}


def _withheld(_value: str) -> str:
    return WITHHELD


def _rendered(problem: Problem, error: RequestError, render) -> RequestError:
    """``error`` told its message without the refused value and the client's keys in its path (the logs' and a
    private request's), if it has either."""
    keyed = any(isinstance(s, ClientKey) for s in problem.path)
    if problem.value is None and not keyed:
        return error
    if keyed:
        problem = replace(problem, path=tuple(KEY_WITHHELD if isinstance(s, ClientKey) else s for s in problem.path))
    return error.withhold(render(problem, _withheld), param=openai_path(problem.path) or None if keyed else error.param)


def openai_request_error(problem: Problem) -> RequestError:
    """A 400 in OpenAI's shape: ``param`` is the path, ``code`` says what kind of problem."""
    path = openai_path(problem.path)
    return _rendered(problem, _ERRORS[_code(problem)](_openai_message(problem, shown), param=path or None),
                     _openai_message)


def _openai_message(p: Problem, show) -> str:
    """The problem in OpenAI's words, its refused value (if any) written by ``show``."""
    path = openai_path(p.path)
    where = f" at `{path}`" if path else ""
    code = _code(p)
    if p.kind == "json":
        message = f"Request body is not valid JSON: {p.detail}"
    elif p.kind == "utf8":
        message = f"Request body is not valid UTF-8: {p.detail}{where}"
    elif p.kind == "duplicate":
        message = f"Invalid request body: {p.detail}{where}"
    elif p.kind in ("depth", "items"):
        message = f"Request body is not accepted: {p.detail}" + (f"; passed in '{path}'" if path else "")
    elif p.kind == "unknown":
        message = f"Unknown parameter: '{path}'."
    elif code == "empty_array":
        message = (f"Invalid '{path}': empty array. Expected an array with minimum length 1, "
                   "but got an empty array instead.")
    elif p.kind in ("enum", "tag") and p.options:
        message = f"Invalid request body: Invalid value {show(p.value)}{where}. Supported values are: {_quoted(p.options)}."
    elif p.value is not None:
        message = f"Invalid request body: {p.detail} {show(p.value)}{where}"
    else:
        message = f"Invalid request body: {p.detail}{where}"
    return message


def openai_error_body(exc: VsrError, status: int | None = None) -> bytes:
    """``{"error": {message, type, param, code}}`` as OpenAI sends it, typed by the status it answers with
    (``status``, else its own)."""
    kind = openai_type(exc.status if status is None else status)
    return ENCODER.encode(ErrorResponse(ErrorBody(exc.message, kind, exc.param, exc.code)))


# --- Anthropic's words -----------------------------------------------------------------------------

# msgspec's type names -> the words Anthropic's validation messages use.
_TYPE_WORDS = {"str": "a valid string", "int": "a valid integer", "float": "a valid number",
               "bool": "a valid boolean", "array": "a valid list", "object": "a valid dictionary",
               "null": "null"}
_BOUND_WORDS = {">=": "greater than or equal to", "<=": "less than or equal to", ">": "greater than",
                "<": "less than"}


def anthropic_path(path: Path) -> str:
    """``messages.1.role``: how Anthropic names a field in its messages."""
    return ".".join(str(p) for p in path)


def _or(values: list[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + f" or {values[-1]}"


def anthropic_message(problem: Problem, show=shown) -> str:
    """The problem as Anthropic words it: ``<dotted path>: <what is wrong>``, its refused value (if any) written
    by ``show``."""
    p = problem
    if p.kind == "json":
        return f"There was an error parsing the body of your request: {p.detail}"
    if p.kind in ("utf8", "depth", "items"):
        what = (f"The request body is not valid UTF-8: {p.detail}" if p.kind == "utf8" else
                f"The request body is not accepted: {p.detail}")
        return f"{anthropic_path(p.path)}: {what}" if p.path else what
    path = p.path
    if p.kind == "missing":
        what = "Field required"
    elif p.kind == "unknown":
        what = "Extra inputs are not permitted"
    elif p.kind == "type":
        what = "Input should be " + _or([_TYPE_WORDS.get(t.strip(), f"a valid {t.strip()}")
                                         for t in p.expected.split("|")])
    elif p.kind == "bound":
        op, bound = p.expected.split(" ", 1)
        what = f"Input should be {_BOUND_WORDS[op]} {bound}"
    elif p.kind == "length" and path == ("messages",) and p.expected == ">= 1":
        what = "at least one message is required"
    elif p.kind == "length":
        op, n = p.expected.split(" ", 1)
        what = f"List should have {'at least' if op == '>=' else 'at most'} {n} item{'s' if n != '1' else ''}"
    elif p.kind == "enum" and p.options:
        what = "Input should be " + _or([f"'{v}'" for v in p.options])
    elif p.kind == "tag":
        path = path[:-1]   # Anthropic names the block, then the tag field it read
        what = (f"Input tag {show(p.value)} found using 'type' does not match any of the expected tags: "
                f"{_quoted(p.options)}")
    elif p.value is not None:
        what = f"{p.detail} {show(p.value)}"
    else:
        what = p.detail
    return f"{anthropic_path(path)}: {what}" if path else what


def anthropic_request_error(problem: Problem) -> RequestError:
    """A 400 whose message is in Anthropic's words (the Messages adapter renders its shape)."""
    return _rendered(problem, _ERRORS[_code(problem)](anthropic_message(problem), param=openai_path(problem.path) or None),
                     anthropic_message)


__all__ = ["BodyProblem", "MAX_JSON_DEPTH", "MAX_JSON_ITEMS", "Problem", "anthropic_message", "anthropic_path",
           "anthropic_request_error", "decode_body", "utf8_problem", "openai_error_body", "openai_path",
           "openai_request_error", "problem_of", "quoted_values", "shape_problem"]
