"""Which request paths are canonical: the only ones the router routes.

Who may call a route (an admin key, the listener's role, a client key) is decided on the request's path, and the
route is found by that same path, so the two must never read one path two ways. A path one reader would
normalise (``//metrics``, ``/./metrics``, ``/%6detrics``, ``/api%2Fv1/keys``) is refused here, with a 400
``non_canonical_path`` in the route's protocol, before either reads it; quart's own slash merging is off
(``admin.make_admin``), so what passes is matched exactly as it is spelled.

Refusing rather than normalising (nginx's ``merge_slashes``, Envoy's ``normalize_path``) is the choice for a
router that often sits behind a proxy: a proxy that does not normalise (Envoy's defaults) matches its own rules
(``/metrics`` denied on the public route) on the spelled path, and a router normalising after it would serve
``//metrics`` past that rule. Refused, the only path that gets anywhere is the one both read the same. No client
loses by it: the SDKs send canonical paths (a base URL's trailing slash is joined without a second one), as
RFC 3986 6.2.2 asks of URI producers (no percent-encoded unreserved characters, no dot segments).
"""
from __future__ import annotations

import re

_ESCAPE = re.compile(rb"%([0-9A-Fa-f]{2})")
# RFC 3986 2.3: percent-encoding these is never needed; a reader decodes them to the same path.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SEPARATORS = frozenset(b"/\\")
# A model id may hold a slash (vsr/auto), which the SDKs send encoded (``/v1/models/vsr%2Fauto``): past this
# prefix, spelled literally, an encoded slash is data and the route takes the rest of the path as the id.
_SLASHED_IDS = b"/v1/models/"


def non_canonical(raw_path: bytes, path: str) -> str | None:
    """Why the path of a request (``raw_path`` as sent, ``path`` decoded) is not canonical; None when it is (or
    names no path: ``*``)."""
    if b"%" not in raw_path and path[:1] == "/" and path[-1:] != "/" and "//" not in path and "/." not in path:
        return None         # no escape, no empty segment, no dot segment: every check below would pass
    if path == "*":
        return None
    if not path.startswith("/"):
        # h11 takes any visible characters as a target, and werkzeug matches ``metrics`` as ``/metrics``.
        return "it does not start with a slash"
    for escape in _ESCAPE.finditer(raw_path):
        byte = int(escape.group(1), 16)
        if byte in _UNRESERVED:
            return f"{escape.group().decode()} encodes {chr(byte)!r}, which is sent as it is"
        if byte in _SEPARATORS and not (raw_path.startswith(_SLASHED_IDS) and escape.start() >= len(_SLASHED_IDS)):
            return f"{escape.group().decode()} encodes a path separator"
    if path != "/" and any(segment in ("", ".", "..") for segment in path[1:].split("/")):
        return "it holds repeated slashes, a trailing slash or a dot segment (. or ..)"
    return None


def normalised(path: str) -> str:
    """``path`` with repeated slashes merged and dot segments resolved (RFC 3986 5.2.4): which protocol's error
    shape a refused path's client reads, never a route."""
    out: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if out:
                out.pop()
        elif segment not in ("", "."):
            out.append(segment)
    return "/" + "/".join(out)


# The client routes served under /v1 that are also served without it, as LiteLLM and OpenAI-compatible servers
# serve them (a client whose base URL lacks /v1: ``OpenAI(base_url="http://router:8000")``). Chat Completions'
# bare path is a route of its own (app.API_PATHS); the operator's routes keep their one spelling.
_UNVERSIONED = ("/models", "/responses", "/messages", "/images/generations")


def versioned(scope: dict, path: str) -> str:
    """``path``, and the request's scope, as ``/v1`` + ``path`` when ``path`` is a client route spelled without
    it (``/models``, ``/models/{id}``, ``/responses/{id}/input_items``, ``/messages/count_tokens``); else
    ``path``. Before the canonical check, so both spellings are checked and routed as one (``/models/vsr%2Fauto``
    keeps its encoded slash, as ``/v1/models/vsr%2Fauto``)."""
    head = next((h for h in _UNVERSIONED if path == h or path.startswith(h + "/")), None)
    if head is None:
        return path
    raw = scope.get("raw_path")
    if raw is not None and not raw.startswith(head.encode()):
        return path     # spelled otherwise (escaped): the canonical check refuses it as it was sent
    scope["path"] = "/v1" + path
    if raw is not None:
        scope["raw_path"] = b"/v1" + raw
    return scope["path"]
