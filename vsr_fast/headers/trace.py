"""``x-vsr-trace``: the one debug header, an RFC 8941 dictionary of at most 4 KB (spec 5.10).

Members in priority order; past 4 KB the lowest-priority members are left out
and ``truncated`` ends the dictionary. Only callers that
``global.router.headers.debug`` allows receive it.
"""
from __future__ import annotations

MAX_BYTES = 4096


def _string(value: str) -> str:
    """An RFC 8941 sf-string: printable ASCII with quotes and backslashes escaped."""
    clean = "".join(c if 0x20 <= ord(c) < 0x7F else "?" for c in value)
    return '"' + clean.replace("\\", "\\\\").replace('"', '\\"') + '"'


def trace_value(*, signals: list[str], decision: str | None, why: str | None, algorithm: str = "static",
                confidence: float | None = None, coverage: dict[str, str] | None = None) -> str:
    """The serialized dictionary, cut to 4 KB by dropping the lowest-priority members."""
    members = []
    if signals:
        members.append("signals=(" + " ".join(_string(s) for s in signals) + ")")
    if coverage:
        members.append("coverage=(" + " ".join(_string(f"{k}={v}") for k, v in coverage.items()) + ")")
    if confidence is not None:
        members.append(f"confidence={confidence:.3f}")
    members.append(f"algorithm={_string(algorithm)}")
    if decision:
        members.append(f"decision={_string(decision)}")
    if why:
        members.append(f"why={_string(why)}")
    out = ", ".join(members)
    while len(out) > MAX_BYTES and members:
        members.pop()
        out = ", ".join(members + ["truncated"])
    return out


def with_member(value: str, member: str) -> str:
    """``value`` with one more member (the response stage's), when it fits in 4 KB and nothing was cut."""
    if value.endswith("truncated"):
        return value
    out = f"{value}, {member}" if value else member
    return out if len(out) <= MAX_BYTES else value


def list_member(name: str, items: list[str]) -> str:
    """``name=("a" "b")``: an inner list of strings, such as the Looper's calls and their verdicts."""
    return f"{name}=(" + " ".join(_string(i) for i in items) + ")"


def allowed(policy: str, asked: bool, authenticated: bool) -> bool:
    """Whether a caller that sent x-vsr-debug receives the trace under ``headers.debug``."""
    if not asked:
        return False
    return policy == "any" or (policy == "authenticated" and authenticated)
