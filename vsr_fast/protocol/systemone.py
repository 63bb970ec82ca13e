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

A client of the router's own API writes the standard form (``ClientStandardRequest``, ``ClientBatchRequest``):
``model`` is required and ``questions`` has one question at least. Free text (``Text``: a state, instructions,
a description) may be a string, an object or an array; an object or array is read as its compact JSON, keys
in the order sent, and a choice without a description (null) by its name alone. The router's own calls and a
model runtime read the same types with ``model`` optional.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct, field
from msgspec.structs import force_setattr

from .errors import shape_problem

# --- free text --------------------------------------------------------------------------

# The standard form's free text. A frozen Struct with a Text field renders it to ``str`` once, in
# ``__post_init__``, so whatever reads a decoded question or state reads strings.
Text = str | dict[str, Any] | list[Any]


def render(value: Text) -> str:
    """The text a model reads for ``value``: a string as it is, an object or array as its compact JSON."""
    return value if isinstance(value, str) else ENCODER.encode(value).decode()


def _render_fields(struct: Struct, *names: str) -> None:
    for name in names:
        value = getattr(struct, name)
        if value is not None and type(value) is not str:
            force_setattr(struct, name, render(value))


def _described(struct: Struct) -> None:
    """Render a question's instructions and its criteria's descriptions; a description of null is ""."""
    # Loops over type() checks: this runs for every question decoded or built, and most are strings already.
    instructions = struct.instructions     # type: ignore[attr-defined]
    if instructions is not None and type(instructions) is not str:
        force_setattr(struct, "instructions", render(instructions))
    criteria = struct.criteria     # type: ignore[attr-defined]
    for value in criteria.values() if type(criteria) is dict else criteria:
        if type(value) is not str:
            force_setattr(struct, "criteria", {k: "" if v is None else render(v) for k, v in criteria.items()}
                          if type(criteria) is dict else [render(v) for v in criteria])
            return


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


def read_state(value: State | Text) -> State:
    """The state a model reads for a request's ``state``.

    An object made only of State's parts, each of its type, is that state (the v0.5 form the router's own
    calls send). Any other value is the request text: a string as it is, any other object or array as its
    compact JSON, so a span's offsets index that rendering. A v0.5 state with a misspelt part is therefore
    read as text, as the standard form allows any object.
    """
    if isinstance(value, State):
        return value
    if isinstance(value, dict):
        try:
            return msgspec.convert(value, State)
        except msgspec.ValidationError:
            pass
    return State(request=render(value))


def _read_state(struct: Struct) -> None:
    state = struct.state     # type: ignore[attr-defined]
    if type(state) is not State:
        force_setattr(struct, "state", read_state(state))


# --- questions ---------------------------------------------------------------------------


# Every Text field below holds a str once built (see Text); a criteria dict maps names to str.


class NoulCriteria(Struct, frozen=True, omit_defaults=True):
    true: Text | None = None
    false: Text | None = None

    def __post_init__(self) -> None:
        _render_fields(self, "true", "false")


class NoulQuestion(Struct, tag="noul", frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """Is this true? Answered with P(yes)."""

    instructions: Text | None = None
    criteria: NoulCriteria | None = None

    def __post_init__(self) -> None:
        _render_fields(self, "instructions")


class ChoiceQuestion(Struct, tag="choice", frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """Which of 2 to 255 described options fits? Criteria map option names to descriptions."""

    criteria: dict[str, Text | None]
    instructions: Text | None = None
    __post_init__ = _described


class ScoreQuestion(Struct, tag="score", frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """How much, on 2 to 10 ordered levels? Criteria describe the levels, from 0."""

    criteria: Annotated[list[Text], Meta(min_length=1)]
    instructions: Text | None = None
    __post_init__ = _described


class SetQuestion(Struct, tag="set", frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """Which of 1 to 255 labels apply? Answered with P(label) for each."""

    criteria: dict[str, Text | None]
    instructions: Text | None = None
    __post_init__ = _described


class SpanQuestion(Struct, tag="span", frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """Where in the text is each of 1 to 255 labels? Answered with character offsets."""

    criteria: dict[str, Text | None]
    instructions: Text | None = None
    part: str = "request"           # the state part the offsets index
    head: str | None = None         # e.g. "broad" on the models that have that head
    __post_init__ = _described


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


Questions = Annotated[dict[str, Question], Meta(min_length=1)]


class StandardRequest(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    state: Text          # a State once built (read_state)
    questions: Questions
    model: str | None = None
    options: Options | None = None
    return_meta: bool = False
    __post_init__ = _read_state


class Entry(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """One named standard request inside a batch."""

    state: Text          # a State once built (read_state)
    questions: Questions
    __post_init__ = _read_state


class BatchRequest(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    states: dict[str, Entry]
    model: str | None = None
    options: Options | None = None
    assets: dict[str, str] | None = None
    return_meta: bool = False


class ClientStandardRequest(StandardRequest, frozen=True, kw_only=True):
    """A standard request to the router's own API, which the standard form requires to name its model."""

    model: str


class ClientBatchRequest(BatchRequest, frozen=True, kw_only=True):
    """A batch to the router's own API: its entries are standard requests, so it names its model too."""

    model: str


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


# The router's own listing knows no release date; as its /v1/models (created 0), it says the epoch.
UNKNOWN_RELEASE_DATE = "1970-01-01"


class ModelMetadata(Struct, frozen=True):
    """One model of the router's own listing: the standard form's ModelMetadata (every field present, unlike
    a ModelInfo read from a runtime or an API) and the question types and modalities it answers."""

    name: str
    description: str
    release_date: str               # YYYY-MM-DD
    question_types: list[str]
    modalities: list[str]


class ModelMetadataList(Struct, frozen=True):
    models: list[ModelMetadata]


class InvalidRequest(msgspec.ValidationError):
    """A body refused with the path of the bad field, the batch entry and question it is in."""

    def __init__(self, message: str, *, question: str | None = None, state: str | None = None) -> None:
        super().__init__(message)
        self.message, self.question, self.state = message, question, state


def decode_request(body: bytes, *, model_required: bool = False) -> StandardRequest | BatchRequest:
    """Decode either form; a body that mixes them, or has neither, is a ``ValidationError``.

    The two forms are told apart by their keys before typed decoding, so a
    mixed body is refused as mixed instead of as an unknown field.
    ``model_required``: the body a client sent the router's own API.
    """
    problem = shape_problem(body)
    if problem is not None:
        # msgspec's way of naming where, as every other refusal of this API reads.
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in problem.path)
        raise msgspec.DecodeError(problem.detail + (f" - at `${where}`" if where else ""))
    top = _TOP.decode(body)
    if not isinstance(top, dict):
        raise msgspec.ValidationError("Expected `object`")
    batch = "states" in top
    standard = "state" in top or "questions" in top
    if batch and standard:
        raise msgspec.ValidationError("a body is a standard request (state, questions) or a batch (states), not both")
    try:
        req = _DECODERS[batch, model_required].decode(body)
    except msgspec.ValidationError as exc:
        message, keys = _named(top, str(exc))
        entry, question, *_ = ([] if batch else [None]) + keys + [None, None]   # a standard request has no entry
        raise InvalidRequest(message, question=question, state=entry) from None
    if batch and not req.states:
        raise msgspec.ValidationError("`states` is empty - at `$.states`")
    _within_limits(req)
    return req


def _within_limits(req: StandardRequest | BatchRequest) -> None:
    """InvalidRequest for the first question whose options break the protocol's limits (``LIMITS``): a
    deployment handed 0 options divides by zero, 300 overflow a one-byte option index."""
    entries = req.states.items() if isinstance(req, BatchRequest) else ((None, req),)
    for entry, body in entries:
        for name, q in body.questions.items():
            kind = q.__struct_config__.tag
            bounds = LIMITS.get(kind)
            if bounds is not None and not bounds[0] <= len(q.criteria) <= bounds[1]:
                where = f"$.states.{entry}.questions.{name}" if entry is not None else f"$.questions.{name}"
                raise InvalidRequest(f"a {kind} question has {bounds[0]} to {bounds[1]} options, "
                                     f"not {len(q.criteria)} - at `{where}.criteria`", question=name, state=entry)


# The dicts on a request's path, each with its values' type: entries, questions, a question's options.
_KEYED: dict[str, Any] = {"states": Entry, "questions": Question, "criteria": Text | None}
_KEYED_PATH = re.compile(r"\.(states|questions|criteria)\[\.\.\.\]")


def _named(value: Any, message: str) -> tuple[str, list[str]]:
    """``message`` with the keys on its path named where msgspec writes ``[...]``, and those keys (entry, question,
    option, as far as the path goes): the first value under each dict that fails on its own is the one."""
    at = _KEYED_PATH.match(message.rpartition(" - at `$")[2])
    if at is None or not isinstance(value, dict) or not isinstance(items := value.get(at[1]), dict):
        return message, []
    for key, item in items.items():
        try:
            msgspec.convert(item, _KEYED[at[1]])
        except msgspec.ValidationError as exc:
            inner, keys = _named(item, str(exc))
            text, sep, rest = inner.rpartition(" - at `$")
            text, rest = (text, rest) if sep else (inner, "`")
            return f"{text} - at `$.{at[1]}.{key}{rest}", [key, *keys]
    return message, []


_TOP = msgspec.json.Decoder(Any)
_DECODERS = {(batch, client): msgspec.json.Decoder(t) for batch, client, t in (
    (False, False, StandardRequest), (True, False, BatchRequest),
    (False, True, ClientStandardRequest), (True, True, ClientBatchRequest))}
STANDARD_RESPONSE = msgspec.json.Decoder(StandardResponse)
BATCH_RESPONSE = msgspec.json.Decoder(BatchResponse)
ERROR_RESPONSE = msgspec.json.Decoder(ErrorResponse)
ENCODER = msgspec.json.Encoder()
