"""Responses' own tool kinds as the function tools every other protocol has, and back.

Codex declares its tools in ``additional_tools`` input items, grouped in
``namespace`` tools, many of them freeform ``custom`` tools whose input is one
string (a patch, a script) rather than JSON arguments. A Chat or Messages
backend knows function tools only, so:

- a namespace's tool ``exec`` in namespace ``functions`` becomes the function
  ``functions__exec`` (names stay within ``[A-Za-z0-9_-]`` and 64 characters, as both APIs require: a longer
  one is cut short, a hash of it appended);
- a custom tool becomes a function with one required string argument, ``input``;
  a grammar it declares goes into the description (no backend enforces it:
  reported as converted);
- on the way back, a call of such a function is the client's own kind again: a
  ``custom_tool_call`` with ``input``, or a ``function_call`` with its ``namespace``.

``ToolNames`` is that mapping for one request: built from its tools and its
history, read by the reader (requests) and the writers (answers, streams).
"""
from __future__ import annotations

from typing import NamedTuple

from .. import responses as wire
from ._common import NAME_LIMIT, dumps, parse_arguments, safe_token
from ._ir import ToolDef
from ._losses import CONVERTED, Loss, dropped

INPUT_SCHEMA = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"],
                "additionalProperties": False}


class ToolName(NamedTuple):
    """A tool as the client named it: ``namespace`` or None; ``custom`` for freeform input."""

    name: str
    namespace: str | None = None
    custom: bool = False


def qualified(namespace: str | None, name: str) -> str:
    """The function name a namespaced tool gets elsewhere: ``<namespace>__<name>``, within the 64 characters of
    ``[a-zA-Z0-9_-]`` OpenAI and Anthropic take (``safe_token``: shortened, a hash of the whole appended); a tool
    outside a namespace keeps the client's name."""
    if not namespace:
        return name
    prefix = namespace.rstrip("_") + "__"
    return safe_token(name if name.startswith(prefix) else prefix + name, NAME_LIMIT)


class ToolNames:
    """Function name -> the client's tool, for the tools of one Responses request."""

    __slots__ = ("by_function",)

    def __init__(self) -> None:
        self.by_function: dict[str, ToolName] = {}

    def add(self, name: str, namespace: str | None, custom: bool) -> str:
        function = qualified(namespace, name)
        self.by_function.setdefault(function, ToolName(name, namespace, custom))
        return function

    def function_of(self, name: str, namespace: str | None) -> str:
        """The function name of the client's tool ``name`` (in ``namespace``, or the only one so named)."""
        if namespace is None:
            found = [f for f, tool in self.by_function.items() if tool.name == name]
            if len(found) == 1:
                return found[0]
        return qualified(namespace, name)

    def client_tool(self, function: str) -> ToolName:
        """The client's tool behind a function name (itself, for a plain function tool)."""
        return self.by_function.get(function) or ToolName(function)


def tool_names(req: wire.ResponsesRequest | None) -> ToolNames:
    """Every function and custom tool of the request, top-level, in additional_tools items, and
    called in its history, each under the function name other protocols see."""
    names = ToolNames()
    if req is None:
        return names
    for tool in _declared(req):
        _name_tool(names, tool, None)
    for item in req.input if isinstance(req.input, list) else ():
        if item.type in ("custom_tool_call", "function_call") and item.name:
            names.add(item.name, item.namespace, item.type == "custom_tool_call")
    return names


def declared_tool_count(req: wire.ResponsesRequest) -> int:
    """Every tool the request declares, top-level and in additional_tools items, a namespace's
    tools each counted, hosted tools included: what a routing rule on tools counts."""
    return sum(len(t.tools or ()) if t.type == "namespace" else 1 for t in _declared(req))


def _declared(req: wire.ResponsesRequest) -> list[wire.Tool]:
    tools = list(req.tools or ())
    for item in req.input if isinstance(req.input, list) else ():
        if item.type == "additional_tools":
            tools += item.tools or ()
    return tools


def _name_tool(names: ToolNames, tool: wire.Tool, namespace: str | None) -> None:
    if tool.type == "namespace" and tool.name and namespace is None:
        for child in tool.tools or ():
            _name_tool(names, child, tool.name)
    elif tool.type in ("function", "custom") and tool.name:
        names.add(tool.name, namespace, tool.type == "custom")


def function_defs(tools: list[wire.Tool], path: str, losses: list[Loss], namespace: str | None = None) -> list[ToolDef]:
    """``tools`` (top-level or an additional_tools item's) as function definitions; the rest lost."""
    out: list[ToolDef] = []
    for i, tool in enumerate(tools):
        where = f"{path}[{i}]"
        if tool.type == "function" and tool.name:
            out.append(ToolDef(qualified(namespace, tool.name), tool.description, tool.parameters, tool.strict, where))
        elif tool.type == "custom" and tool.name:
            out.append(_custom_def(tool, namespace, where, losses))
        elif tool.type == "namespace" and tool.name and namespace is None:
            out += function_defs(list(tool.tools or ()), f"{where}.tools", losses, tool.name)
        else:
            losses.append(dropped(where))   # hosted tools (web_search, tool_search...) run at OpenAI only
    return out


def _custom_def(tool: wire.Tool, namespace: str | None, where: str, losses: list[Loss]) -> ToolDef:
    description = tool.description or ""
    fmt = tool.format or {}
    if fmt.get("type") == "grammar":
        # The grammar still tells the model the input's shape; nothing enforces it now.
        losses.append(Loss(CONVERTED, "unsupported", f"{where}.format"))
        grammar = f"The input follows this {fmt.get('syntax', '')} grammar:\n{fmt.get('definition', '')}"
        description = f"{description}\n\n{grammar}" if description else grammar
    return ToolDef(qualified(namespace, tool.name or ""), description or None, INPUT_SCHEMA, None, where)


def custom_arguments(text: str) -> str:
    """A custom tool call's input as the JSON arguments of its function."""
    return dumps({"input": text})


def custom_input(arguments: str, where: str, losses: list[Loss]) -> str:
    """The input string back out of the function's JSON arguments; the arguments as they are
    (reported) when the model did not send ``{"input": "..."}``."""
    args = parse_arguments(arguments)
    value = args.get("input") if args is not None else None
    if isinstance(value, str):
        return value
    losses.append(Loss(CONVERTED, "invalid_json", where))
    return arguments


__all__ = ["INPUT_SCHEMA", "ToolName", "ToolNames", "custom_arguments", "custom_input", "declared_tool_count",
           "function_defs", "qualified", "tool_names"]
