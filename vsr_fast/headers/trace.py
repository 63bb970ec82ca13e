"""``x-vsr-trace``: the one debug header, an RFC 8941 dictionary of at most 4 KB (spec 5.10).

Members in the registry's priority order (``registry.TRACE_MEMBERS``), wherever in the request each was learnt;
past 4 KB the lowest-priority members are left out and ``truncated`` ends the dictionary. Only callers that
``global.router.headers.debug`` allows receive it.
"""
from __future__ import annotations

import re

from .registry import TRACE_RANK

MAX_BYTES = 4096
_TRUNCATED = "truncated"
_KEY = re.compile(r"[a-z*][a-z0-9_.*-]*")


def _string(value: str) -> str:
    """An RFC 8941 sf-string: printable ASCII with quotes and backslashes escaped."""
    clean = "".join(c if 0x20 <= ord(c) < 0x7F else "?" for c in value)
    return '"' + clean.replace("\\", "\\\\").replace('"', '\\"') + '"'


def trace_value(*, signals: list[str], decision: str | None, why: str | None, algorithm: str = "static",
                confidence: float | None = None, coverage: dict[str, str] | None = None,
                modality: str | None = None) -> str:
    """The serialized dictionary of the routing stage, cut to 4 KB by dropping the lowest-priority members."""
    members = []
    if signals:
        members.append(list_member("signals", signals))
    if coverage:
        members.append(list_member("coverage", [f"{k}={v}" for k, v in coverage.items()]))
    if confidence is not None:
        members.append(f"confidence={confidence:.3f}")
    members.append(f"algorithm={_string(algorithm)}")
    if decision:
        members.append(f"decision={_string(decision)}")
    if why:
        members.append(f"why={_string(why)}")
    if modality:
        members.append(modality)
    return _fitted(members, False)


def with_member(value: str, member: str) -> str:
    """``value`` with ``member`` in its registered place (one of the same name replaced, as a dictionary keeps the
    last); past 4 KB the lowest-priority members are left out. Once members were left out, one of lower priority
    than the last kept is not added: what was cut outranked it."""
    members = _split(value)
    cut = bool(members) and members[-1] == _TRUNCATED
    if cut:
        members.pop()
        if members and _rank(member) > _rank(members[-1]):
            return value
    name = _name(member)
    return _fitted([m for m in members if _name(m) != name] + [member], cut)


def with_items(value: str, name: str, items: list[str]) -> str:
    """``value`` with ``items`` added to its inner list ``name`` (made if absent), each string once: a member
    several calls of one request write to, such as each model's prompt_cache markers."""
    for member in _split(value):
        if _name(member) == name and member.endswith(")"):
            have = member[len(name) + 2:-1]
            new = [s for s in map(_string, items) if s not in _split_list(have)]
            if not new:
                return value
            return with_member(value, f"{name}=(" + " ".join([have, *new] if have else new) + ")")
    return with_member(value, list_member(name, items))


def list_member(name: str, items: list[str], **params: str | float) -> str:
    """``name=("a" "b")``: an inner list of strings, such as the Looper's calls and their verdicts."""
    return f"{name}=(" + " ".join(_string(i) for i in items) + ")" + _params(params)


def string_member(name: str, value: str, **params: str | float) -> str:
    """``name="value"`` with its parameters (``;key="v"``, a float to three decimals: an RFC 8941 decimal)."""
    return f"{name}={_string(value)}" + _params(params)


def token_member(name: str, value: str, **params: str | float) -> str:
    """``name=value`` for a value that is an RFC 8941 token (a word the router chose), with its parameters."""
    assert _KEY.fullmatch(value), value
    return f"{name}={value}" + _params(params)


def _params(params: dict[str, str | float]) -> str:
    return "".join(f";{k}={v:.3f}" if isinstance(v, float) else f";{k}={_string(v)}" for k, v in params.items())


def _fitted(members: list[str], cut: bool) -> str:
    """The members in priority order, joined; the lowest left out until it fits in MAX_BYTES (ASCII)."""
    members.sort(key=_rank)
    out = ", ".join(members + [_TRUNCATED] if cut else members)
    while len(out) > MAX_BYTES and members:
        members.pop()
        out = ", ".join(members + [_TRUNCATED])
    return out


def _name(member: str) -> str:
    found = _KEY.match(member)
    return found.group() if found else member


def _rank(member: str) -> int:
    # A member the registry does not list goes last: contract tests hold every name the code writes to it.
    return TRACE_RANK.get(_name(member), len(TRACE_RANK))


def _split(value: str) -> list[str]:
    """The members of a dictionary this module wrote, each as written: split at top-level commas."""
    return _split_at(value, ",")


def _split_list(inner: str) -> list[str]:
    return _split_at(inner, " ")


def _split_at(value: str, sep: str) -> list[str]:
    out, start, depth, quoted, escaped = [], 0, 0, False, False
    for i, c in enumerate(value):
        if quoted:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == sep and depth == 0:
            out.append(value[start:i].strip())
            start = i + 1
    out.append(value[start:].strip())
    return [m for m in out if m]


def allowed(policy: str, asked: bool, authenticated: bool) -> bool:
    """Whether a caller that sent x-vsr-debug receives the trace under ``headers.debug``."""
    if not asked:
        return False
    return policy == "any" or (policy == "authenticated" and authenticated)
