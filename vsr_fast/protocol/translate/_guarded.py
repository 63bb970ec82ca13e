"""What the response guard needs of an answer in a client's own protocol: its text, and a note at its head.

Both forms go through the neutral ones: a whole body is read into an
``Answer``, a held stream's client events into neutral events. The text a
guard reads is the answer's text parts in order, then each tool call as
``name(arguments)``. The note is a text delta at the head of the first text
block (a whole answer: at the head of its first text part, or a text part of
its own when it has none); the stream is then re-encoded by the client
protocol's own writer.
"""
from __future__ import annotations

import msgspec

from ._ir import (
    Answer, ArgsDelta, BlockStart, BlockStop, Event, Failed, Finished, Started, Text, TextDelta, Thinking, ToolCall,
)
from ._sse import SSEParser


def _reader(fmt):
    return fmt.StreamReader()


def answer_text(fmt, body: bytes) -> str:
    """The text of a whole answer written in the format ``fmt`` (a translate module)."""
    answer, _ = fmt.read_answer(body)
    return text_of_parts(answer)


def text_of_parts(answer: Answer) -> str:
    texts = [p.text for p in answer.parts if isinstance(p, Text)]
    calls = [f"{p.name}({p.arguments})" for p in answer.parts if isinstance(p, ToolCall)]
    return "\n".join(t for t in (*texts, *calls) if t)


def stream_events(fmt, sse: bytes) -> list[Event]:
    """A whole stream of format ``fmt`` read back into neutral events."""
    parser, reader = SSEParser(), _reader(fmt)
    events: list[Event] = []
    for name, data in [*parser.feed(sse), *parser.close()]:
        events += reader.event(name, data)
    events += reader.close()
    return events


def failure_of(events: list[Event]) -> str | None:
    """Why a held stream is not a whole answer (an error event, or no end), or None when it is."""
    failed = next((ev for ev in events if isinstance(ev, Failed)), None)
    if failed is not None:
        return failed.message
    if not any(isinstance(ev, Finished) for ev in events):
        return "the stream ended before the answer did"
    return None


def stream_text(events: list[Event]) -> str:
    texts: dict[int, list[str]] = {}
    tools: dict[int, tuple[str, list[str]]] = {}
    for ev in events:
        if isinstance(ev, BlockStart) and ev.kind == "tool":
            tools[ev.index] = (ev.name, [])
        elif isinstance(ev, TextDelta):
            texts.setdefault(ev.index, []).append(ev.text)
        elif isinstance(ev, ArgsDelta) and ev.index in tools:
            tools[ev.index][1].append(ev.json)
    parts = ["".join(t) for _, t in sorted(texts.items())]
    parts += [f"{name}({''.join(args)})" for _, (name, args) in sorted(tools.items())]
    return "\n".join(p for p in parts if p)


def noted_answer(answer: Answer, note: str) -> Answer:
    """The answer with ``note`` at the head of its text."""
    for i, part in enumerate(answer.parts):
        if isinstance(part, Text):
            answer.parts[i] = msgspec.structs.replace(part, text=note + part.text)   # a refusal stays one
            return answer
    # After the model's thinking: Claude's must lead the turn when the client sends it back.
    head = next((i for i, p in enumerate(answer.parts) if not isinstance(p, Thinking)), len(answer.parts))
    answer.parts.insert(head, Text(note))
    return answer


def noted_events(events: list[Event], note: str) -> list[Event]:
    """The events with ``note`` as the first text of the first text block (a block of its own when none)."""
    for i, ev in enumerate(events):
        if isinstance(ev, BlockStart) and ev.kind == "text":
            return [*events[:i + 1], TextDelta(ev.index, note), *events[i + 1:]]
    # No text block: a text block of its own ahead of the others, at an index none of them uses.
    index = max((e.index for e in events if isinstance(e, BlockStart)), default=-1) + 1
    head = next((i + 1 for i, e in enumerate(events) if isinstance(e, Started)), 0)
    thinking = {e.index for e in events if isinstance(e, BlockStart) and e.kind == "thinking"}
    for i in range(head, len(events)):   # after the model's leading thinking blocks, as in ``noted_answer``
        e = events[i]
        if isinstance(e, BlockStart) and e.kind != "thinking":
            break
        if isinstance(e, BlockStop) and e.index in thinking:
            head = i + 1
    return [*events[:head], BlockStart(index, "text"), TextDelta(index, note), BlockStop(index), *events[head:]]


__all__ = ["answer_text", "failure_of", "noted_answer", "noted_events", "stream_events", "stream_text", "text_of_parts"]
