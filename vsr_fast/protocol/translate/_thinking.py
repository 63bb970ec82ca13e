"""The model's reasoning (``Thinking``) in each protocol's words.

Claude's thinking blocks must come back to Anthropic as they were, signature and all, at the head of the
assistant turn of a tool loop: a Chat client carries them as LiteLLM does (``thinking_blocks`` on the message
beside ``reasoning_content``), a Responses client in a ``reasoning`` item whose ``encrypted_content`` is the block
itself, prefixed (``SEALED``) and base64-encoded, which the router reads back. An unsigned thinking block (an
OpenAI-format backend's ``reasoning_content``) has nothing Anthropic would accept: it is dropped there.

A Responses backend's reasoning goes the other way round: its summary is the text, its ``encrypted_content`` (the
model's chain of thought, which it needs back before a function call's output when nothing is stored) the
signature, prefixed (``OPENAI``). A Messages client sends the signature back unchanged, a Chat client in
``thinking_blocks``; the router turns it into a reasoning item again for a Responses backend, and drops it toward
Anthropic, which did not sign it.
"""
from __future__ import annotations

import base64
import binascii

import msgspec

from ._ir import Thinking

# An ``encrypted_content`` of the router's own: this prefix, then the base64 of the block's JSON.
SEALED = "vsr-thinking:"
# A thinking block's signature of the router's own: this prefix, then a Responses reasoning item's encrypted_content.
OPENAI = "vsr-openai-reasoning:"
_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder()


def block(t: Thinking) -> dict | None:
    """The Anthropic block of ``t`` (as Chat's ``thinking_blocks`` list it too); None for an unsigned one."""
    if t.redacted is not None:
        return {"type": "redacted_thinking", "data": t.redacted}
    if not t.signature:
        return None
    return {"type": "thinking", "thinking": t.text, "signature": t.signature}


def of_reasoning(text: str, encrypted: str | None, path: str) -> Thinking:
    """A Responses backend's reasoning item (its summary, its ``encrypted_content``) as a ``Thinking``."""
    return Thinking(text, OPENAI + encrypted if encrypted else None, path=path)


def encrypted(t: Thinking) -> str | None:
    """The Responses ``encrypted_content`` a ``Thinking`` carries (``of_reasoning``'s); None for Claude's or none."""
    s = t.signature
    return s[len(OPENAI):] if s is not None and s.startswith(OPENAI) else None


def anthropic_block(t: Thinking) -> dict | None:
    """The block of ``t`` for an Anthropic backend: None for one Anthropic did not sign (unsigned, OpenAI's)."""
    return None if encrypted(t) is not None else block(t)


def of_block(b: object, path: str) -> Thinking | None:
    """A thinking or redacted_thinking block (a dict, as a Chat client sends it) as a ``Thinking``; else None."""
    if not isinstance(b, dict):
        return None
    if b.get("type") == "redacted_thinking" and isinstance(b.get("data"), str):
        return Thinking(redacted=b["data"], path=path)
    if b.get("type") == "thinking" and isinstance(b.get("thinking"), str):
        signature = b.get("signature")
        return Thinking(b["thinking"], signature if isinstance(signature, str) and signature else None, path=path)
    return None


def seal(t: Thinking) -> str | None:
    """A Responses ``encrypted_content`` carrying ``t`` whole (a Responses backend's own as it came); None for an
    unsigned block (nothing to carry)."""
    b = anthropic_block(t)
    return encrypted(t) if b is None else SEALED + base64.b64encode(_ENCODER.encode(b)).decode()


def unseal(content: str | None, path: str) -> Thinking | None:
    """The block an ``encrypted_content`` of ``seal`` carries; None for another's (OpenAI's own) or a broken one."""
    if not content or not content.startswith(SEALED):
        return None
    try:
        return of_block(_DECODER.decode(base64.b64decode(content[len(SEALED):], validate=True)), path)
    except (binascii.Error, msgspec.DecodeError, ValueError):
        return None
