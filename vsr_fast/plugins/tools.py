"""``tools``: govern the tools a request offers (spec 5.7): ``policy`` first, then ``select``.

``policy`` is deterministic: ``passthrough`` (the default) keeps the tools,
``filtered`` keeps only ``allow_tools``, ``none`` keeps none; ``block_tools``
always goes; ``strip_tool_history`` removes earlier tool calls and results.
``select`` asks the decision model, inside what the policy kept: ``filter``
keeps the request's tools it chooses (in their order, the first
``preserve_count`` anyway), ``add`` appends tools it chooses from the
``tools_db_path`` catalog. The System One call and its failures are
``vsr_fast.server.pipeline.tools``; this module is pure: the block, the
catalog, and the edits of a decoded body.

The plugin edits the request as the client wrote it, in the client API's own
format (``openai`` for Chat, ``anthropic`` for Messages, ``responses``), before
it is translated for any candidate: a tool is matched by the name the client
gave it. A Codex ``namespace`` tool is matched by its name, ``ns.name``,
``ns__name`` (the function name other protocols see) or the namespace
itself; a freeform ``custom`` tool like a function. Chat's legacy ``functions`` is
the same offer as ``tools`` (OpenAI and the translation read it so): its
entries are governed by name like tools, ``function_call: {name}`` forces like
``tool_choice``, and each stays in the field the client wrote it in.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

import msgspec
from msgspec import UNSET, Meta, UnsetType

from ..config.schema_base import Block
from ..errors import InvalidValue, echoing
from ._merge import merged_fields
from .match import FEATURES, MAX_CHOICES, Judge, Match
from .match import check as check_match
from .match import resolve as resolve_match

TYPE = "tools"
Name = Annotated[str, Meta(min_length=1)]
MAX_RECALL = 50             # bm25 recall's top_k when the block leaves it out
DEFAULT_JUDGE: Judge = FEATURES["tools.select"].default.judge  # type: ignore[assignment]

# Input items (Responses) and blocks (Messages) that are a tool call or its result.
_HISTORY_ITEMS = frozenset({"function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
                            "local_shell_call", "local_shell_call_output", "mcp_call", "computer_call",
                            "computer_call_output", "web_search_call", "file_search_call", "tool_search_call",
                            "tool_search_output"})
_HISTORY_BLOCKS = frozenset({"tool_use", "tool_result", "server_tool_use", "web_search_tool_result",
                             "mcp_tool_use", "mcp_tool_result"})


# --- the block -----------------------------------------------------------------------------------


class PolicyConfig(Block):
    mode: Literal["passthrough", "filtered", "none"] | UnsetType = UNSET
    allow_tools: list[Name] | UnsetType = UNSET
    block_tools: list[Name] | UnsetType = UNSET
    strip_tool_history: bool | UnsetType = UNSET


class SelectConfig(Block):
    mode: Literal["filter", "add"] | UnsetType = UNSET
    tools_db_path: Name | UnsetType = UNSET
    match: Match | UnsetType = UNSET
    need_threshold: Annotated[float, Meta(ge=0, le=1)] | UnsetType = UNSET
    preserve_count: Annotated[int, Meta(ge=0, le=MAX_CHOICES)] | UnsetType = UNSET
    on_error: Literal["skip", "fail", "keep", "strip"] | UnsetType = UNSET
    timeout_ms: Annotated[int, Meta(ge=1, le=60_000)] | UnsetType = UNSET


class ToolsConfig(Block):
    """``{type: tools, configuration: {enabled, policy, select}}`` at one layer; each block field by field. The merged
    policy governs every model a request can reach: a decision's candidates (each backend and fallback model), the
    recipe's ``fallback`` when no decision matched (the recipe's and the global layers), and a provider model named
    directly (``direct_models: allow``: the global layer)."""

    enabled: bool | UnsetType = UNSET
    policy: PolicyConfig | UnsetType = UNSET
    select: SelectConfig | None | UnsetType = UNSET


# --- the catalog ---------------------------------------------------------------------------------


class CatalogTool(NamedTuple):
    name: str
    description: str
    parameters: dict


def read_catalog(path: str) -> list[CatalogTool]:
    """A ``tools_db_path`` file: a JSON list of Chat function tools, bare or as ``{tool: ..., description}``
    entries (the vLLM Semantic Router's tools_db form). ValueError says what is wrong, and where."""
    try:
        raw = json.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ValueError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path!r} is not JSON: {exc.msg} at line {exc.lineno}") from None
    if isinstance(raw, dict) and isinstance(raw.get("tools"), list):
        raw = raw["tools"]
    if not isinstance(raw, list):
        raise ValueError(f"{path!r} must hold a list of tools")
    out = []
    for i, entry in enumerate(raw):
        tool = entry.get("tool", entry) if isinstance(entry, dict) else None
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ValueError(f"{path!r}: entry [{i}] has no function name")
        description = fn.get("description") or (entry.get("description") if isinstance(entry, dict) else "") or ""
        parameters = fn.get("parameters") if isinstance(fn.get("parameters"), dict) else {"type": "object"}
        out.append(CatalogTool(fn["name"], str(description), parameters))
    return out


def duplicate_name(tools: list[CatalogTool]) -> tuple[int, str] | None:
    """The first catalog entry whose name an earlier entry already has."""
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if tool.name in seen:
            return i, tool.name
        seen.add(tool.name)
    return None


def check(raw: dict, path: str) -> list[str]:
    """Load errors the block's types cannot say: on_error per mode, a catalog that does not load, or that
    lists a name twice (``duplicate_tool_name``)."""
    select = raw.get("select")
    if not isinstance(select, dict):
        return []
    errors = []
    mode, on_error = select.get("mode", "filter"), select.get("on_error")
    allowed = ("skip", "fail") if mode == "add" else ("keep", "strip", "fail")
    if on_error is not None and on_error not in allowed:
        errors.append(f"{path}.select.on_error: invalid_value: {on_error!r} is not an on_error of select mode "
                      f"{mode} ({' or '.join(allowed)})")
    db = select.get("tools_db_path")
    if mode == "add" and not db:
        errors.append(f"{path}.select.tools_db_path: missing_field: select mode add chooses from a catalog")
    if isinstance(db, str) and db:
        try:
            found = duplicate_name(read_catalog(db))
        except ValueError as exc:
            errors.append(f"{path}.select.tools_db_path: invalid_value: {exc}")
        else:
            if found is not None:
                errors.append(f"{path}.select.tools_db_path: duplicate_tool_name: entry [{found[0]}] names "
                              f"{found[1]!r} again")
    return errors + check_match(select.get("match"), f"{path}.select.match", "tools.select")


# --- the merged policy ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Select:
    mode: str = "filter"
    catalog: tuple[CatalogTool, ...] = ()
    recall_top_k: int | None = None                 # bm25 recall before the judge; None: no recall
    recall_min: float | None = None
    judge: Judge = DEFAULT_JUDGE
    need_threshold: float = 0.5
    preserve_count: int = 0
    on_error: str = "skip"
    timeout_ms: int = 1000


@dataclass(frozen=True, slots=True)
class Tools:
    """The merged tools policy of one (recipe, decision)."""

    mode: str = "passthrough"
    allow: frozenset[str] = frozenset()
    block: frozenset[str] = frozenset()
    strip_history: bool = False
    select: Select | None = None

    def allows(self, ref: "ToolRef") -> bool:
        keys = ref.keys()
        if keys & self.block:
            return False
        if self.mode == "none":
            return False
        return self.mode == "passthrough" or bool(keys & self.allow)


def resolve(*layers: ToolsConfig | None) -> Tools | None:
    values = merged_fields(*layers)
    if not values or values.get("enabled") is False:
        return None
    policy = merged_fields(*(v.policy for v in layers if v is not None and v.policy is not UNSET)) or {}
    select_layers = [v.select for v in layers if v is not None and v.select is not UNSET]
    select = None
    if select_layers and select_layers[-1] is not None:
        # A decision's ``select: null`` turns an inherited selection off; otherwise field by field.
        start = max(i for i, s in enumerate([None, *select_layers]) if s is None)
        s = merged_fields(*select_layers[start:]) or {}
        match = resolve_match(s.get("match"), "tools.select")
        mode = s.get("mode", "filter")
        select = Select(
            mode=mode, catalog=tuple(read_catalog(s["tools_db_path"])) if s.get("tools_db_path") else (),
            recall_top_k=(match.recall.top_k or MAX_RECALL) if match.recall else None,
            recall_min=match.recall.min_similarity if match.recall else None,
            judge=match.judge or DEFAULT_JUDGE, need_threshold=s.get("need_threshold", 0.5),
            preserve_count=s.get("preserve_count", 0), on_error=s.get("on_error", "skip" if mode == "add" else "keep"),
            timeout_ms=(match.judge and match.judge.timeout_ms) or s.get("timeout_ms", 1000))
    tools = Tools(mode=policy.get("mode", "passthrough"), allow=frozenset(policy.get("allow_tools", ())),
                  block=frozenset(policy.get("block_tools", ())), strip_history=policy.get("strip_tool_history", False),
                  select=select)
    return None if tools == Tools() else tools     # a block that changes nothing costs its requests nothing


# --- a request's tools, in the client's format ---------------------------------------------------


class ToolRef(NamedTuple):
    """One tool the request offers: its name, its namespace (Codex), its description."""

    name: str
    namespace: str | None = None
    description: str = ""

    @property
    def key(self) -> str:
        """Unique within a request: the function name other protocols see."""
        if not self.namespace:
            return self.name
        prefix = self.namespace.rstrip("_") + "__"
        return self.name if self.name.startswith(prefix) else prefix + self.name

    def keys(self) -> set[str]:
        if not self.namespace:
            return {self.name}
        return {self.name, self.key, f"{self.namespace}.{self.name}", self.namespace}


# The shape of a Chat legacy ``functions`` entry: the function itself, ``{name, description, parameters}``.
FUNCTIONS = "functions"


def _ref(tool: Any, fmt: str, namespace: str | None = None) -> ToolRef | None:
    """``fmt`` is the shape of the list ``tool`` is in: a client API's tools, or ``FUNCTIONS``."""
    if not isinstance(tool, dict):
        return None
    if fmt == FUNCTIONS:
        name, description = tool.get("name"), tool.get("description")
    elif fmt == "openai":
        inner = tool.get("function") or tool.get("custom") or {}
        name, description = inner.get("name"), inner.get("description")
    else:
        # Messages tools, and Responses function/custom tools; a hosted tool is known by its type.
        name, description = tool.get("name") or tool.get("type"), tool.get("description")
    return ToolRef(name, namespace, description or "") if isinstance(name, str) and name else None


def _lists(body: dict, fmt: str) -> Iterator[tuple[list, str]]:
    """Every list of tool definitions in ``body`` with its entries' shape: top-level, Chat's legacy
    ``functions``, and Responses' additional_tools items."""
    if isinstance(body.get("tools"), list):
        yield body["tools"], fmt
    if fmt == "openai" and isinstance(body.get(FUNCTIONS), list):
        yield body[FUNCTIONS], FUNCTIONS
    if fmt == "responses" and isinstance(body.get("input"), list):
        for item in body["input"]:
            if isinstance(item, dict) and item.get("type") == "additional_tools" and isinstance(item.get("tools"), list):
                yield item["tools"], fmt


def listed(body: dict, fmt: str) -> list[ToolRef]:
    """The request's tools in order (Chat's tools, then its legacy functions), a namespace's tools each on
    its own."""
    out: list[ToolRef] = []
    for tools, shape in _lists(body, fmt):
        for tool in tools:
            if shape == "responses" and isinstance(tool, dict) and tool.get("type") == "namespace":
                out += [r for child in tool.get("tools") or () if (r := _ref(child, shape, tool.get("name")))]
            elif (r := _ref(tool, shape)) is not None:
                out.append(r)
    return out


def keep_tools(body: dict, fmt: str, keep: Callable[[ToolRef], bool], *,
               forced: Literal["refuse", "drop"] | None = None) -> list[str]:
    """Remove, in place, every tool ``keep`` refuses (an emptied namespace or additional_tools item goes too);
    the removed tools' keys. A ``tool_choice`` (or Chat's legacy ``function_call``) that forces a removed tool,
    or that requires a call (``required``, ``any``) when no tool is left, is ``forced``: ``refuse`` raises InvalidValue (400, ``param`` the forcing field: the client forced a tool the
    route's policy removes, and would otherwise get another tool called without a word), ``drop`` removes it (what
    a selection did not choose).
    Left out, a tools policy's own ``allows`` refuses and any other ``keep`` drops."""
    if forced is None:
        forced = "refuse" if isinstance(getattr(keep, "__self__", None), Tools) else "drop"
    removed: list[ToolRef] = []

    def kept(tools: list, namespace: str | None = None, shape: str = fmt) -> list:
        out = []
        for tool in tools:
            if shape == "responses" and namespace is None and isinstance(tool, dict) \
                    and tool.get("type") == "namespace":
                children = kept(list(tool.get("tools") or ()), tool.get("name"))
                if children:
                    out.append({**tool, "tools": children})
                continue
            ref = _ref(tool, shape, namespace)
            if ref is not None and not keep(ref):
                removed.append(ref)
                continue
            out.append(tool)
        return out

    if isinstance(body.get("tools"), list):
        body["tools"] = kept(body["tools"])
        if not body["tools"]:
            del body["tools"]
    if fmt == "openai" and isinstance(body.get(FUNCTIONS), list):
        body[FUNCTIONS] = kept(body[FUNCTIONS], shape=FUNCTIONS)
        if not body[FUNCTIONS]:
            del body[FUNCTIONS]
    if fmt == "responses" and isinstance(body.get("input"), list):
        items = []
        for item in body["input"]:
            if isinstance(item, dict) and item.get("type") == "additional_tools" and isinstance(item.get("tools"), list):
                item = {**item, "tools": kept(item["tools"])}
                if not item["tools"]:
                    continue
            items.append(item)
        body["input"] = items
    gone = {key for ref in removed for key in ref.keys()}
    name, field = _forcing(body, fmt)
    if forced == "refuse" and name in gone:
        raise echoing(InvalidValue, field + " forces tool {}, which this route's tools policy removes; "
                      "force another tool or leave the choice to the model", name, param=field)
    if forced == "refuse" and removed and not listed(body, fmt) and _requires_call(body.get("tool_choice"), fmt):
        # Sent on without tools, the choice would go too and the model answer in text: the client demanded a
        # tool call that none of its tools may make, as a forced removed tool does.
        raise InvalidValue("tool_choice requires a tool call, and this route's tools policy removes every tool "
                           "the request offers; offer a tool it allows or leave the choice to the model",
                           param="tool_choice")
    _fix_choice(body, fmt, gone)
    return [ref.key for ref in removed]


# Responses tool_choice types that are not a hosted tool's own name.
_CHOICE_KINDS = frozenset({"function", "custom", "allowed_tools", "mcp"})


def forced_tool(body: dict, fmt: str) -> str | None:
    """The tool name a ``tool_choice`` forces (Chat function or custom, Messages ``tool``, Responses function,
    custom or hosted tool) or Chat's legacy ``function_call: {name}``, or None when it forces none."""
    return _forcing(body, fmt)[0]


def _forcing(body: dict, fmt: str) -> tuple[str | None, str]:
    """The forced tool name and the field that forces it."""
    name = _chosen(body.get("tool_choice"), fmt)
    if name is None and fmt == "openai":
        legacy = body.get("function_call")
        legacy = legacy.get("name") if isinstance(legacy, dict) else None
        if isinstance(legacy, str) and legacy:
            return legacy, "function_call"
    return name, "tool_choice"


def _chosen(choice: Any, fmt: str) -> str | None:
    if not isinstance(choice, dict):
        return None
    if fmt == "openai":
        inner = choice.get("function") or choice.get("custom")
        name = inner.get("name") if isinstance(inner, dict) else None
    elif fmt == "responses" and choice.get("type") not in _CHOICE_KINDS:
        name = choice.get("type")       # a hosted tool is known by its type, as _ref names it
    else:
        name = choice.get("name")
    return name if isinstance(name, str) and name else None


def _requires_call(choice: Any, fmt: str) -> bool:
    """Whether ``tool_choice`` demands some tool call without naming one: Chat's and Responses' ``required``
    (Responses' ``allowed_tools`` in required mode too), Messages' ``any``."""
    if fmt == "anthropic":
        return isinstance(choice, dict) and choice.get("type") == "any"
    if choice == "required":
        return True
    return fmt == "responses" and isinstance(choice, dict) and choice.get("type") == "allowed_tools" \
        and choice.get("mode") == "required"


def _fix_choice(body: dict, fmt: str, removed: set[str]) -> None:
    if not listed(body, fmt):
        for key in ("tool_choice", "parallel_tool_calls", "function_call"):
            body.pop(key, None)
        return
    name, field = _forcing(body, fmt)
    if name in removed:     # any name the removed tool answers to (a namespaced tool's bare name too)
        del body[field]


def add_tools(body: dict, fmt: str, tools: list[CatalogTool]) -> None:
    """Append catalog tools, written in ``fmt``'s own tool shape; a legacy functions client's as functions (with
    ``tools`` beside them it would be answered in tool_calls, which it does not read)."""
    if not tools:
        return
    legacy = fmt == "openai" and bool(body.get(FUNCTIONS)) and not body.get("tools")
    shaped = []
    for t in tools:
        if fmt == "openai" and legacy:
            shaped.append({"name": t.name, "description": t.description, "parameters": t.parameters})
        elif fmt == "openai":
            shaped.append({"type": "function", "function": {"name": t.name, "description": t.description,
                                                            "parameters": t.parameters}})
        elif fmt == "anthropic":
            shaped.append({"name": t.name, "description": t.description, "input_schema": t.parameters})
        else:
            shaped.append({"type": "function", "name": t.name, "description": t.description,
                           "parameters": t.parameters})
    field = FUNCTIONS if legacy else "tools"
    body[field] = [*(body.get(field) or []), *shaped]


def strip_history(body: dict, fmt: str) -> int:
    """Remove earlier tool calls and their results, in place; how many were removed."""
    count = 0
    if fmt == "openai" and isinstance(body.get("messages"), list):
        out = []
        for m in body["messages"]:
            if isinstance(m, dict) and m.get("role") in ("tool", "function"):
                count += 1
                continue
            if isinstance(m, dict) and m.get("role") == "assistant" and (m.get("tool_calls") or m.get("function_call")):
                count += len(m.get("tool_calls") or ()) + bool(m.get("function_call"))
                m = {k: v for k, v in m.items() if k not in ("tool_calls", "function_call")}
                if not m.get("content"):
                    continue
            out.append(m)
        body["messages"] = out
    elif fmt == "anthropic" and isinstance(body.get("messages"), list):
        out = []
        for m in body["messages"]:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, list):
                blocks = [b for b in content if not (isinstance(b, dict) and b.get("type") in _HISTORY_BLOCKS)]
                count += len(content) - len(blocks)
                if not blocks:
                    continue
                m = {**m, "content": blocks}
            out.append(m)
        body["messages"] = out
    elif fmt == "responses" and isinstance(body.get("input"), list):
        items = [i for i in body["input"] if not (isinstance(i, dict) and i.get("type") in _HISTORY_ITEMS)]
        count = len(body["input"]) - len(items)
        body["input"] = items
    return count


def encode(body: dict) -> bytes:
    return msgspec.json.encode(body)


__all__ = ["CatalogTool", "Select", "ToolRef", "Tools", "ToolsConfig", "TYPE", "add_tools", "check",
           "duplicate_name", "forced_tool", "keep_tools", "listed", "read_catalog", "resolve", "strip_history"]
