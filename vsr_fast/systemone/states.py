"""Building the System One state a question reads from a request (spec 1.2, 5.1)."""
from __future__ import annotations

from ..protocol.systemone import State, Turn
from ..signals.base import CanonicalRequest
from .learned import StateSpec

# Earlier user turns (and tool results) read at most beyond the current turn, the most recent, by the embedded
# models. The bound the spec puts on input.previous_turns.
HISTORY_TURNS = 32


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
