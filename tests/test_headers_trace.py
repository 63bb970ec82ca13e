"""``x-vsr-trace`` is an RFC 8941 dictionary of at most 4 KB whose members follow the registry's priority order
(spec 5.10), whichever stage of the request learnt each: past 4 KB the lowest-priority members are left out and
``truncated`` ends it. Every member name the code writes is registered (a contract test over the source)."""
from __future__ import annotations

import ast
import pathlib
import re

import http_sf

from vsr_fast.headers import trace
from vsr_fast.headers.registry import TRACE_MEMBERS, TRACE_RANK

ROOT = pathlib.Path(__file__).resolve().parent.parent / "vsr_fast"
_NAMED = {"list_member": 0, "string_member": 0, "token_member": 0, "with_items": 1, "note": 1}
_MEMBER = re.compile(r"([a-z_]+)=")


def _names(value: str) -> list[str]:
    return list(http_sf.parse(value.encode(), tltype="dictionary"))


def test_members_added_at_any_stage_take_their_registered_place():
    value = trace.trace_value(signals=["keyword:code"], decision="code", why="highest priority", algorithm="static",
                              modality=trace.string_member("modality", "text"))
    value = trace.with_member(value, "response_guard=passed")
    value = trace.with_member(value, trace.list_member("tools", ["policy filtered: kept 1 of 2, removed x"]))
    value = trace.with_member(value, trace.token_member("cache", "semantic", similarity=0.93456))
    value = trace.with_member(value, trace.list_member("ranking", ["a=1.000"]))
    assert _names(value) == ["signals", "algorithm", "decision", "why", "ranking", "modality", "cache", "tools",
                             "response_guard"]
    assert "cache=semantic;similarity=0.935" in value
    # A member written again replaces the first (a dictionary keeps the last), in its place.
    assert _names(trace.with_member(value, "response_guard=blocked")) == _names(value)
    assert "response_guard=blocked" in trace.with_member(value, "response_guard=blocked")


def test_items_join_one_inner_list():
    value = trace.with_items("algorithm=\"static\"", "prompt_cache", ["a: markers on system"])
    value = trace.with_items(value, "prompt_cache", ["b: no marker: openai caches prefixes on its own"])
    value = trace.with_items(value, "prompt_cache", ["a: markers on system"])
    parsed = http_sf.parse(value.encode(), tltype="dictionary")
    assert [i[0] for i in parsed["prompt_cache"][0]] == ["a: markers on system",
                                                         "b: no marker: openai caches prefixes on its own"]


def test_past_4_kb_the_lowest_priority_members_are_left_out():
    value = trace.trace_value(signals=["keyword:code"], decision="code", why="w")
    value = trace.with_member(value, trace.list_member("looper", ["m: " + "x" * 3000]))
    value = trace.with_member(value, trace.list_member("tools", ["t" * 3000]))
    # The Looper's member came first, but ranks lower: it is the one left out.
    assert _names(value) == ["signals", "algorithm", "decision", "why", "tools", "truncated"]
    assert len(value) <= trace.MAX_BYTES
    # Once cut, a member below the last kept is not added (what was cut outranked it); one above still is.
    assert trace.with_member(value, "response_guard=passed") == value
    higher = trace.with_member(value, trace.list_member("ranking", ["a=1.000"]))
    assert _names(higher) == ["signals", "algorithm", "decision", "why", "ranking", "tools", "truncated"]
    huge = trace.with_member(higher, trace.list_member("ranking", ["r" * 5000]))
    assert _names(huge) == ["signals", "algorithm", "decision", "why", "truncated"]


def _written() -> dict[str, str]:
    """Every trace member name the router's code writes, with where: the name argument of the member helpers and
    of the Looper's ``note``, the ``name=`` a literal member starts with, a selector's notes' keys."""
    found: dict[str, str] = {}
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            at = _NAMED.get(func)
            if at is not None and len(node.args) > at and isinstance(node.args[at], ast.Constant) \
                    and isinstance(node.args[at].value, str):
                found[node.args[at].value] = f"{path.name}:{node.lineno}"
            if func == "with_member" and len(node.args) == 2 or func == "append" and path.name == "trace.py":
                arg = node.args[-1]
                while isinstance(arg, ast.BinOp):       # "name=" + ...
                    arg = arg.left
                first = arg.values[0] if isinstance(arg, ast.JoinedStr) and arg.values else arg
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    match = _MEMBER.match(first.value)
                    if match:
                        found[match.group(1)] = f"{path.name}:{node.lineno}"
            if func == "Selected" and len(node.args) > 1 and isinstance(node.args[1], ast.Dict):
                for key in node.args[1].keys:
                    if isinstance(key, ast.Constant):
                        found[key.value] = f"{path.name}:{node.lineno}"
    return found


def test_every_member_the_code_writes_is_registered_and_every_registered_one_is_written():
    written = _written()
    unregistered = {name: where for name, where in written.items() if name not in TRACE_RANK}
    assert not unregistered, f"trace members written but not in registry.TRACE_MEMBERS: {unregistered}"
    assert {m.name for m in TRACE_MEMBERS} <= set(written), set(TRACE_RANK) - set(written)
    assert all(m.doc and m.feature for m in TRACE_MEMBERS)
