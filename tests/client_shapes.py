"""What a request body says, in any of the three protocols, as a comparable shape.

``tests/test_client_fixtures.py`` translates the recorded bodies of real clients to every
backend format and compares each result's shape with the expected one in
``tests/fixtures/clients/expected/``. A shape keeps what a translation must carry and
leaves out what each protocol spells its own way:

- ``system``: where the system text went. Each system text of the source (top-level
  ``system``, ``instructions``, and ``system``/``developer`` messages anywhere, Claude Code's
  mid-conversation ones included) is known by its first 32 characters; the shape lists
  those found in the target's own system places (top-level, or system/developer messages),
  in the order they appear there. Merged or carried in place, all must be there, in order.
- ``turns``: the conversation, one token per user text, assistant text, tool call (name,
  call number, arguments) and tool result (call number, start of its text); call ids are
  numbered in order of appearance, so each protocol's ids compare.
- ``tools``: every callable tool with the arguments it requires. Namespaced tools count
  one by one; where the target has no namespaces or freeform tools, a namespace's tool is
  the function ``<namespace>__<name>`` and a freeform tool one with a single string
  argument ``input`` (the router's documented mapping).

Run ``python -m tests.client_shapes`` to write the expected files from the fixtures: each
expected shape is derived from the source body by those rules, never from the router's output.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "clients"
EXPECTED = FIXTURES / "expected"
FORMATS = ("openai", "anthropic", "responses")
NATIVE = {"chat": "openai", "messages": "anthropic", "responses": "responses"}
SYSTEM_ROLES = ("system", "developer")
MARK = 32
RESULT_CHARS = 24


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def text_of(content: object) -> str:
    """The text of a content field: a string, or the text of every text-like part of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


@dataclass
class Call:
    id: str
    namespace: str | None
    name: str
    custom: bool
    args: object          # a dict of arguments, or a freeform tool's input string


@dataclass
class Shape:
    """A body read in its own protocol, before any rendering."""

    system: list[str] = field(default_factory=list)
    turns: list[object] = field(default_factory=list)   # "user" | "assistant" | Call | ("result", id, text)
    tools: list[tuple[str | None, str, bool, list[str]]] = field(default_factory=list)   # ns, name, custom, required


def _json_args(raw: object) -> object:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def read_chat(body: dict) -> Shape:
    shape = Shape()
    for t in body.get("tools") or ():
        if t.get("type") == "custom":
            shape.tools.append((None, t["custom"]["name"], True, []))
        else:
            fn = t.get("function") or {}
            shape.tools.append((None, fn.get("name"), False, list((fn.get("parameters") or {}).get("required") or ())))
    for m in body.get("messages") or ():
        role = m.get("role")
        if role in SYSTEM_ROLES:
            shape.system.append(text_of(m.get("content")))
        elif role == "tool":
            shape.turns.append(("result", m.get("tool_call_id"), text_of(m.get("content"))))
        elif role in ("user", "assistant"):
            if text_of(m.get("content")).strip() or (role == "user" and m.get("content")):
                shape.turns.append(role)
            for c in m.get("tool_calls") or ():
                if c.get("type") == "custom":
                    shape.turns.append(Call(c["id"], None, c["custom"]["name"], True, c["custom"].get("input")))
                else:
                    fn = c.get("function") or {}
                    shape.turns.append(Call(c["id"], None, fn.get("name"), False, _json_args(fn.get("arguments"))))
    return shape


def read_messages(body: dict) -> Shape:
    shape = Shape()
    system = body.get("system")
    if isinstance(system, str):
        shape.system.append(system)
    elif isinstance(system, list):
        shape.system += [b.get("text", "") for b in system if isinstance(b, dict)]
    for t in body.get("tools") or ():
        if t.get("type") in (None, "custom"):
            shape.tools.append((None, t.get("name"), False, list((t.get("input_schema") or {}).get("required") or ())))
    for m in body.get("messages") or ():
        role, content = m.get("role"), m.get("content")
        if role == "system":
            shape.system.append(text_of(content))
            continue
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for b in blocks:
            kind = b.get("type")
            if kind == "tool_result":
                shape.turns.append(("result", b.get("tool_use_id"), text_of(b.get("content"))))
            elif kind == "tool_use":
                shape.turns.append(Call(b.get("id"), None, b.get("name"), False, b.get("input")))
            elif kind in ("text", "image", "document") and (kind != "text" or b.get("text", "").strip()):
                shape.turns.append(role)
    return shape


def _responses_tools(tools: list, namespace: str | None, out: list) -> None:
    for t in tools or ():
        kind = t.get("type")
        if kind == "namespace":
            _responses_tools(t.get("tools") or [], t.get("name"), out)
        elif kind == "custom":
            out.append((namespace, t.get("name"), True, []))
        elif kind == "function":
            out.append((namespace, t.get("name"), False, list((t.get("parameters") or {}).get("required") or ())))


def read_responses(body: dict) -> Shape:
    shape = Shape()
    if isinstance(body.get("instructions"), str):
        shape.system.append(body["instructions"])
    _responses_tools(body.get("tools") or [], None, shape.tools)
    items = body.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
    for item in items:
        kind, role = item.get("type", "message"), item.get("role")
        if kind == "additional_tools":
            _responses_tools(item.get("tools") or [], None, shape.tools)
        elif kind == "message" and role in SYSTEM_ROLES:
            shape.system.append(text_of(item.get("content")))
        elif kind == "message" and role in ("user", "assistant"):
            shape.turns.append(role)
        elif kind in ("function_call", "custom_tool_call"):
            custom = kind == "custom_tool_call"
            args = item.get("input") if custom else _json_args(item.get("arguments"))
            shape.turns.append(Call(item.get("call_id"), item.get("namespace"), item.get("name"), custom, args))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            shape.turns.append(("result", item.get("call_id"), text_of(item.get("output"))))
    return shape


READERS = {"openai": read_chat, "anthropic": read_messages, "responses": read_responses}


def marks(shape: Shape) -> list[str]:
    """How each system text of a source is known: its first characters, squashed."""
    return [squash(t)[:MARK] for t in shape.system if squash(t)]


def qualified(namespace: str | None, name: str) -> str:
    """A namespaced tool's function name where the target has no namespaces."""
    if not namespace:
        return name
    prefix = namespace.rstrip("_") + "__"
    return name if name.startswith(prefix) else prefix + name


def render(shape: Shape, fmt: str, system_marks: list[str], *, as_target: bool) -> dict:
    """The comparable form of a shape in format ``fmt``.

    ``as_target``: the shape is what ``fmt`` should receive from a source in another protocol,
    so namespaces and freeform tools are mapped as the target can carry them; otherwise the
    shape was read from a body of ``fmt`` and is rendered as it is.
    """
    def name_of(namespace, name, custom) -> tuple[str, bool]:
        if fmt == "responses":
            return (f"{namespace}.{name}" if namespace else name), custom
        return qualified(namespace, name), False if as_target else custom

    tools = []
    for namespace, name, custom, required in shape.tools:
        shown, still_custom = name_of(namespace, name, custom)
        if custom and not still_custom:
            required = ["input"]
        tools.append(f"{shown}:custom" if still_custom else f"{shown}({','.join(required)})")
    numbers: dict[str, int] = {}
    turns: list[str] = []
    for turn in shape.turns:
        if isinstance(turn, Call):
            k = numbers.setdefault(turn.id, len(numbers) + 1)
            shown, still_custom = name_of(turn.namespace, turn.name, turn.custom)
            args = turn.args if still_custom or not turn.custom else {"input": turn.args}
            token = f"call {shown} #{k} {json.dumps(args, sort_keys=True, ensure_ascii=False)}"
        elif isinstance(turn, tuple):
            k = numbers.setdefault(turn[1], len(numbers) + 1)
            token = f"result #{k} {squash(turn[2])[:RESULT_CHARS]}"
        else:
            token = turn
        if not (turns and token in ("user", "assistant") and turns[-1] == token):
            turns.append(token)
    found = " \n ".join(squash(t) for t in shape.system)
    placed = sorted((found.find(m), i, m) for i, m in enumerate(system_marks) if m in found)
    return {"system": [m for _, _, m in placed], "turns": turns, "tools": tools}


def expected_for(doc: dict) -> dict:
    """What every backend format should receive for one recorded request (see the module docstring)."""
    native = NATIVE[doc["api"]]
    source = READERS[native](doc["body"])
    system_marks = marks(source)
    tool_results = sum(1 for t in source.turns if isinstance(t, tuple))
    out: dict = {"canonical": {"tools": len(source.tools), "tool_results": tool_results},
                 "decision": "after_tool_result" if tool_results else "agentic", "targets": {}}
    for fmt in FORMATS:
        target: dict = {"stream": bool(doc["body"].get("stream"))}
        if fmt == native:
            target["unchanged"] = True
            target["headers"] = {k: v for k, v in doc["headers"].items() if k not in ("accept", "content-type")}
        else:
            target["headers"] = {"anthropic-version": "2023-06-01"} if fmt == "anthropic" else {}
            target.update(render(source, fmt, system_marks, as_target=True))
            target["system"] = system_marks
        out["targets"][fmt] = target
    return out


def fixtures() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*.json"))


def main() -> int:
    EXPECTED.mkdir(exist_ok=True)
    for path in fixtures():
        doc = json.loads(path.read_text())
        target = EXPECTED / path.name
        target.write_text(json.dumps(expected_for(doc), indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
