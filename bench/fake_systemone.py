"""A deterministic fake System One API, as a real HTTP server, for the router's tests.

Run it as ``python -m bench.fake_systemone --host 127.0.0.1 --port 0`` and read the port
from the ``fake_systemone: listening on http://HOST:PORT`` line it prints to stderr; it
exits with status 0 on SIGTERM or SIGINT. Options: ``--model-name NAME`` (the name
``GET /v1/models`` lists and answers carry when a request names no model) and
``--rules FILE`` (a rules document, below, installed at start).

It stands in for a remote System One API (and an attached model runtime): tests decide
every answer and every failure. Like ``bench.mock_upstream`` it is a hand-written
HTTP/1.1 server on raw trio sockets (``bench._http``), every response one send() on a
TCP_NODELAY socket.

Routes
------
``POST /v1/systemone``, ``POST /v1/decisions``
    A standard request ``{state, questions}`` gets a ``StandardResponse``; a batch
    ``{states: {name: {state, questions}}}`` gets a ``BatchResponse``, each entry under its
    name with its usage, plus the total usage. A body ``decode_request`` refuses (mixed
    forms, empty ``states``, an unknown field, malformed JSON), or a question with too few
    or too many options (``LIMITS``), gets 400 ``{"error": {"code": "invalid_request"}}``.
    Usage is deterministic: per entry ``input_tokens = max(1, len(json(state)) // 4) +
    len(questions)``, ``output_tokens = len(questions)``. The model answered is the
    request's ``model``, else the configured model's name.
``GET /v1/models``
    ``{"models": [ModelInfo]}`` with the one configured model (default: name
    ``fake-systemone``, every question type, modality ``text``, no presets).
``POST /_fake/rules``
    Replace the rules with ``{"rules": [...]}`` (or a bare list); counters restart. A bad
    document gets 400 invalid_request naming the path of the fault, and changes nothing.
``GET /_fake/rules``
    The rules in force, each with ``matched``: how many calls its filter has matched.
``POST /_fake/reset``
    Clear the rules, the recorded calls and ``models_requests``; the model stays.
``GET /_fake/calls``
    ``{"calls": [...], "models_requests": N}``: every request to the two decision routes,
    in arrival order, valid or not, as ``{index, method, path, headers (lower-cased names),
    body (parsed JSON, or the raw text when it is not JSON), time (time.time() at arrival),
    latency_ms (the rules' latency the call waits before its answer or failure),
    status (null until answered, and for good when the client left or the call was reset),
    disconnected (the client left before the answer)}``.
``POST /_fake/model``
    Set the ``ModelInfo`` (``{name, description?, release_date?, question_types?,
    modalities?, presets?}``) that ``GET /v1/models`` lists.

Answers without rules
---------------------
noul 0.5; choice: uniform probabilities, the first option as ``choice``, confidence
1/n; score: uniform over the n levels, so ``score`` is the middle (n-1)/2, confidence
1/n, ``legend`` the criteria by level; set: 0.5 per label; span: no spans.

Rules
-----
A rule looks at the call's *items*: one per (entry, question). An entry is the standard
request's state (entry name null) or a batch entry (its name). Every field is optional::

    {"question": "preset:domain",       # exact wire ID, or "*" (default): any question
     "request_contains": "invoice",     # only entries whose state.request contains this
     "answer_contains": "lock",         # response stage: only entries whose state.answer contains this
     "context_contains": "09:00",       # ... whose state.context (the grounding context) contains this
     "answer": {...},                   # fix the answer (one kind, below)
     "latency_ms": 200,                 # wait this long before answering the whole call
     "fail": {...},                     # fail the whole call (below)
     "times": 2,                        # apply only on the first 2 calls the filter matched
     "calls": [3, 4]}                   # apply only on matched calls 3..4 (1-based; [3, null]: 3 on)

The filter (``question`` + the ``*_contains`` tests) *matches a call* when it matches at
least one of its items. Each rule counts the calls its filter matches, whether or not
its effect was used (so one rule's schedule never depends on another rule), and it
*applies* to a call when the filter matches and the count is within ``times`` and
``calls`` (both, when both are given). Of the rules that apply:

- latency: their ``latency_ms`` add up; it runs before the answer *and* before a failure,
  and ends early if the client leaves;
- failure: the first rule in order with ``fail`` fails the whole call, as remote APIs do;
- answers: each item gets the ``answer`` of the first applying rule whose filter matches
  that item and whose answer kind is the question's type (``error`` fits any type); the
  other items get the neutral answer.

Answer kinds (values are probabilities, 0..1; an option or level not given gets 0)::

    {"noul": 0.93}
    {"choice": {"billing": 0.8, "tech": 0.2}}    # choice = argmax (first on ties), confidence = its p
    {"score": [0.1, 0.2, 0.7]}                   # p by level, or {"2": 0.7, "0": 0.3};
                                                  # score = expected level (sum p*level / sum p),
                                                  # confidence = the largest p
    {"set": {"violence": 0.9, "hate": 0.1}}
    {"span": [["email", 10, 27], {"label": "name", "start": 0, "end": 4, "probability": 0.9}]}
                                                  # text is filled from the question's part
                                                  # (state.request by default) when in range
    {"error": {"code": "question_failed", "message": "..."}}
                                                  # an in-place QuestionError, as a local
                                                  # runtime answers; the call still succeeds
    {"omit": true}                               # no answer to the question at all (fits any
                                                  # type); the call still succeeds

Failure kinds (``"fail": "overloaded"`` is short for ``{"kind": "overloaded"}``)::

    {"kind": "overloaded", "retry_after_s": 1}   # 429 code overloaded (+ Retry-After if given)
    {"kind": "status", "status": 503, "body": {...}}
                                                  # that status; body any JSON, or a string sent
                                                  # as text/plain; default an ErrorResponse with
                                                  # code server_error
    {"kind": "question_failed"}                  # 422 code question_failed, question = the first
                                                  # item the rule matched, state = its entry name
                                                  # in a batch
    {"kind": "invalid_input"}                    # 422 code invalid_input, question and state the same way
    {"kind": "hang"}                             # never answer; the call ends when the client leaves
    {"kind": "reset"}                            # drop the connection with an RST, no answer

Every failure but ``status`` (with its own body), ``hang`` and ``reset`` has an
ErrorResponse body ``{"error": {"type": "systemone_error", "code", "message",
"question"?, "state"?}}``; ``message`` can be set on each kind.

Example: "overloaded twice, then answer billing", and a slow, failing PII check::

    {"rules": [
      {"fail": "overloaded", "times": 2},
      {"question": "preset:domain", "answer": {"choice": {"billing": 0.9, "other": 0.1}}},
      {"question": "preset:pii", "request_contains": "my card", "latency_ms": 150,
       "fail": {"kind": "question_failed"}}]}
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import msgspec
import trio
from msgspec import Meta, Struct

from bench import _http
from bench._http import Reader, Request, abort, response_bytes, send_all, serve_until_signal, watched
from bench._procs import Proc
from vsr_fast.protocol.systemone import (
    LIMITS,
    Answer,
    BatchRequest,
    BatchResponse,
    ChoiceAnswer,
    ChoiceQuestion,
    Entry,
    EntryResponse,
    ErrorBody,
    ErrorResponse,
    ModelInfo,
    ModelList,
    NoulAnswer,
    NoulQuestion,
    Question,
    QuestionError,
    QUESTION_TYPES,
    ScoreAnswer,
    ScoreQuestion,
    SetAnswer,
    SetQuestion,
    Span,
    SpanAnswer,
    SpanQuestion,
    StandardResponse,
    State,
    Usage,
    decode_request,
)

__all__ = ["DEFAULT_MODEL", "Fake", "Rule", "RuleSet", "main", "parse_rules", "process"]

DECISION_PATHS = (b"/v1/systemone", b"/v1/decisions")
DEFAULT_MODEL = ModelInfo(
    name="fake-systemone",
    description="A deterministic fake System One API for tests.",
    question_types=list(QUESTION_TYPES),
    modalities=["text"],
)
TEXT = b"text/plain; charset=utf-8"

Prob = Annotated[float, Meta(ge=0, le=1)]
CallNumber = Annotated[int, Meta(ge=1)]


# --- the rules document (strict: a typo in a test's rule is a 400, not a silent no-op) --------------


class SpanSpec(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    label: str
    start: Annotated[int, Meta(ge=0)]
    end: Annotated[int, Meta(ge=0)]
    probability: Prob = 1.0
    text: str | None = None


class QuestionErrorSpec(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    code: str = "question_failed"
    message: str = "injected question error"


class AnswerSpec(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """Exactly one answer kind; the kind names the question type it fits (error fits all)."""

    noul: Prob | None = None
    choice: dict[str, Prob] | None = None
    score: Union[list[Prob], dict[str, Prob], None] = None
    set: dict[str, Prob] | None = None
    span: Union[list[Union[SpanSpec, tuple[str, int, int]]], None] = None
    error: QuestionErrorSpec | None = None
    omit: Literal[True] | None = None       # no answer at all: the call succeeds without this question's answer

    def __post_init__(self) -> None:
        given = [k for k in ANSWER_KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"an answer has exactly one of {', '.join(ANSWER_KINDS)}; got {given or 'none'}")

    @property
    def kind(self) -> str:
        return next(k for k in ANSWER_KINDS if getattr(self, k) is not None)


ANSWER_KINDS = ("noul", "choice", "score", "set", "span", "error", "omit")


class _Failure(Struct, frozen=True, tag_field="kind", forbid_unknown_fields=True, omit_defaults=True):
    """A failure kind; subclasses are told apart by their ``kind``."""


class Overloaded(_Failure, tag="overloaded"):
    message: str = "the decision model is overloaded"
    retry_after_s: Annotated[int, Meta(ge=0)] | None = None


class StatusFailure(_Failure, tag="status"):
    status: Annotated[int, Meta(ge=400, le=599)] = 500
    body: Any = None


class QuestionFailed(_Failure, tag="question_failed"):
    message: str = "the question could not be answered"


class InvalidInput(_Failure, tag="invalid_input"):
    message: str = "the entry's input was refused"


class Hang(_Failure, tag="hang"):
    pass


class Reset(_Failure, tag="reset"):
    pass


Failure = Union[Overloaded, StatusFailure, QuestionFailed, InvalidInput, Hang, Reset]


class Rule(Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    question: str = "*"
    request_contains: str | None = None
    answer_contains: str | None = None     # the response stage: only entries whose state.answer contains this
    context_contains: str | None = None    # ... and whose state.context contains this
    answer: AnswerSpec | None = None
    latency_ms: Annotated[float, Meta(ge=0)] = 0.0
    fail: Failure | None = None
    times: Annotated[int, Meta(ge=0)] | None = None
    calls: tuple[CallNumber, CallNumber | None] | None = None

    def __post_init__(self) -> None:
        if self.calls is not None and self.calls[1] is not None and self.calls[1] < self.calls[0]:
            raise ValueError("`calls` is [first, last] with first <= last")

    def covers(self, entry: Entry, name: str) -> bool:
        """Whether the filter matches one item: question `name` about `entry`."""
        state = entry.state
        return (self.question == "*" or self.question == name) and (
            self.request_contains is None or self.request_contains in state.request
        ) and (
            self.answer_contains is None or (state.answer is not None and self.answer_contains in state.answer)
        ) and (
            self.context_contains is None or (state.context is not None and self.context_contains in state.context)
        )

    def scheduled(self, n: int) -> bool:
        """Whether the rule applies on its n-th matched call."""
        if self.times is not None and n > self.times:
            return False
        if self.calls is not None:
            first, last = self.calls
            return first <= n and (last is None or n <= last)
        return True


class RuleSet(Struct, frozen=True, forbid_unknown_fields=True):
    rules: list[Rule] = msgspec.field(default_factory=list)


def parse_rules(raw: bytes) -> RuleSet:
    """Decode a rules document; ``"fail": "overloaded"`` is short for ``{"kind": "overloaded"}``."""
    doc = msgspec.json.decode(raw)
    if isinstance(doc, list):
        doc = {"rules": doc}
    if isinstance(doc, dict) and isinstance(doc.get("rules"), list):
        for rule in doc["rules"]:
            if isinstance(rule, dict) and isinstance(rule.get("fail"), str):
                rule["fail"] = {"kind": rule["fail"]}
    return msgspec.convert(doc, RuleSet)


# --- answers: pure functions of the question, the state and a rule's answer ------------------------


def neutral(q: Question) -> Answer:
    """The answer given when no rule fixes one."""
    if isinstance(q, NoulQuestion):
        return NoulAnswer(0.5)
    if isinstance(q, ChoiceQuestion):
        p = 1 / len(q.criteria)
        return ChoiceAnswer(next(iter(q.criteria)), p, {o: p for o in q.criteria})
    if isinstance(q, ScoreQuestion):
        return score_answer(q, [1 / len(q.criteria)] * len(q.criteria))
    if isinstance(q, SetQuestion):
        return SetAnswer({label: 0.5 for label in q.criteria})
    return SpanAnswer([])


def score_answer(q: ScoreQuestion, probs: list[float]) -> ScoreAnswer:
    """Probabilities by level; score is their expected level, confidence the largest."""
    total = sum(probs)
    middle = (len(probs) - 1) / 2
    score = sum(i * p for i, p in enumerate(probs)) / total if total else middle
    return ScoreAnswer(
        score=score,
        confidence=max(probs),
        probabilities={str(i): p for i, p in enumerate(probs)},
        legend={str(i): c for i, c in enumerate(q.criteria)},
    )


def fixed(spec: AnswerSpec, q: Question, state: State) -> Answer:
    """A rule's answer to q, options it does not name at probability 0."""
    if spec.error is not None:
        return QuestionError(spec.error.code, spec.error.message)
    if spec.noul is not None:
        return NoulAnswer(spec.noul)
    if spec.choice is not None:
        probs = {o: spec.choice.get(o, 0.0) for o in q.criteria}
        best = max(probs, key=probs.__getitem__)
        return ChoiceAnswer(best, probs[best], probs)
    if spec.score is not None:
        n = len(q.criteria)
        given = spec.score if isinstance(spec.score, list) else [spec.score.get(str(i), 0.0) for i in range(n)]
        return score_answer(q, (list(given) + [0.0] * n)[:n])
    if spec.set is not None:
        return SetAnswer({label: spec.set.get(label, 0.0) for label in q.criteria})
    text = getattr(state, getattr(q, "part", "request"), None)
    return SpanAnswer([span(s, text) for s in spec.span or ()])


def span(s: SpanSpec | tuple[str, int, int], text: Any) -> Span:
    if isinstance(s, tuple):
        s = SpanSpec(*s)
    quoted = s.text
    if quoted is None and isinstance(text, str) and 0 <= s.start <= s.end <= len(text):
        quoted = text[s.start : s.end]
    return Span(s.label, s.start, s.end, s.probability, quoted)


QUESTION_TYPE = {
    NoulQuestion: "noul", ChoiceQuestion: "choice", ScoreQuestion: "score", SetQuestion: "set", SpanQuestion: "span",
}


def fits(spec: AnswerSpec, q: Question) -> bool:
    kind = spec.kind
    return kind in ("error", "omit") or kind == QUESTION_TYPE[type(q)]


def answers_item(rule: Rule, entry: Entry, name: str, q: Question) -> bool:
    """Whether rule fixes the answer to question `name` about entry."""
    return rule.answer is not None and fits(rule.answer, q) and rule.covers(entry, name)


def out_of_limits(entries: list[tuple[str | None, Entry]]) -> str | None:
    """Why a question's option count breaks the protocol's limits, if one does."""
    for name, entry in entries:
        for qname, q in entry.questions.items():
            kind = QUESTION_TYPE[type(q)]
            if kind in LIMITS:
                low, high = LIMITS[kind]
                if not low <= len(q.criteria) <= high:
                    where = f"$.states.{name}.questions.{qname}" if name is not None else f"$.questions.{qname}"
                    n = len(q.criteria)
                    return f"a {kind} question has {low} to {high} options, not {n} - at `{where}.criteria`"
    return None


def usage_of(entry: Entry) -> Usage:
    n = len(entry.questions)
    return Usage(input_tokens=max(1, len(msgspec.json.encode(entry.state)) // 4) + n, output_tokens=n)


# --- what to do with one call: sans-I/O ---------------------------------------------------------


class Outcome(Struct, frozen=True):
    """What a decision call gets: after latency_s, a response, a hang, or a reset."""

    latency_s: float = 0.0
    status: int = 200
    body: bytes = b""
    content_type: bytes = b"application/json"
    extra_headers: bytes = b""
    hang: bool = False
    reset: bool = False


def error_json(code: str, message: str, question: str | None = None, state: str | None = None) -> bytes:
    return msgspec.json.encode(ErrorResponse(ErrorBody(code=code, message=message, question=question, state=state)))


class ModelSpec(ModelInfo, frozen=True, forbid_unknown_fields=True):
    """The ModelInfo ``POST /_fake/model`` takes, strict about field names."""


class Fake:
    """The fake's state: rules with their counters, the model, the recorded calls."""

    def __init__(self, model: ModelInfo = DEFAULT_MODEL, rules: RuleSet | None = None) -> None:
        self.model = model
        self.install(rules or RuleSet())
        self.calls: list[dict[str, Any]] = []
        self.models_requests = 0

    def install(self, rules: RuleSet) -> None:
        self.rules = rules.rules
        self.matched = [0] * len(self.rules)

    def reset(self) -> None:
        self.install(RuleSet())
        self.calls = []
        self.models_requests = 0

    def record(self, req: Request) -> dict[str, Any]:
        """Remember a decision call at its arrival; its status is filled in when answered."""
        try:
            body: Any = msgspec.json.decode(req.body)
        except msgspec.DecodeError:
            body = req.body.decode("utf-8", "replace")
        call = {
            "index": len(self.calls),
            "method": req.method.decode("latin-1"),
            "path": req.path.decode("latin-1"),
            "headers": {k.decode("latin-1"): v.decode("latin-1") for k, v in req.headers.items()},
            "body": body,
            "time": time.time(),
            "latency_ms": 0.0,
            "status": None,
            "disconnected": False,
        }
        self.calls.append(call)
        return call

    def decide(self, raw: bytes) -> Outcome:
        """The outcome of one decision call; counts the rules' matches, so call it once per call."""
        try:
            req = decode_request(raw)
        except msgspec.DecodeError as exc:  # ValidationError included
            return Outcome(status=400, body=error_json("invalid_request", str(exc)))
        if isinstance(req, BatchRequest):
            entries: list[tuple[str | None, Entry]] = list(req.states.items())
        else:
            entries = [(None, Entry(req.state, req.questions))]
        problem = out_of_limits(entries)
        if problem is not None:
            return Outcome(status=400, body=error_json("invalid_request", problem))
        applying = self.applying(entries)
        latency_s = sum(rule.latency_ms for rule, _ in applying) / 1000
        for rule, first in applying:
            if rule.fail is not None:
                return self.failure(rule.fail, first, isinstance(req, BatchRequest), latency_s)
        model = req.model or self.model.name
        answered = {name: self.answers(entry, applying) for name, entry in entries}
        if isinstance(req, BatchRequest):
            states = {name: EntryResponse(answers=answered[name], usage=usage_of(entry)) for name, entry in entries}
            total = Usage(
                sum(s.usage.input_tokens for s in states.values()), sum(s.usage.output_tokens for s in states.values())
            )
            body = msgspec.json.encode(BatchResponse(model, states, total))
        else:
            body = msgspec.json.encode(StandardResponse(model, answered[None], usage_of(entries[0][1])))
        return Outcome(latency_s=latency_s, body=body)

    def applying(self, entries: list[tuple[str | None, Entry]]) -> list[tuple[Rule, tuple[str | None, str]]]:
        """The rules that apply to this call, each with the first item it matched (entry, question)."""
        out = []
        for i, rule in enumerate(self.rules):
            first = next(
                ((name, qname) for name, entry in entries for qname in entry.questions if rule.covers(entry, qname)),
                None,
            )
            if first is None:
                continue
            self.matched[i] += 1
            if rule.scheduled(self.matched[i]):
                out.append((rule, first))
        return out

    def answers(self, entry: Entry, applying: list[tuple[Rule, Any]]) -> dict[str, Answer]:
        out: dict[str, Answer] = {}
        for qname, q in entry.questions.items():
            spec = next((r.answer for r, _ in applying if answers_item(r, entry, qname, q)), None)
            if spec is not None and spec.omit:
                continue
            out[qname] = neutral(q) if spec is None else fixed(spec, q, entry.state)
        return out

    def failure(self, fail: Failure, first: tuple[str | None, str], batch: bool, latency_s: float) -> Outcome:
        entry_name, question = first
        state = entry_name if batch else None
        if isinstance(fail, Hang):
            return Outcome(latency_s=latency_s, hang=True)
        if isinstance(fail, Reset):
            return Outcome(latency_s=latency_s, reset=True)
        if isinstance(fail, Overloaded):
            extra = b"" if fail.retry_after_s is None else b"Retry-After: %d\r\n" % fail.retry_after_s
            return Outcome(latency_s, 429, error_json("overloaded", fail.message), extra_headers=extra)
        if isinstance(fail, (QuestionFailed, InvalidInput)):
            code = "question_failed" if isinstance(fail, QuestionFailed) else "invalid_input"
            return Outcome(latency_s, 422, error_json(code, fail.message, question, state))
        if fail.body is None:
            body = error_json("server_error", f"injected failure (status {fail.status})")
            return Outcome(latency_s, fail.status, body)
        if isinstance(fail.body, str):
            return Outcome(latency_s, fail.status, fail.body.encode(), content_type=TEXT)
        return Outcome(latency_s, fail.status, msgspec.json.encode(fail.body))

    def control(self, req: Request) -> tuple[int, bytes]:
        """The test-only routes under /_fake/."""
        route = (req.method, req.path)
        try:
            if route == (b"POST", b"/_fake/rules"):
                rules = parse_rules(req.body)
                self.install(rules)
                return 200, msgspec.json.encode({"ok": True, "rules": len(rules.rules)})
            if route == (b"POST", b"/_fake/model"):
                self.model = msgspec.json.decode(req.body, type=ModelSpec)
                return 200, msgspec.json.encode({"ok": True, "model": self.model})
        except msgspec.DecodeError as exc:
            return 400, error_json("invalid_request", str(exc))
        if route == (b"GET", b"/_fake/rules"):
            shown = [{**msgspec.to_builtins(r), "matched": n} for r, n in zip(self.rules, self.matched)]
            return 200, msgspec.json.encode({"rules": shown})
        if route == (b"POST", b"/_fake/reset"):
            self.reset()
            return 200, b'{"ok":true}'
        if route == (b"GET", b"/_fake/calls"):
            return 200, msgspec.json.encode({"calls": self.calls, "models_requests": self.models_requests})
        return 404, error_json("not_found", f"no route for {req.method.decode()} {req.path.decode()}")


# --- the trio adapter ---------------------------------------------------------------------------


class Server(_http.Server):
    """One trio task per connection (``bench._http.Server``), requests answered in order."""

    def __init__(self, fake: Fake) -> None:
        self.fake = fake

    def bad_request(self, message: str) -> bytes:
        """The body of the 400 a request that is not HTTP/1.1 gets."""
        return error_json("invalid_request", message)

    async def dispatch(self, sock: trio.socket.SocketType, reader: Reader, req: Request) -> bool:
        """Answer one request; returns whether the connection stays open."""
        if req.path in DECISION_PATHS:
            if req.method == b"POST":
                return await self.decision(sock, reader, req)
            status, body = 405, error_json("method_not_allowed", "use POST")
        elif req.path == b"/v1/models" and req.method == b"GET":
            self.fake.models_requests += 1
            status, body = 200, msgspec.json.encode(ModelList([self.fake.model]))
        else:
            status, body = self.fake.control(req)
        await send_all(sock, response_bytes(status, body, req.keep_alive))
        return req.keep_alive

    async def decision(self, sock: trio.socket.SocketType, reader: Reader, req: Request) -> bool:
        call = self.fake.record(req)
        outcome = self.fake.decide(req.body)
        call["latency_ms"] = outcome.latency_s * 1000
        if outcome.latency_s > 0 or outcome.hang:
            pause = trio.sleep_forever() if outcome.hang else trio.sleep(outcome.latency_s)
            if not await watched(reader, pause):  # the client left first
                call["disconnected"] = True
                return False
        if outcome.reset:
            abort(sock)
            return False
        data = response_bytes(outcome.status, outcome.body, req.keep_alive, outcome.content_type, outcome.extra_headers)
        call["status"] = outcome.status
        await send_all(sock, data)
        return req.keep_alive


async def run(host: str, port: int, fake: Fake) -> None:
    """Serve until SIGTERM or SIGINT."""
    await serve_until_signal(Server(fake), "fake_systemone", host, port)


def process(*flags: str) -> Proc:
    """The fake as a child process on a free port; use it as a context manager, or start() and stop()."""
    args = ["-m", "bench.fake_systemone", "--host", "127.0.0.1", "--port", "0", *flags]
    return Proc(args, "fake_systemone: listening")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench.fake_systemone",
        description="A deterministic fake System One API (POST /v1/systemone, /v1/decisions; GET /v1/models) "
        "whose answers and failures tests script through /_fake/rules.",
        epilog="Control routes: POST /_fake/rules, GET /_fake/rules, POST /_fake/reset, GET /_fake/calls, "
        "POST /_fake/model. The rules schema is in the module docstring.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    p.add_argument("--port", type=int, default=8003, help="port to bind; 0 picks a free one (default %(default)s)")
    p.add_argument("--model-name", default=DEFAULT_MODEL.name,
                   help="the model GET /v1/models lists (default %(default)s)")
    p.add_argument("--rules", type=Path, help="a JSON rules document to install at start")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.fake_systemone``."""
    args = build_parser().parse_args(argv)
    rules = None
    if args.rules is not None:
        try:
            rules = parse_rules(args.rules.read_bytes())
        except (OSError, msgspec.DecodeError) as exc:
            print(f"fake_systemone: {args.rules}: {exc}", file=sys.stderr)
            return 2
    model = msgspec.structs.replace(DEFAULT_MODEL, name=args.model_name)
    trio.run(run, args.host, args.port, Fake(model, rules))
    return 0


if __name__ == "__main__":
    sys.exit(main())
