"""The refusal-text detector (selection.refusal) and escalate's ``refusal: false`` reading it from an answer's
bytes as each protocol writes them, whole and streamed."""
from __future__ import annotations

import msgspec
import pytest

from vsr_fast.config.algorithm import Accept
from vsr_fast.selection.accept import accepted
from vsr_fast.selection.refusal import OPENING, refusal_text

REFUSALS = [
    ("I'm sorry, but I can't help with that request. It would be against my guidelines.", "i can't help"),
    ("I cannot help with that.", "i can't help"),
    ("I\u2019m not able to provide that information.", "i'm not able to provide"),
    ("I am unable to assist with this request.", "i'm unable to assist"),
    ("I will not provide any information about that.", "i won't provide"),
    ("Sorry, I can't do that.", "i can't do that"),
    ("I'm sorry, but I can't.", "i can't"),
    ("I must respectfully decline.", "i must respectfully decline"),
    ("That's not something I can help with.", "not something i can"),
    ("I apologize, but I cannot fulfill this request.", "i can't fulfill"),
    ("I can't and won't provide instructions for that.", "i can't and won't provide"),
    ("This request goes against my ethical guidelines.", "against my ethical guidelines"),
    ("As an AI language model, I cannot predict the future.", "as an ai language model, i can't"),
    ("I'm not comfortable writing that.", "i'm not comfortable writing"),
    ("I'd rather not discuss that.", "i'd rather not discuss"),
    ("It is not appropriate for me to speculate about a real person's health.", "it's not appropriate for me to"),
    # The refusal need not be the first sentence: a preface comes first, the refusal within the opening.
    ("I understand this is frustrating. However, I can't assist with bypassing a paywall.", "i can't assist"),
    # Declining what was asked and offering something else is a refusal of what was asked.
    ("I can't provide medical advice, but here are some general tips on sleep.", "i can't provide"),
    ("**I cannot help with that.**", "i can't help"),
]

ORDINARY = [
    "Sorry for the confusion, here is the fixed code:\n\n```python\ndef add(a, b):\n    return a + b\n```",
    "You can't divide by zero, so the function returns None in that case.",
    "I can't reproduce the bug, but try upgrading httpx to 0.27 and running it again.",
    "I can't help but notice the loop is off by one: range(len(xs) - 1) skips the last item.",
    "I'm sorry to hear that. Here are some tips that may help you sleep better.",
    "I can't help without the stack trace: can you paste the full error?",
    "I cannot say which version you have unless you run `python --version`.",
    "I can't find an error in your code; it looks right to me.",
    "I can't stress this enough: back up your data first.",
    "You cannot use await outside an async function; wrap it in async def main().",
    "Sorry, I misread your question. The answer is 42.",
    "I don't have access to your files, but the usual fix is to clear the cache.",
    "I won't give up on this: here is another approach that avoids the race.",
    "Unfortunately, there is no built-in way to do this, so here is a small helper.",
    # Someone else's refusal, quoted: the answer writes it, it does not refuse.
    'Here\'s a polite way to decline: "I\'m sorry, but I can\'t attend the meeting on Friday."',
    "",
]


@pytest.mark.parametrize("text,phrase", REFUSALS)
def test_a_refusal_text_is_found_with_its_phrase(text, phrase):
    assert refusal_text(text) == phrase


@pytest.mark.parametrize("text", ORDINARY)
def test_sorry_and_cant_in_ordinary_use_are_no_refusal(text):
    assert refusal_text(text) is None


def test_only_the_opening_is_read():
    answer = "Here is how the moderation layer works. " * 10 + "A model then says: I can't help with that."
    assert len(answer) > OPENING
    assert refusal_text(answer) is None
    assert refusal_text("I can't help with that. " + "x" * 5000) == "i can't help"


# -- escalate's accept: {refusal: false} on the answer's bytes -------------------------------------------------

REFUSAL: str = REFUSALS[0][0]
FINE = "Sorry for the confusion, here is the fixed code."
CHECK = Accept(refusal=False)


def _sse(events: list[dict]) -> bytes:
    return b"".join(b"data: " + msgspec.json.encode(e) + b"\n\n" for e in events)


def chat(text: str, streamed: bool) -> bytes:
    if not streamed:
        return msgspec.json.encode({"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
    half = len(text) // 2
    chunks = [{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
              for delta, finish in (({"role": "assistant", "content": text[:half]}, None),
                                    ({"content": text[half:]}, None), ({}, "stop"))]
    return _sse(chunks) + b"data: [DONE]\n\n"


def messages(text: str, streamed: bool) -> bytes:
    if not streamed:
        return msgspec.json.encode({"id": "m", "type": "message", "role": "assistant", "model": "m",
                                    "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                                    "usage": {"input_tokens": 1, "output_tokens": 1}})
    events = [{"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "model": "m",
                                                    "content": [], "usage": {"input_tokens": 1, "output_tokens": 0}}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
              {"type": "content_block_stop", "index": 0},
              {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
              {"type": "message_stop"}]
    return b"".join(b"event: " + e["type"].encode() + b"\n" + _sse([e]) for e in events)


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("api_format,body", [("openai", chat), ("anthropic", messages)])
def test_refusal_false_rejects_a_refusal_text_and_says_so(api_format, body, streamed):
    assert accepted(CHECK, body(REFUSAL, streamed), streamed, api_format) == (False, "refusal text (i can't help)")
    assert accepted(CHECK, body(FINE, streamed), streamed, api_format) == (True, "no refusal")
