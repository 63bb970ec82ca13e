"""The fake System One API (bench/fake_systemone.py) as a real process, driven with httpx."""
from __future__ import annotations

import json
import signal
import time

import httpx
import pytest

from bench.fake_systemone import process
from vsr_fast.protocol.systemone import (
    BATCH_RESPONSE,
    ERROR_RESPONSE,
    STANDARD_RESPONSE,
    ChoiceAnswer,
    NoulAnswer,
    QuestionError,
    ScoreAnswer,
    SetAnswer,
    Span,
    SpanAnswer,
)

CHOICE = {"type": "choice", "criteria": {"billing": "money", "tech": "computers", "other": "else"}}
SCORE = {"type": "score", "criteria": ["easy", "medium", "hard"]}
SET = {"type": "set", "criteria": {"violence": "v", "hate": "h"}}
SPAN = {"type": "span", "criteria": {"email": "an email address", "name": "a name"}}
NOUL = {"type": "noul", "instructions": "Does this need tools?"}
QUESTIONS = {
    "preset:domain": CHOICE,
    "systemone:difficulty": SCORE,
    "preset:harm_categories": SET,
    "preset:pii": SPAN,
    "systemone:needs_tools": NOUL,
}
EMAIL_TEXT = "Mail bob@example.com about my invoice"


def standard(request: str = EMAIL_TEXT, questions: dict | None = None) -> dict:
    return {"state": {"request": request}, "questions": questions or QUESTIONS}


def batch(*requests: str, questions: dict | None = None) -> dict:
    return {"states": {str(i): standard(r, questions) for i, r in enumerate(requests, 1)}}


@pytest.fixture(scope="module")
def server():
    proc = process().start()
    try:
        yield proc
        proc.signal(signal.SIGTERM)
        assert proc.wait(10) == 0, "SIGTERM must end the fake cleanly"
    finally:
        proc.stop()


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server.url, trust_env=False, timeout=5) as c:
        assert c.post("/_fake/reset").status_code == 200
        yield c


def rules(client: httpx.Client, *items: dict) -> None:
    response = client.post("/_fake/rules", json={"rules": list(items)})
    assert response.status_code == 200, response.text


def ask(client: httpx.Client, body: dict, path: str = "/v1/systemone") -> httpx.Response:
    return client.post(path, json=body)


def error_of(response: httpx.Response):
    return ERROR_RESPONSE.decode(response.content).error


# --- both forms, neutral answers ------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/systemone", "/v1/decisions"])
def test_standard_form_neutral_answers(client, path):
    response = ask(client, {**standard(), "model": "jev-latest"}, path)
    assert response.status_code == 200
    got = STANDARD_RESPONSE.decode(response.content)
    assert got.model == "jev-latest"
    a = got.answers
    assert a["systemone:needs_tools"] == NoulAnswer(0.5)
    third = 1 / 3
    assert a["preset:domain"] == ChoiceAnswer("billing", third, dict.fromkeys(CHOICE["criteria"], third))
    score = a["systemone:difficulty"]
    assert isinstance(score, ScoreAnswer) and score.score == pytest.approx(1.0)
    assert score.probabilities == {"0": third, "1": third, "2": third}
    assert score.legend == {"0": "easy", "1": "medium", "2": "hard"}
    assert a["preset:harm_categories"] == SetAnswer({"violence": 0.5, "hate": 0.5})
    assert a["preset:pii"] == SpanAnswer([])
    assert got.usage.output_tokens == 5 and got.usage.input_tokens > 5


def test_batch_form_answers_each_entry_with_usage(client):
    body = batch("first request", "a second, longer request text", questions={"systemone:needs_tools": NOUL})
    response = ask(client, body)
    assert response.status_code == 200
    got = BATCH_RESPONSE.decode(response.content)
    assert got.model == "fake-systemone"
    assert set(got.states) == {"1", "2"}
    for entry in got.states.values():
        assert entry.error is None and entry.answers == {"systemone:needs_tools": NoulAnswer(0.5)}
    assert got.states["2"].usage.input_tokens > got.states["1"].usage.input_tokens
    assert got.usage.input_tokens == sum(e.usage.input_tokens for e in got.states.values())
    assert got.usage.output_tokens == 2


# --- fixed answers ------------------------------------------------------------------------------------


def test_fixed_answers_for_each_type(client):
    rules(
        client,
        {"question": "systemone:needs_tools", "answer": {"noul": 0.93}},
        {"question": "preset:domain", "answer": {"choice": {"tech": 0.7, "billing": 0.2, "other": 0.1}}},
        {"question": "systemone:difficulty", "answer": {"score": [0.1, 0.2, 0.7]}},
        {"question": "preset:harm_categories", "answer": {"set": {"hate": 0.9}}},
        {"question": "preset:pii", "answer": {"span": [["email", 5, 20],
                                                       {"label": "name", "start": 5, "end": 8, "probability": 0.6}]}},
    )
    a = STANDARD_RESPONSE.decode(ask(client, standard()).content).answers
    assert a["systemone:needs_tools"] == NoulAnswer(0.93)
    assert a["preset:domain"] == ChoiceAnswer("tech", 0.7, {"billing": 0.2, "tech": 0.7, "other": 0.1})
    score = a["systemone:difficulty"]
    assert score.score == pytest.approx(0.2 + 2 * 0.7) and score.confidence == 0.7
    assert score.probabilities == {"0": 0.1, "1": 0.2, "2": 0.7}
    assert a["preset:harm_categories"] == SetAnswer({"violence": 0.0, "hate": 0.9})
    assert a["preset:pii"] == SpanAnswer([
        Span("email", 5, 20, 1.0, "bob@example.com"), Span("name", 5, 8, 0.6, "bob"),
    ])


def test_score_by_level_dict_and_in_place_error(client):
    rules(
        client,
        {"question": "systemone:difficulty", "answer": {"score": {"2": 0.75, "0": 0.25}}},
        {"question": "preset:pii", "answer": {"error": {"code": "input_too_long", "message": "too long"}}},
    )
    a = STANDARD_RESPONSE.decode(ask(client, standard()).content).answers
    assert a["systemone:difficulty"].score == pytest.approx(1.5)
    assert a["systemone:difficulty"].probabilities == {"0": 0.25, "1": 0.0, "2": 0.75}
    assert a["preset:pii"] == QuestionError("input_too_long", "too long")


def test_wildcard_answers_only_questions_of_its_type_and_first_rule_wins(client):
    rules(
        client,
        {"question": "*", "answer": {"noul": 0.1}},
        {"question": "systemone:needs_tools", "answer": {"noul": 0.9}},
    )
    a = STANDARD_RESPONSE.decode(ask(client, standard()).content).answers
    assert a["systemone:needs_tools"] == NoulAnswer(0.1)
    assert a["preset:domain"].choice == "billing"  # still neutral: a noul answer does not fit a choice


def test_substring_scoped_rules(client):
    rules(client, {"question": "preset:domain", "request_contains": "invoice",
                   "answer": {"choice": {"billing": 0.95, "tech": 0.05}}})
    got = BATCH_RESPONSE.decode(ask(client, batch("fix my laptop", "where is my invoice?")).content)
    assert got.states["1"].answers["preset:domain"].confidence == pytest.approx(1 / 3)
    assert got.states["2"].answers["preset:domain"] == ChoiceAnswer(
        "billing", 0.95, {"billing": 0.95, "tech": 0.05, "other": 0.0})


def test_response_stage_rules_answer_on_the_answer_and_its_context(client):
    q = {"preset:refusal": {"type": "choice", "criteria": {"compliance": "does it", "refusal": "declines"}},
         "preset:hallucination": {"type": "span", "criteria": {"unsupported": "not in the context"}, "part": "answer"}}
    rules(client, {"question": "preset:refusal", "answer_contains": "cannot",
                   "answer": {"choice": {"refusal": 0.9, "compliance": 0.1}}},
          {"question": "preset:hallucination", "context_contains": "Monday",
           "answer": {"span": [["unsupported", 12, 19]]}})

    def entry(answer: str, context: str | None = None) -> dict:
        state = {"request": "When does it open?", "answer": answer, **({"context": context} if context else {})}
        return {"state": state, "questions": q}

    got = BATCH_RESPONSE.decode(ask(client, {"states": {
        "1": entry("It opens on Sundays.", "Open Monday to Friday."), "2": entry("I cannot say.")}}).content)
    first, second = got.states["1"].answers, got.states["2"].answers
    assert first["preset:refusal"].choice == "compliance" and first["preset:refusal"].confidence == 0.5
    assert [(s.label, s.text) for s in first["preset:hallucination"].spans] == [("unsupported", "Sundays")]
    assert second["preset:refusal"] == ChoiceAnswer("refusal", 0.9, {"compliance": 0.1, "refusal": 0.9})
    assert second["preset:hallucination"].spans == []


# --- failures ------------------------------------------------------------------------------------


def test_overloaded(client):
    rules(client, {"fail": {"kind": "overloaded", "retry_after_s": 2}})
    response = ask(client, batch("a", "b"))
    assert response.status_code == 429 and response.headers["retry-after"] == "2"
    err = error_of(response)
    assert err.code == "overloaded" and err.question is None and err.state is None


def test_status_failures(client):
    rules(client, {"fail": {"kind": "status", "status": 503}})
    response = ask(client, standard())
    assert response.status_code == 503 and error_of(response).code == "server_error"
    rules(client, {"fail": {"kind": "status", "status": 502, "body": {"detail": "bad gateway"}}})
    response = ask(client, standard())
    assert response.status_code == 502 and response.json() == {"detail": "bad gateway"}
    rules(client, {"fail": {"kind": "status", "status": 500, "body": "oops"}})
    response = ask(client, standard())
    assert response.status_code == 500 and response.text == "oops"
    assert response.headers["content-type"].startswith("text/plain")


def test_question_failed_names_the_question_and_in_a_batch_the_entry(client):
    rules(client, {"question": "preset:pii", "request_contains": "secret", "fail": "question_failed"})
    assert ask(client, standard("nothing here")).status_code == 200
    response = ask(client, standard("a secret"))
    assert response.status_code == 422
    err = error_of(response)
    assert (err.code, err.question, err.state) == ("question_failed", "preset:pii", None)
    response = ask(client, batch("plain", "my secret", "another secret"))
    err = error_of(response)
    assert (response.status_code, err.code, err.question, err.state) == (422, "question_failed", "preset:pii", "2")


def test_invalid_input_names_question_and_entry(client):
    rules(client, {"question": "systemone:needs_tools", "request_contains": "huge",
                   "fail": {"kind": "invalid_input", "message": "image over its limit"}})
    response = ask(client, batch("small", "huge image"))
    err = error_of(response)
    assert response.status_code == 422
    assert (err.code, err.question, err.state, err.message) == (
        "invalid_input", "systemone:needs_tools", "2", "image over its limit")


def test_first_failing_rule_wins(client):
    rules(client, {"question": "nope", "fail": "overloaded"},
          {"fail": {"kind": "status", "status": 504}}, {"fail": "overloaded"})
    assert ask(client, standard()).status_code == 504


def test_hang_until_the_client_leaves(client, server):
    rules(client, {"request_contains": "stall", "fail": "hang"})
    with httpx.Client(base_url=server.url, trust_env=False, timeout=0.3) as impatient:
        with pytest.raises(httpx.ReadTimeout):
            impatient.post("/v1/systemone", json=standard("stall please"))
    assert ask(client, standard("fine")).status_code == 200  # the fake still serves
    calls = after_the_first_call_left(client)
    assert [(c["status"], c["disconnected"]) for c in calls] == [(None, True), (200, False)]


def after_the_first_call_left(client) -> list[dict]:
    """The recorded calls, once the fake has noticed the first call's client leave."""
    deadline = time.monotonic() + 10
    while not (calls := client.get("/_fake/calls").json()["calls"])[0]["disconnected"]:
        assert time.monotonic() < deadline, "the fake never noticed the client leaving"
        time.sleep(0.02)
    return calls


def test_reset_drops_the_connection(client):
    rules(client, {"fail": "reset"})
    with pytest.raises(httpx.TransportError):
        ask(client, standard())


def test_latency_adds_up_and_precedes_failures(client, server):
    rules(client, {"latency_ms": 120}, {"question": "preset:pii", "latency_ms": 80})
    assert ask(client, standard()).status_code == 200
    assert client.get("/_fake/calls").json()["calls"][-1]["latency_ms"] == 200
    # A latency far past the client's patience: nothing is answered before it, not even a failure.
    for rule in ({"request_contains": "slow", "latency_ms": 600_000},
                 {"request_contains": "slow", "latency_ms": 600_000, "fail": "overloaded"}):
        client.post("/_fake/reset")
        rules(client, rule)
        with httpx.Client(base_url=server.url, trust_env=False, timeout=0.3) as impatient:
            with pytest.raises(httpx.ReadTimeout):
                impatient.post("/v1/systemone", json=standard("slow please"))
        calls = after_the_first_call_left(client)
        assert [(c["status"], c["latency_ms"]) for c in calls] == [(None, 600_000)]


# --- schedules -------------------------------------------------------------------------------------


def test_times_overloaded_twice_then_answer(client):
    rules(client, {"fail": "overloaded", "times": 2},
          {"question": "preset:domain", "answer": {"choice": {"tech": 1.0}}})
    statuses = [ask(client, standard()).status_code for _ in range(4)]
    assert statuses == [429, 429, 200, 200]
    assert STANDARD_RESPONSE.decode(ask(client, standard()).content).answers["preset:domain"].choice == "tech"
    assert [r["matched"] for r in client.get("/_fake/rules").json()["rules"]] == [5, 5]


def test_calls_window_and_open_end(client):
    rules(client, {"fail": {"kind": "status", "status": 503}, "calls": [2, 3]})
    assert [ask(client, standard()).status_code for _ in range(5)] == [200, 503, 503, 200, 200]
    rules(client, {"fail": "overloaded", "calls": [3, None]})
    assert [ask(client, standard()).status_code for _ in range(4)] == [200, 200, 429, 429]


def test_schedules_count_only_calls_the_filter_matches(client):
    rules(client, {"request_contains": "retry me", "fail": "overloaded", "times": 1})
    assert ask(client, standard("other")).status_code == 200
    assert ask(client, standard("retry me")).status_code == 429
    assert ask(client, standard("retry me")).status_code == 200


# --- recording, models, control ----------------------------------------------------------------------


def test_recorded_calls_in_order_and_reset(client):
    before = time.time()
    ask(client, standard("one"))
    client.post("/v1/decisions", content=b"not json", headers={"X-Trace-Id": "t-1"})
    client.get("/v1/models")
    got = client.get("/_fake/calls").json()
    calls = got["calls"]
    assert [c["path"] for c in calls] == ["/v1/systemone", "/v1/decisions"]
    assert [c["index"] for c in calls] == [0, 1]
    assert calls[0]["body"] == standard("one") and calls[0]["status"] == 200
    assert calls[1]["body"] == "not json" and calls[1]["status"] == 400
    assert calls[1]["headers"]["x-trace-id"] == "t-1" and "content-length" in calls[1]["headers"]
    assert before <= calls[0]["time"] <= calls[1]["time"] <= time.time()
    assert got["models_requests"] == 1
    client.post("/_fake/reset")
    assert client.get("/_fake/calls").json() == {"calls": [], "models_requests": 0}


@pytest.mark.parametrize("body", [
    b'{"state": {"request": "x"}, "questions": {}, "states": {"1": {"state": {"request": "x"}, "questions": {}}}}',
    b'{"states": {}}',
    b'{"state": {"request": "x"}, "questions": {}, "surprise": 1}',
    b'{"state": {"request": "x"}, "questions": {',
    b'[1, 2]',
    b'{"state": {"request": "x"}, "questions": {"q": {"type": "choice", "criteria": {"only": "one"}}}}',
    b'{"state": {"request": "x"}, "questions": {"q": {"type": "riddle"}}}',
], ids=["mixed", "empty-states", "unknown-field", "malformed", "not-object", "one-option", "unknown-type"])
def test_invalid_bodies_are_400_invalid_request(client, body):
    rules(client, {"fail": "overloaded"})  # never reached: the body is refused first
    response = client.post("/v1/systemone", content=body)
    assert response.status_code == 400
    assert error_of(response).code == "invalid_request"


def test_models_listing_is_configurable(client):
    models = client.get("/v1/models").json()["models"]
    assert models[0]["name"] == "fake-systemone" and "span" in models[0]["question_types"]
    info = {"name": "d3-ultra", "question_types": ["choice", "noul"], "modalities": ["text", "image"],
            "presets": ["domain", "jailbreak"]}
    assert client.post("/_fake/model", json=info).status_code == 200
    assert client.get("/v1/models").json() == {"models": [info]}
    assert STANDARD_RESPONSE.decode(ask(client, standard()).content).model == "d3-ultra"
    assert client.post("/_fake/model", json={"name": "x", "presetz": []}).status_code == 400


def test_bad_rules_are_refused_and_change_nothing(client):
    rules(client, {"fail": "overloaded"})
    for bad in ({"rules": [{"answer": {"noul": 0.5, "set": {}}}]}, {"rules": [{"fail": "explode"}]},
                {"rules": [{"questoin": "x"}]}, {"rules": [{"calls": [3, 1]}]},
                {"rules": [{"answer": {"noul": 1.5}}]}):
        response = client.post("/_fake/rules", json=bad)
        assert response.status_code == 400 and error_of(response).code == "invalid_request", bad
    assert client.get("/_fake/rules").json()["rules"] == [{"fail": {"kind": "overloaded"}, "matched": 0}]
    assert client.get("/_fake/nothing").status_code == 404


def test_cli_rules_file_model_name_and_sigint(tmp_path):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps([{"question": "systemone:needs_tools", "answer": {"noul": 0.8}}]))
    proc = process("--rules", str(path), "--model-name", "jev-latest").start()
    try:
        with httpx.Client(base_url=proc.url, trust_env=False, timeout=5) as c:
            assert c.get("/v1/models").json()["models"][0]["name"] == "jev-latest"
            got = STANDARD_RESPONSE.decode(c.post("/v1/systemone", json=standard()).content)
            assert got.answers["systemone:needs_tools"] == NoulAnswer(0.8) and got.model == "jev-latest"
        proc.signal(signal.SIGINT)
        assert proc.wait(10) == 0
    finally:
        proc.stop()
