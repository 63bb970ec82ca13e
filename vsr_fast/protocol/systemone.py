"""System One wire types: the standard form, the batch form, answers and errors.

Field names and answer shapes of the standard form follow the public OpenAPI
description (``shared/spec/systemone-api-standard-form.openapi.yml``); the
batch form, the set and span types and the error codes follow the v0.5 design
in the same style. A body is one form or the other, never both.

    standard request   {model, state, questions, options?, return_meta?}
    standard response  {model, answers, usage}
    batch request      {model, states: {name: {state, questions}}, options?, assets?}
    batch response     {model, states: {name: {answers, usage} | {error}}, usage}
    error              {error: {type, code, message, question?, state?}}
"""
from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import Struct, field

from .._ext.jsonscan import nesting_depth

# --- the state: named parts of what the questions are about ---------------------------


class Turn(Struct, frozen=True, forbid_unknown_fields=True):
    role: Literal["user", "assistant"]
    content: str


class State(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """The text a question is about (spec 1.2). Only ``request`` is always present."""

    request: str = ""
    history: list[str] = field(default_factory=list)          # earlier user turns, oldest first
    previous_turns: list[Turn] = field(default_factory=list)  # the last N turns, both roles
    previous_answer: str | None = None                        # the answer the current turn replies to
    tool_results: list[str] = field(default_factory=list)
    candidate: str | None = None
    answer: str | None = None
    context: str | None = None
    images: list[str] = field(default_factory=list)           # URLs or data URLs
    videos: list[str] = field(default_factory=list)


# --- questions ---------------------------------------------------------------------------


class NoulCriteria(Struct, frozen=True, omit_defaults=True):
    true: str | None = None
    false: str | None = None


class NoulQuestion(Struct, tag="noul", frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """Is this true? Answered with P(yes)."""

    instructions: str | None = None
    criteria: NoulCriteria | None = None


class ChoiceQuestion(Struct, tag="choice", frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """Which of 2 to 255 described options fits? Criteria map option names to descriptions."""

    criteria: dict[str, str]
    instructions: str | None = None


class ScoreQuestion(Struct, tag="score", frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """How much, on 2 to 10 ordered levels? Criteria describe the levels, from 0."""

    criteria: list[str]
    instructions: str | None = None


class SetQuestion(Struct, tag="set", frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """Which of 1 to 255 labels apply? Answered with P(label) for each."""

    criteria: dict[str, str]
    instructions: str | None = None


class SpanQuestion(Struct, tag="span", frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """Where in the text is each of 1 to 255 labels? Answered with character offsets."""

    criteria: dict[str, str]
    instructions: str | None = None
    part: str = "request"           # the state part the offsets index
    head: str | None = None         # e.g. "broad" on the models that have that head


Question = NoulQuestion | ChoiceQuestion | ScoreQuestion | SetQuestion | SpanQuestion
QUESTION_TYPES = ("choice", "noul", "score", "set", "span")

# Protocol limits (spec 5.2): options per question type.
LIMITS = {"choice": (2, 255), "set": (1, 255), "span": (1, 255), "score": (2, 10)}


# --- answers -------------------------------------------------------------------------------


class NoulAnswer(Struct, tag="noul", frozen=True):
    noul: float


class ChoiceAnswer(Struct, tag="choice", frozen=True):
    choice: str
    confidence: float
    probabilities: dict[str, float]


class ScoreAnswer(Struct, tag="score", frozen=True):
    score: float
    confidence: float
    probabilities: dict[str, float]
    legend: dict[str, str] = field(default_factory=dict)


class SetAnswer(Struct, tag="set", frozen=True):
    probabilities: dict[str, float]


class Span(Struct, frozen=True, omit_defaults=True):
    label: str
    start: int            # character offsets into the question's part, end exclusive
    end: int
    probability: float = 1.0
    text: str | None = None


class SpanAnswer(Struct, tag="span", frozen=True):
    spans: list[Span]


class QuestionError(Struct, tag="error", frozen=True):
    """A local runtime's in-place failure of one question; the others are answered."""

    code: str
    message: str = ""


Answer = NoulAnswer | ChoiceAnswer | ScoreAnswer | SetAnswer | SpanAnswer | QuestionError


class Usage(Struct, frozen=True):
    input_tokens: int = 0
    output_tokens: int = 0


# --- requests and responses --------------------------------------------------------------------


class Options(Struct, frozen=True, omit_defaults=True):
    temperature: float | None = None


class StandardRequest(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    state: State
    questions: dict[str, Question]
    model: str | None = None
    options: Options | None = None
    return_meta: bool = False


class Entry(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """One named standard request inside a batch."""

    state: State
    questions: dict[str, Question]


class BatchRequest(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    states: dict[str, Entry]
    model: str | None = None
    options: Options | None = None
    assets: dict[str, str] | None = None
    return_meta: bool = False


class StandardResponse(Struct, frozen=True):
    model: str
    answers: dict[str, Answer]
    usage: Usage = Usage()


class ErrorBody(Struct, frozen=True):
    code: str                       # invalid_request, question_failed, invalid_input, overloaded, ...
    message: str
    question: str | None = None     # the failed question, for question_failed / invalid_input
    state: str | None = None        # the batch entry it failed about
    type: str = "systemone_error"


class ErrorResponse(Struct, frozen=True):
    error: ErrorBody


class EntryResponse(Struct, frozen=True, omit_defaults=True):
    answers: dict[str, Answer] | None = None
    usage: Usage | None = None
    error: ErrorBody | None = None


class BatchResponse(Struct, frozen=True):
    model: str
    states: dict[str, EntryResponse]
    usage: Usage = Usage()


# --- model listing ---------------------------------------------------------------------------------


class ModelInfo(Struct, frozen=True, omit_defaults=True):
    name: str
    description: str = ""
    release_date: str = ""
    question_types: list[str] = field(default_factory=list)
    modalities: list[str] = field(default_factory=list)
    presets: list[str] = field(default_factory=list)
    contract: str = ""              # a model runtime's contract version; "" for a remote API


class ModelList(Struct, frozen=True):
    models: list[ModelInfo]


def decode_request(body: bytes) -> StandardRequest | BatchRequest:
    """Decode either form; a body that mixes them, or has neither, is a ``ValidationError``.

    The two forms are told apart by their keys before typed decoding, so a
    mixed body is refused as mixed instead of as an unknown field.
    """
    if nesting_depth(body, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise msgspec.DecodeError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    top = _TOP.decode(body)
    if not isinstance(top, dict):
        raise msgspec.ValidationError("Expected `object`")
    batch = "states" in top
    standard = "state" in top or "questions" in top
    if batch and standard:
        raise msgspec.ValidationError("a body is a standard request (state, questions) or a batch (states), not both")
    if batch:
        req = _BATCH.decode(body)
        if not req.states:
            raise msgspec.ValidationError("`states` is empty - at `$.states`")
        return req
    return _STANDARD.decode(body)


_TOP = msgspec.json.Decoder(Any)
MAX_JSON_DEPTH = 256   # as every client API (protocol.errors); a deeper body is an invalid_request
_STANDARD = msgspec.json.Decoder(StandardRequest)
_BATCH = msgspec.json.Decoder(BatchRequest)
STANDARD_RESPONSE = msgspec.json.Decoder(StandardResponse)
BATCH_RESPONSE = msgspec.json.Decoder(BatchResponse)
ERROR_RESPONSE = msgspec.json.Decoder(ErrorResponse)
ENCODER = msgspec.json.Encoder()
