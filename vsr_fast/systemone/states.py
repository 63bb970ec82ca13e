"""Building the System One state a question reads from a request (spec 1.2, 5.1)."""
from __future__ import annotations

from ..protocol.systemone import State, Turn
from ..signals.base import CanonicalRequest
from .learned import SPAN_PARTS, Share, StateSpec

# Earlier user turns (and tool results) read at most beyond the current turn, the most recent: by the embedded
# models, and by the router for a span rule (one state a text). The bound the spec puts on input.previous_turns.
HISTORY_TURNS = 32
# How sure a jailbreak answer on a user turn older than the previous one must be to decide (P(jailbreak)): the
# embedded models' own rule for their history (vsr_static._model), and the router's for such a turn's windows
# (``history_windows``). A benign turn flagged by mistake blocks the turn that replies to it, not every later one.
HISTORY_SURE = 0.6


def build_state(request: CanonicalRequest, spec: StateSpec, view, *, answer: str | None = None,
                context: str | None = None) -> State:
    """The state for ``spec``: the current turn (through ``view``) plus the parts the spec asks for;
    at the response stage, the model's ``answer`` and its grounding ``context``."""
    return State(
        answer=view(answer) if spec.answer and answer is not None else None,
        context=view(context) if spec.context and context is not None else None,
        request=view(request.text),
        history=[view(t) for t in request.history] if spec.history else [],
        previous_turns=[Turn(role=r, content=view(c)) for r, c in request.previous_turns(spec.previous_turns)],  # type: ignore[arg-type]
        previous_answer=view(request.previous_answer) if spec.previous_answer and request.previous_answer else None,
        tool_results=[view(t) for t in request.tool_results] if spec.tool_results else [],
        images=list(request.images) if spec.images else [],
    )


def part_shares(share: Share, request: CanonicalRequest) -> list[Share]:
    """The earlier texts a span rule's ``share`` reads beyond the current turn, each a share of its own: the
    most recent ``HISTORY_TURNS`` of each part its spec asks for, empty ones left out."""
    out = []
    for part in SPAN_PARTS:
        if getattr(share.spec, part):
            texts = getattr(request, part)
            out += [Share(share.wire_id, share.deployment, share.stage, StateSpec(), part=f"{part}:{i}")
                    for i in range(max(len(texts) - HISTORY_TURNS, 0), len(texts)) if texts[i].strip()]
    return out


def part_state(request: CanonicalRequest, part: str, view) -> State:
    """The state of one earlier text (``part_shares``): that text, through ``view``, as the request; for a
    window of one (``history:3@0-2048``, ``history_windows``), those bytes of it as they are."""
    name, _, where = part.partition(":")
    index, _, window = where.partition("@")
    text = getattr(request, name)[int(index)]
    if window:
        start, _, end = window.partition("-")
        return State(request=text.encode()[int(start):int(end)].decode())
    return State(request=view(text))
