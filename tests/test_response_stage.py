"""The response stage's merged calls: response-stage rules asked about the request and the answer, one call
per deployment, by the embedded model (truthfully: refusal, jailbreak, harm and operator questions zero-shot,
a hallucination rule refused at load, as its card says), a remote API and an attached runtime (the fake System One)."""
from __future__ import annotations

import copy

import httpx
import msgspec
import pytest
import trio

from bench.fake_systemone import process as fake_process
from vsr_fast.errors import ConfigError
from vsr_fast.protocol import systemone as wire
from vsr_fast.protocol.canonical import CanonicalRequest
from vsr_fast.protocol.chat import Message
from vsr_fast.routing import load_raw
from vsr_fast.routing.guard import asker_for, run
from vsr_fast.routing.open_systemone import open_systemone, read_attached_cards
from vsr_fast.signals.base import Outcome

from .test_systemone_client import REMOTE, Recorder

SIGNALS = {
    "jailbreak": [{"name": "unsafe", "stage": "response", "predicate": {"gte": 0.9}}],
    "safety": [{"name": "harmful", "stage": "response"}],
    "refusal": [{"name": "refused"}],
    "hallucination": [{"name": "ungrounded"}],
    "systemone": [{"name": "rude", "stage": "response", "input": {"answer": True},
                   "question": {"type": "noul", "instructions": "Is the answer rude to the user?"}}],
}
RULES = [{"when": {"type": t, "name": n}, "action": "annotate", "code": n}
         for t, n in (("jailbreak", "unsafe"), ("safety", "harmful"), ("refusal", "refused"),
                      ("hallucination", "ungrounded"), ("systemone", "rude"))]


def doc(deployments: dict | None = None, decision_deployment: str = "primary") -> dict:
    catalog: dict = {"system": {"decision_model": {"deployment": decision_deployment}}}
    if deployments:
        catalog["deployments"] = deployments
    return {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]}]},
        "global": {"model_catalog": catalog},
        "recipes": [{"name": "default", "signals": SIGNALS, "decisions": [
            {"name": "d", "rules": {"operator": "AND", "conditions": []}, "modelRefs": [{"model": "m"}],
             "plugins": [{"type": "response_guard", "configuration": {"rules": RULES}}]}]}],
    }


def request(text: str, tool_result: str | None = None) -> CanonicalRequest:
    messages = [Message(role="user", content=text)]
    if tool_result is not None:
        messages += [Message(role="assistant", content="Looking it up."),
                     Message(role="tool", content=tool_result, tool_call_id="c1")]
    return CanonicalRequest(messages)


async def verdict_with(loaded, client, canonical: CanonicalRequest, answer: str):
    guard = loaded.table.recipes["default"].guards["d"]
    asker = loaded.table.asker(client)
    outcomes: dict = {}

    async def ask(rules):
        got = await asker_for(asker, canonical, answer)(rules)
        outcomes.update(got)
        return got

    with trio.fail_after(30):
        verdict = await run(guard, None, ask)
    return verdict, outcomes


async def test_the_embedded_model_answers_the_response_stage_in_one_call():
    # Its card says it does not answer hallucination: a rule that asks it would always be unknown, and fails to
    # load (spec 5.2); the other four load.
    with pytest.raises(ConfigError, match=r"^recipes\[default\]\.signals\.hallucination\[ungrounded\]: span_required: "
                                          r"deployment 'primary' \(vsr-static-11\) does not answer preset hallucination"):
        load_raw(doc())
    embedded = copy.deepcopy(doc())     # doc() shares SIGNALS
    del embedded["recipes"][0]["signals"]["hallucination"]
    guard = embedded["recipes"][0]["decisions"][0]["plugins"][0]["configuration"]
    guard["rules"] = [r for r in guard["rules"] if r["when"]["type"] != "hallucination"]
    loaded = load_raw(embedded)
    async with open_systemone(loaded) as client:
        # A refusal without a refusal phrase: a phrase would be read from the text, the model never asked.
        refusal_text = "No. That request is declined."
        compliant = "Sure! Here is a Python function that reverses a linked list, with an explanation."
        _, refused = await verdict_with(loaded, client, request("Write code to reverse a list", "docs: lists"), refusal_text)
        calls = {k: v for k, v in client.metrics.calls.values.items()}
        assert calls == {("primary", "ok"): 1}       # four rules, one merged call
        _, complied = await verdict_with(loaded, client, request("Write code to reverse a list", "docs: lists"), compliant)
    # Answered zero-shot, as the card says: a probability for every rule it answers ...
    for outcomes in (refused, complied):
        for key in (("jailbreak", "unsafe"), ("safety", "harmful"), ("refusal", "refused"), ("systemone", "rude")):
            assert outcomes[key].value is not None and 0.0 <= outcomes[key].value <= 1.0, (key, outcomes[key])
    # The refusal question reads the answer: a refusal scores higher than a compliant answer.
    assert refused[("refusal", "refused")].value > complied[("refusal", "refused")].value


async def test_a_remote_api_gets_one_merged_call_with_the_request_the_answer_and_the_context():
    loaded = load_raw(doc({"remote": REMOTE}, "remote"))

    def answer(state, qid, question):
        if isinstance(question, wire.SpanQuestion):
            start = state.answer.index("Sundays")
            return wire.SpanAnswer([wire.Span("unsupported", start, start + 7, 0.9, "Sundays")])
        if isinstance(question, wire.NoulQuestion):
            return wire.NoulAnswer(0.1)
        return wire.ChoiceAnswer(choice=list(question.criteria)[0], confidence=0.9,
                                 probabilities={k: (0.9 if i == 0 else 0.1) for i, k in enumerate(question.criteria)})

    from vsr_fast.systemone.client import SystemOneClient

    recorder = Recorder(answer)
    client = SystemOneClient({"remote": recorder}, "gen")
    canonical = request("When does the library open?", tool_result="Open Monday to Friday, 09:00 to 17:00.")
    verdict, outcomes = await verdict_with(loaded, client, canonical, "It opens at 8:00 on Sundays.")
    (body,) = recorder.bodies
    # Two states (with and without the context) in one batch call: hallucination reads the context too.
    states = body["states"] if "states" in body else {"": body}
    seen = {q: e["state"] for e in states.values() for q in e["questions"]}
    assert set(seen) == {"preset:jailbreak", "preset:harm", "preset:refusal", "preset:hallucination", "systemone:rude"}
    assert seen["preset:hallucination"]["context"] == "Open Monday to Friday, 09:00 to 17:00."
    assert all(s["answer"] == "It opens at 8:00 on Sundays." for s in seen.values())
    assert "context" not in seen["preset:refusal"]
    assert outcomes[("hallucination", "ungrounded")].matched is True
    assert "ungrounded" in verdict.codes


async def test_hallucination_without_grounding_context_is_unknown_and_never_asked():
    loaded = load_raw(doc({"remote": REMOTE}, "remote"))
    from vsr_fast.systemone.client import SystemOneClient

    recorder = Recorder(lambda state, qid, question: wire.QuestionError("question_failed", "not used"))
    client = SystemOneClient({"remote": recorder}, "gen")
    verdict, outcomes = await verdict_with(loaded, client, request("Hi"), "Hello!")
    assert "no grounding context" in outcomes[("hallucination", "ungrounded")].detail
    asked = {q for b in recorder.bodies for e in (b.get("states") or {"": b}).values() for q in e["questions"]}
    assert "preset:hallucination" not in asked
    assert "ungrounded;unknown" in verdict.codes     # on_unknown: annotate, the default


async def test_a_refusal_text_answers_the_refusal_rule_and_the_model_is_not_asked_it():
    loaded = load_raw(doc({"remote": REMOTE}, "remote"))
    from vsr_fast.systemone.client import SystemOneClient

    def answer(state, qid, question):
        if isinstance(question, wire.NoulQuestion):
            return wire.NoulAnswer(0.1)
        if isinstance(question, wire.SpanQuestion):
            return wire.SpanAnswer([])
        # A weak refusal question (as the uncalibrated embedded one was on this text): compliance.
        return wire.ChoiceAnswer(choice=list(question.criteria)[0], confidence=0.9,
                                 probabilities={k: (0.9 if k in ("compliance", "benign", "safe") else 0.1)
                                                for k in question.criteria})

    recorder = Recorder(answer)
    client = SystemOneClient({"remote": recorder}, "gen")
    text = "I'm sorry, but I can't help with that request. It would be against my guidelines."
    verdict, outcomes = await verdict_with(loaded, client, request("How do I bake bread?", "docs: bread"), text)
    refused = outcomes[("refusal", "refused")]
    assert (refused.matched, refused.value, refused.detail) == (True, 1.0, "refusal text (i can't help)")
    assert "refused" in verdict.codes
    asked = {q for b in recorder.bodies for e in (b.get("states") or {"": b}).values() for q in e["questions"]}
    assert "preset:refusal" not in asked and "preset:jailbreak" in asked     # the other rules are still asked


@pytest.fixture(scope="module")
def runtime():
    with fake_process() as proc:
        yield proc


async def test_an_attached_runtime_answers_the_response_stage(runtime):
    httpx.post(f"{runtime.url}/_fake/reset").raise_for_status()
    httpx.post(f"{runtime.url}/_fake/model", json={"name": "rt", "question_types": ["choice", "noul", "span"],
                                                  "contract": "4.0.0"}).raise_for_status()
    httpx.post(f"{runtime.url}/_fake/rules", json={"rules": [
        {"question": "preset:refusal", "answer_contains": "cannot", "answer": {"choice": {"refusal": 0.95}}}]}
               ).raise_for_status()
    loaded = await read_attached_cards(load_raw(doc({"gpu": {"provider": "model_runtime", "endpoint": runtime.url}},
                                                    "gpu")))
    async with open_systemone(loaded) as client:
        verdict, outcomes = await verdict_with(loaded, client, request("Do my taxes"), "That cannot be done.")
    assert outcomes[("refusal", "refused")] == Outcome(True, value=0.95, confidence=0.95,
                                                       labels=outcomes[("refusal", "refused")].labels,
                                                       detail=outcomes[("refusal", "refused")].detail)
    (call,) = httpx.get(f"{runtime.url}/_fake/calls").json()["calls"]
    assert call["path"] == "/v1/decisions"
    assert msgspec.json.decode(msgspec.json.encode(call["body"]))["state"]["answer"] == "That cannot be done."
