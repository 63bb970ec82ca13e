"""Token logprobs, which Chat (``choices[].logprobs.content``) and Responses (``output_text.logprobs``) both carry
in one shape: token, logprob, bytes, top_logprobs (each of those token, logprob, bytes)."""
from __future__ import annotations


def tokens(entries: object) -> list[dict] | None:
    """A backend's logprob entries in the shared shape (None when there are none): only the four fields, and
    ``bytes`` (which a stream may leave out) the token's UTF-8."""
    if not isinstance(entries, list) or not entries:
        return None
    return [_token(e, True) for e in entries if isinstance(e, dict) and isinstance(e.get("token"), str)] or None


def _token(e: dict, top: bool) -> dict:
    raw = e.get("bytes")
    out = {"token": e["token"], "logprob": e.get("logprob") if isinstance(e.get("logprob"), (int, float)) else 0.0,
           "bytes": raw if isinstance(raw, list) else list(e["token"].encode())}
    if top:
        alternatives = e.get("top_logprobs")
        out["top_logprobs"] = [_token(t, False) for t in alternatives if isinstance(t, dict) and
                               isinstance(t.get("token"), str)] if isinstance(alternatives, list) else []
    return out


def joined(parts: list) -> list[dict] | None:
    """The logprobs of an answer's text parts, one list (None when none has any)."""
    lists = [p.logprobs for p in parts if getattr(p, "logprobs", None)]
    return [e for lp in lists for e in lp] if lists else None
