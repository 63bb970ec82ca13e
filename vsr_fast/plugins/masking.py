"""``masking``: replace the personal data a named ``pii`` rule finds in the provider-bound request (spec 5.7).

The last of the request rewrites. It reads the request as it is sent, in the
candidate's ``api_format``: system instructions, messages, tool-call
arguments and tool results, what a system prompt brought in, and the tool
and output declarations (descriptions, and every string of their JSON
schemas: defaults, enum values, examples), the stop sequences, and the
caller's identifiers (``user``, ``safety_identifier``, ``prompt_cache_key``,
``metadata``'s values, Messages' ``metadata.user_id``, a Chat message's
``name``), and every other field the provider reads but ``_UNREAD``'s ids, enums and credentials (a
Responses ``prompt``'s variables, Messages' ``output_format``, Chat's ``web_search_options``). Each text position is asked about on its own (``texts``); every
value a kept span labels is then replaced, wherever a copy of it appears in
those positions, by its own numbered placeholder (``replace``;
``MaskingConfig``): a value of letters alone only as whole words (``copies``), which
``vsr_fast.plugins.unmask`` turns back into the value in the answer. The System One side (asking,
reuse by text, failing closed) is ``vsr_fast.server.pipeline.masking``; the
load checks that need the recipe's rules are ``vsr_fast.routing.plugin_checks``.

This module is pure: the block, the merged policy, and the walk over a
decoded body.
"""
from __future__ import annotations

import base64
import binascii
import re
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any

from msgspec import UNSET, Meta, UnsetType

from ..config.schema_base import Block
from ..protocol.words import WORD
from ._merge import merged_fields

TYPE = "masking"
Label = Annotated[str, Meta(min_length=1)]

# Where each api_format keeps the conversation: every text position is under one of these.
_ROOTS = {"openai": ("messages",), "anthropic": ("system", "messages"), "responses": ("instructions", "input")}
# Where it declares tools, output shapes and stop sequences: descriptions, any string of their JSON
# schemas (a default, an enum value, an example) and the stop texts are text positions too (``_declared``).
_DECLARED = {"openai": ("tools", "functions", "response_format", "prediction", "stop"),
             "anthropic": ("tools", "stop_sequences"), "responses": ("tools", "text")}
# Where it carries the caller's identifiers: an end user's id, a cache key, free metadata. They are no text a
# model reads, but the provider stores them: an e-mail address used as a user id is personal data too. A
# value masked there loses its distinctness across requests (placeholders are numbered per request, so one
# user is [EMAIL_ADDRESS_1] here and [EMAIL_ADDRESS_2] there): a caller who wants the provider to tell users
# apart sends an opaque or hashed id, which no pii rule labels.
_IDENTIFIERS = {"openai": ("user", "safety_identifier", "prompt_cache_key", "metadata"),
                "anthropic": ("metadata",), "responses": ("user", "safety_identifier", "prompt_cache_key", "metadata")}
# Every other field of the body is read too (``_positions``): whatever the client sends, the provider reads
# ("prompt.variables" of a Responses prompt template, Messages' "output_format" and "output_config.format"
# schemas, Chat's "web_search_options.user_location"), through ``_declared``, so a key naming a kind or an id is
# skipped and a JSON schema is read as one. Except these, whose strings the provider parses as ids, enums or
# credentials: changing one breaks the request, and none holds what a person wrote.
_UNREAD = frozenset({"model", "stream", "service_tier", "reasoning_effort", "previous_response_id", "conversation",
                     "include", "truncation", "modalities", "tool_choice", "function_call", "container",
                     "mcp_servers", "context_management", "background", "store", "stream_options", "logit_bias"})
# The Chat roles whose message ``name`` names a participant: a person's name, perhaps.
_PARTICIPANTS = frozenset({"system", "developer", "user", "assistant"})
# The keys of a declaration whose value is a JSON schema.
_SCHEMAS = frozenset({"parameters", "input_schema", "schema"})
# JSON schema keywords whose strings are names, kinds or patterns (a property list, a type, a $ref).
_SCHEMA_NAMES = frozenset({"type", "format", "$ref", "$schema", "$id", "$anchor", "required", "pattern"})
# JSON schema keywords that map names to schemas: the names are keys, every value a schema.
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
# JSON schema keywords whose values are data: every string in them is text, whatever its key.
_SCHEMA_DATA = frozenset({"default", "const", "enum", "examples", "example"})
# Keys whose values are names, ids, markers or media, never text a person wrote.
_NOT_TEXT = frozenset({"type", "role", "id", "call_id", "tool_call_id", "tool_use_id", "name", "namespace", "model",
                       "signature", "encrypted_content", "cache_control", "media_type", "url", "image_url", "file_id",
                       "file_data", "file_url", "status", "detail", "format", "mime_type", "partial_image"})


class MaskingConfig(Block):
    """``{type: masking, configuration: {enabled, signal, entity_types, placeholders, unmask}}`` at one layer.

    Each distinct value gets its own numbered placeholder within a request, in order of first appearance:
    ``[EMAIL_ADDRESS_1]``, ``[EMAIL_ADDRESS_2]``; the same value is the same placeholder in every position. A
    ``placeholders`` text is numbered the same way, inside its closing bracket when it ends with one
    (``<email>`` -> ``<email_1>``), else at its end (``REDACTED`` -> ``REDACTED_1``).

    ``unmask`` (default true) puts the values back where the answer names their placeholders, whole and
    streamed, tool-call arguments included (JSON-escaped). On by default, unlike LiteLLM's
    ``output_parse_pii``: masking keeps the data from the provider, not from the client who sent it, and a
    support answer that reads ``[EMAIL_ADDRESS_1]`` where the customer's address belongs is of no use. It
    restores only values of this request's own provider-bound text (the client's and what plugins added to
    it), which the client would have read unmasked without masking. ``unmask: false`` leaves the
    placeholders, as LiteLLM does by default. The mapping lives in the request's memory only: the replay
    record, the events and the response cache keep the answer as the model wrote it.
    """

    enabled: bool | UnsetType = UNSET
    signal: Label | UnsetType = UNSET                             # the pii rule whose spans are masked
    entity_types: list[Label] | UnsetType = UNSET                 # the labels masked; all the rule keeps if unset
    placeholders: dict[Label, Annotated[str, Meta(min_length=1)]] | UnsetType = UNSET
    unmask: bool | UnsetType = UNSET                              # restore the values in the answer (true)


@dataclass(frozen=True, slots=True)
class Masking:
    """The merged masking policy of one (recipe, decision)."""

    signal: str
    entity_types: frozenset[str] | None = None
    placeholders: dict[str, str] = field(default_factory=dict)
    unmask: bool = True

    def wants(self, label: str) -> bool:
        return self.entity_types is None or label in self.entity_types

    def placeholder(self, label: str, n: int) -> str:
        """The ``n``-th distinct value of ``label``'s placeholder text (``MaskingConfig``)."""
        text = self.placeholders.get(label) or f"[{label}]"
        if len(text) > 1 and text[-1] in _CLOSERS:
            return f"{text[:-1]}_{n}{text[-1]}"
        return f"{text}_{n}"


    def named(self) -> re.Pattern[str]:
        """Any placeholder of this policy, whatever its number: every label it masks, in its own text (a
        default ``[LABEL_n]`` of any label when ``entity_types`` is unset)."""
        texts = {self.placeholders.get(label) or f"[{label}]" for label in self.entity_types or ()}
        texts |= set(self.placeholders.values()) if self.entity_types is None else set()
        parts = [r"\[[A-Z][A-Z0-9_]*_\d+\]"] if self.entity_types is None else []
        for text in sorted(texts, key=len, reverse=True):
            if len(text) > 1 and text[-1] in _CLOSERS:
                parts.append(re.escape(text[:-1]) + r"_\d+" + re.escape(text[-1]))
            else:
                parts.append((_NOT_AFTER if _WORD.match(text[0]) else "") + re.escape(text) + r"_\d+" + _NOT_BEFORE)
        return re.compile("|".join(parts))


_CLOSERS = frozenset("]>})")


def resolve(*layers: MaskingConfig | None) -> Masking | None:
    values = merged_fields(*layers)
    if not values or values.get("enabled") is False or "signal" not in values:
        return None
    types = values.get("entity_types")
    return Masking(values["signal"], frozenset(types) if types is not None else None,
                   dict(values.get("placeholders") or {}), values.get("unmask") is not False)


def check(raw: dict, path: str) -> list[str]:
    """What the block's types would say without the key's path: an empty placeholder."""
    placeholders = raw.get("placeholders")
    if isinstance(placeholders, dict):
        return [f"{path}.placeholders.{label}: invalid_value: a placeholder must not be empty (the value would "
                "vanish from the request without a trace)" for label, text in placeholders.items() if text == ""]
    return []


_NOT_REPLACED = _NOT_TEXT


class Unreadable(Exception):
    """An attachment masking cannot clean (``_attached``): ``node[key]`` holds it, ``what`` says what it is (no
    value of it). The request fails closed, unsent (``vsr_fast.errors.MaskingRefused``)."""

    def __init__(self, what: str, node: dict, key: str) -> None:
        super().__init__(what)
        self.what, self.node, self.key = what, node, key


# Keys whose string is a URL, or a file's data (a data: URL, or base64 with its media type beside it).
_ATTACHED = frozenset({"url", "image_url", "file_url", "file_data"})
# The media types of text: a file of one is decoded, masked as a text position, and encoded again.
_TEXT_MEDIA = re.compile(r"text/[\w.+-]+|application/(?:json|csv|xml|yaml|x-yaml|x-ndjson|ndjson|[\w.-]+\+(?:json|xml))",
                         re.IGNORECASE)
_TEXT_NAMES = re.compile(r".*\.(?:txt|csv|tsv|json|jsonl|md|xml|yaml|yml|html?|log)", re.IGNORECASE | re.DOTALL)
_MEDIA_TYPE = re.compile(r"[\w.+-]{1,40}/[\w.+-]{1,60}")     # one named in an error (never a client's free text)
_DATA_URL = re.compile(r"data:([^,]*),", re.IGNORECASE)


def _attached(value: str, node: dict, key: str, visit: Callable[[str], str | None]) -> str | None:
    """``visit`` an attachment: a text file's text (decoded, and encoded again when replaced); a binary file, or
    a URL in which masking finds a value, is ``Unreadable`` (a link rewritten would lead nowhere, and a
    PDF's or an image's text no pattern reads)."""
    head = _DATA_URL.match(value)
    if head is not None:
        media, _, params = head.group(1).partition(";")
        return _file(value[head.end():], media, params, node, key, visit, value[:head.end()])
    if key == "data":
        return _file(value, str(node.get("media_type") or ""), "base64", node, key, visit, "")
    if key == "file_data":
        name = node.get("filename")
        media = "text/plain" if isinstance(name, str) and _TEXT_NAMES.fullmatch(name) else "application/octet-stream"
        return _file(value, media, "base64", node, key, visit, "")
    if visit(value) is not None:
        raise Unreadable("a URL holding personal data", node, key)
    return None


def _file(payload: str, media: str, params: str, node: dict, key: str, visit: Callable[[str], str | None],
          head: str) -> str | None:
    if not _TEXT_MEDIA.fullmatch(media.strip()):
        named = media.strip() if _MEDIA_TYPE.fullmatch(media.strip()) else "unknown type"
        raise Unreadable(f"a binary file ({named})", node, key)
    options = [p.strip().lower() for p in params.split(";")]
    charset = next((p[8:] for p in options if p.startswith("charset=")), "utf-8")
    try:
        raw = base64.b64decode(payload, validate=False) if "base64" in options else urllib.parse.unquote_to_bytes(payload)
        text = raw.decode(charset)
    except (binascii.Error, ValueError, LookupError):
        raise Unreadable(f"a {media.strip() if _MEDIA_TYPE.fullmatch(media.strip()) else 'text'} file that is not "
                         "valid base64 text", node, key) from None
    new = visit(text)
    if new is None:
        return None
    data = new.encode(charset, "replace")
    return head + (base64.b64encode(data).decode() if "base64" in options else urllib.parse.quote_from_bytes(data))


def _walk(node: Any, visit: Callable[[str], str | None], parent: dict | None = None, key: str | None = None,
          skip: frozenset[str] = _NOT_TEXT) -> Any:
    """Call ``visit`` on every text leaf under ``node``, attachments too (``_attached``); a str it returns
    replaces the leaf."""
    if isinstance(node, str):
        if key == "data" and parent is not None and parent.get("type") != "text":
            if parent.get("type") == "redacted_thinking":
                return None                 # the provider's own encrypted text
            if parent.get("type") == "base64":
                return _attached(node, parent, key, visit)
        return visit(node)
    if isinstance(node, list):
        for i, item in enumerate(node):
            new = _walk(item, visit, parent, key, skip)
            if new is not None:
                node[i] = new
    elif isinstance(node, dict):
        for k, v in node.items():
            if k in _ATTACHED and isinstance(v, str):
                new = _attached(v, node, k, visit)
            elif k == "input_audio":
                raise Unreadable("audio", node, k)
            elif k in skip and k not in _ATTACHED:
                continue
            else:
                new = _walk(v, visit, node, k, skip)
            if new is not None:
                node[k] = new
    return None


def path(doc: Any, node: dict, key: str, at: str = "") -> str | None:
    """Where ``node[key]`` stands in ``doc`` ("messages[0].content[1].image_url.url"), found by identity."""
    if doc is node:
        return f"{at}.{key}" if at else key
    items = (doc.items() if isinstance(doc, dict) else
             ((f"[{i}]", v) for i, v in enumerate(doc)) if isinstance(doc, list) else ())
    for k, v in items:
        if isinstance(v, (dict, list)):
            found = path(v, node, key, (at + k) if k.startswith("[") else f"{at}.{k}" if at else k)
            if found is not None:
                return found
    return None


def _declared(node: Any, visit: Callable[[str], str | None], skip: frozenset[str]) -> Any:
    """``_walk`` over tools and output declarations: names and kinds skipped as in messages, and a JSON
    schema (``_SCHEMAS``) walked as one (``_schema``)."""
    if isinstance(node, str):
        return visit(node)
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in list(items):
        if k in _SCHEMAS:
            new = _schema(v, visit)
        elif isinstance(v, (dict, list)):
            new = _declared(v, visit, skip)
        elif k in skip:
            continue
        else:
            new = _walk(v, visit, node, k, skip)    # type: ignore[arg-type]
        if new is not None:
            node[k] = new
    return None


def _schema(node: Any, visit: Callable[[str], str | None]) -> Any:
    """``visit`` every text of a JSON schema: descriptions, titles, defaults, enum values and examples,
    in every subschema, whatever its property is named; type names, property lists and $refs skipped."""
    if isinstance(node, str):
        return visit(node)
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in list(items):
        if isinstance(node, dict) and k in _SCHEMA_NAMES:
            continue
        if isinstance(node, dict) and k in _SCHEMA_MAPS and isinstance(v, dict):
            for name, sub in v.items():
                new_sub = _schema(sub, visit)
                if new_sub is not None:
                    v[name] = new_sub
            continue
        if isinstance(node, dict) and k in _SCHEMA_DATA:
            new = _walk(v, visit, node, k, frozenset())
        else:
            new = _schema(v, visit)
        if new is not None:
            node[k] = new
    return None


def _positions(body: dict, api_format: str, visit: Callable[[str], str | None], skip: frozenset[str],
               visit_name: Callable[[str], str | None]) -> None:
    """``visit`` every text position of ``body``: the conversation's, then the declarations', then the
    identifiers' (a Chat message's ``name`` through ``visit_name``)."""
    for root in _ROOTS.get(api_format, ()):
        if root in body:
            new = _walk(body[root], visit, body, root, skip)
            if new is not None:
                body[root] = new
    known = {*_ROOTS.get(api_format, ()), *_IDENTIFIERS.get(api_format, ()), *_UNREAD}
    for root in (*_DECLARED.get(api_format, ()), *(k for k in body if k not in known)):
        if root in body and isinstance(body[root], (dict, list)):
            new = _declared(body[root], visit, skip)
            if new is not None:
                body[root] = new
        elif isinstance(body.get(root), str) and root not in skip:
            new = visit(body[root])
            if new is not None:
                body[root] = new
    if api_format == "openai" and isinstance(body.get("messages"), list):
        for m in body["messages"]:
            # A participant's name; a "function" message's names the function (no text).
            name = m.get("name") if isinstance(m, dict) and m.get("role") in _PARTICIPANTS else None
            if isinstance(name, str):
                new = visit_name(name)
                if new is not None:
                    m["name"] = new
    for root in _IDENTIFIERS.get(api_format, ()):
        value = body.get(root)
        if isinstance(value, str):
            new = visit(value)
            if new is not None:
                body[root] = new
        elif isinstance(value, dict):          # metadata: its values (Messages' user_id among them), not its keys
            for k, v in value.items():
                new = visit(v) if isinstance(v, str) else None
                if new is not None:
                    value[k] = new


def texts(body: dict, api_format: str, names: dict[str, str] | None = None) -> list[str]:
    """The distinct non-blank texts of ``body``'s text positions, in order of first appearance; ``names``, when
    given, gets each Chat ``name`` read in its spoken form (``spoken``), by that form: the client's own text
    of a value found there (a placeholder restores "juergen_mueller", not "Juergen Mueller")."""
    seen: dict[str, None] = {}

    def visit(text: str) -> None:
        if text.strip():
            seen.setdefault(text, None)
        return None

    def visit_name(name: str) -> None:
        form = spoken(name)
        if names is not None and form != name:
            names.setdefault(form, name)
        return visit(form)

    _positions(body, api_format, visit, _NOT_TEXT, visit_name)
    return list(seen)


def _clients_item(item: Any) -> bool:
    """Whether a Responses input item is the client's own: its messages, and what its tools returned. Every other
    item (an assistant message, reasoning, a tool call) is the model's output carried back."""
    if not isinstance(item, dict):
        return True
    kind = item.get("type")
    if kind in (None, "message"):
        return item.get("role") != "assistant"
    return isinstance(kind, str) and (kind.endswith("_output") or kind == "mcp_approval_response")


def client_texts(body: dict, api_format: str) -> set[str]:
    """The texts of ``body`` the client wrote: every text position but the assistant turns, which carry back the
    router's own answers (the model's words and thinking, its tool calls, a stored response's output) with the
    placeholders the router gave them."""
    roots = {}
    for root in _ROOTS.get(api_format, ()):
        turns = body.get(root)
        if isinstance(turns, list):
            roots[root] = [t for t in turns if _clients_item(t)] if api_format == "responses" else \
                [t for t in turns if not (isinstance(t, dict) and t.get("role") == "assistant")]
    return set(texts({**body, **roots}, api_format))


def signed_texts(body: dict, api_format: str) -> set[str]:
    """The texts of ``body``'s signed thinking blocks (Messages' content, Chat's LiteLLM ``thinking_blocks``): the
    provider checks each against its signature, so it must come back as the model wrote it."""
    key = "content" if api_format == "anthropic" else "thinking_blocks" if api_format == "openai" else None
    turns = body.get("messages") if key is not None else None
    return {b["thinking"] for m in turns if isinstance(m, dict) and m.get("role") == "assistant"
            for b in (m.get(key) if isinstance(m.get(key), list) else ())
            if isinstance(b, dict) and b.get("type") == "thinking" and b.get("signature")
            and isinstance(b.get("thinking"), str)} if isinstance(turns, list) else set()


def replace(body: dict, api_format: str, values: dict[str, str]) -> int:
    """Replace every copy (``copies``) of each value (value -> placeholder) in ``body``'s text positions, in
    place; how many copies were replaced. Longer values first, so a value inside another is never left half.
    A Chat message's ``name`` is matched in its spoken form and takes the placeholder in a form a name may
    have (``_as_name``)."""
    if not values:
        return 0
    pattern, order = copies(values), _longest_first(values)

    def placeholder(m: re.Match[str]) -> str:
        return values[order[m.lastindex - 1]]   # type: ignore[operator]

    count = 0

    def visit(text: str) -> str | None:
        nonlocal count
        out, n = pattern.subn(placeholder, text)
        count += n
        return out if n else None

    def visit_name(name: str) -> str | None:
        nonlocal count
        form = spoken(name)
        if form == name:
            new = visit(name)
            return _as_name(new) if new is not None else None
        out, at = [], 0
        for m in pattern.finditer(form):        # the spoken form has the name's length: its offsets are the name's
            out += [name[at:m.start()], _as_name(placeholder(m))]
            at = m.end()
            count += 1
        return "".join(out) + name[at:] if out else None

    _positions(body, api_format, visit, _NOT_REPLACED, visit_name)
    return count


def copies(values: Iterable[str]) -> re.Pattern[str]:
    """Where a copy of one of ``values`` stands in a text, the longest first, group i+1 the i-th of them
    (``_longest_first``). A copy is any spelling of the value in another case or without its accents ("MARIA
    GONZALEZ", "maria gonzalez", "Jurgen Muller" of "Jürgen Müller"): the same datum, which the docs promise
    masked wherever it stands. A value of letters alone (a name,
    a place: no digit, no "@") is a word or words, and inside a longer word is another word ("Ann" in
    "Annual", "Mi" in "Miami"): only a whole-word copy counts, a letter of a script written without spaces
    being a word's end ("山田さん", ``protocol.words``). A value with a digit or an "@" (an address, a
    card, a phone number) is the same datum wherever it stands, glued to text in a flattened page or inside a
    URL's query: every copy counts, so none is left in clear."""
    parts = []
    for value in _longest_first(values):
        body = "".join(_spelling(c) for c in value)
        if _LETTERS.fullmatch(value):
            body = (_NOT_AFTER if _WORD.match(value[0]) else "") + body + (_NOT_BEFORE if _WORD.match(value[-1]) else "")
        parts.append(f"({body})")
    return re.compile("|".join(parts), re.IGNORECASE) if parts else _NEVER


def _longest_first(values: Iterable[str]) -> list[str]:
    return sorted(values, key=len, reverse=True)


def fold(value: str) -> str:
    """``value`` as ``copies`` compares it: accents and invisible characters (a soft hyphen, a zero-width space)
    dropped, case folded (two spans of one datum share its placeholder)."""
    return "".join(c for c in unicodedata.normalize("NFKD", value)
                   if not unicodedata.combining(c) and unicodedata.category(c) != "Cf").casefold()


def _spelling(c: str) -> str:
    """One character of a value as a pattern: a Latin letter with or without its accents (``re.IGNORECASE``
    reads the cases)."""
    base = unicodedata.normalize("NFKD", c)[:1].lower()
    variants = _ACCENTED.get(base)
    return f"[{base}{variants}]" if variants and (c.lower() == base or c.lower() in variants) else re.escape(c)


# Each ASCII letter's accented forms of Latin-1 and Latin Extended-A/B ("u": "ùúûüũūŭůűų..."), lower case.
_ACCENTED: dict[str, str] = {}
for _code in range(0xC0, 0x250):
    _c = chr(_code).lower()
    _b = unicodedata.normalize("NFKD", _c)[:1]
    if _b.isascii() and _b.isalpha() and _b != _c and _c not in _ACCENTED.get(_b, ""):
        _ACCENTED[_b] = _ACCENTED.get(_b, "") + _c


_LETTERS = re.compile(r"[^\d@]+")
# A word character of a script that spaces its words: a letter of one written without spaces (CJK, kana, Hangul,
# Thai) is a boundary, as the pii rule reads it ("山田さん", "Tanakaさん": the name, then a word).
_WORD = re.compile(WORD)
_NOT_AFTER, _NOT_BEFORE = f"(?<!{WORD})", f"(?!{WORD})"
_NEVER = re.compile(r"(?!)")
# A Chat message's name: letters joined by "_", "-" or "." ("maria_gonzalez"); read as the words it spells.
_NAME = re.compile(r"[^\W\d_]+(?:[_.-][^\W\d_]+)*")
# What OpenAI refuses in a message's name (whitespace, <, |, \, /, >): a placeholder there takes "_" instead.
_NOT_IN_NAME = re.compile(r"[\s<|\\/>]")


def spoken(name: str) -> str:
    """A Chat message's ``name`` as the words it spells, of the same length ("maria_gonzalez" -> "Maria
    Gonzalez"): the pii rule reads names written as words, capitalised. Any other name as it is."""
    if not _NAME.fullmatch(name):
        return name
    form = " ".join(w[:1].upper() + w[1:] for w in re.split(r"[_.-]", name))
    return form if len(form) == len(name) else name


def _as_name(text: str) -> str:
    return _NOT_IN_NAME.sub("_", text)


__all__ = ["Masking", "MaskingConfig", "TYPE", "Unreadable", "check", "client_texts", "copies", "signed_texts", "fold", "path", "replace", "resolve", "spoken", "texts"]
