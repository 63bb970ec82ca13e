"""End to end: ``escalate.stages`` and ``quality`` on an ``api: systemone`` entrypoint (spec 5.6).

The first native stage is the fake System One API (its answers scripted through /_fake/rules), the second
the scripted in-process model (noul 0.9 when the request says "yes"), the judge a mock Chat upstream
whose canned reply is the number of the answer it chooses.
"""
from __future__ import annotations

import hashlib

import httpx
import pytest

from vsr_fast.errors import ConfigError
from vsr_fast.routing import load_raw

from .procs import mock_upstream, router, write_config

NATIVE = [{"type": "native", "model": "hosted"}, {"type": "native", "model": "local-scripted"}]


def escalate(stages, min_confidence, **extra) -> dict:
    return {"type": "escalate", **extra, "escalate": {
        "stages": stages, "quality": {"mode": "uncalibrated", "accept": {"min_confidence": min_confidence}}}}


def decision(name: str, word: str, algorithm: dict, refs=("hosted", "local-scripted")) -> dict:
    rules = {"operator": "AND", "conditions": [{"type": "keyword", "name": word}]}
    return {"name": name, "priority": 10, "rules": rules, "modelRefs": [{"model": m} for m in refs],
            "algorithm": algorithm}


def config(fake_url: str, judge_url: str, decisions: list[dict], chat_recipe: dict | None = None) -> dict:
    words = ["passes", "strict", "budgeted", "judged", "late"]
    return {
        "version": "v0.5",
        "providers": {"models": [
            {"name": "chat-model", "backend_refs": [{"endpoint": f"{judge_url}/v1"}]},
            {"name": "judge-llm", "backend_refs": [{"endpoint": f"{judge_url}/v1"}]},
            {"name": "local-scripted", "api_format": "systemone", "deployment": "local"},
            {"name": "hosted", "api_format": "systemone", "provider_model_id": "fake-hosted",
             "backend_refs": [{"endpoint": f"{fake_url}/v1/systemone"}]},
        ]},
        "global": {"model_catalog": {"deployments": {
            "local": {"provider": "model_runtime", "artifact": "tests.scripted_model:make"}}}},
        "recipes": [
            chat_recipe or {"name": "chat", "decisions": [{"name": "all", "modelRefs": [{"model": "chat-model"}]}]},
            {"name": "native", "signals": {"keywords": [{"name": w, "keywords": [w]} for w in words]},
             "decisions": [*decisions, {"name": "plain", "priority": 1, "modelRefs": [{"model": "local-scripted"}]}]},
        ],
        "entrypoints": [{"api": "chat", "model_names": ["auto"], "recipe": "chat", "default": True},
                        {"api": "systemone", "model_names": ["router-s1"], "recipe": "native"}],
    }


DECISIONS = [
    decision("passes", "passes", escalate(NATIVE, 0.8)),
    decision("strict", "strict", escalate(NATIVE, 0.95)),
    decision("budgeted", "budgeted", escalate(NATIVE, 0.8, budget={"max_calls": 1})),
    decision("late", "late", escalate(NATIVE, 0.8, budget={"deadline_ms": 200})),
    decision("judged", "judged", escalate([*NATIVE, {"type": "judge", "model": "judge-llm"}], 0.95),
             refs=("hosted", "local-scripted", "judge-llm")),
]


@pytest.fixture(scope="module")
def judge():
    with mock_upstream("--content", "Answer 1 is the best.") as proc:
        yield proc


@pytest.fixture(scope="module")
def api(fake, judge, tmp_path_factory):
    with router(write_config(config(fake.url, judge.url, DECISIONS), str(tmp_path_factory.mktemp("esc")))) as proc:
        yield proc


def ask(api, fake, request: str, hosted_noul: float) -> httpx.Response:
    httpx.post(f"{fake.url}/_fake/reset")
    httpx.post(f"{fake.url}/_fake/rules", json={"rules": [{"question": "ok", "answer": {"noul": hosted_noul}}]})
    body = {"model": "router-s1", "state": {"request": request}, "questions": {"ok": {"type": "noul"}}}
    return httpx.post(f"{api.url}/v1/systemone", json=body, timeout=20)


def hosted_calls(fake) -> list[dict]:
    return httpx.get(f"{fake.url}/_fake/calls").json()["calls"]


def test_the_second_native_stage_answers_when_the_first_fails_the_quality_rule(api, fake):
    r = ask(api, fake, "passes, yes", 0.7)      # hosted: confidence 0.7 < 0.8; scripted: 0.9
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-selected-decision"] == "passes"
    assert r.headers["x-vsr-selected-model"] == "local-scripted"
    assert r.json()["answers"]["ok"] == {"type": "noul", "noul": 0.9}
    calls = hosted_calls(fake)
    assert len(calls) == 1 and calls[0]["body"]["model"] == "fake-hosted"
    assert calls[0]["body"]["questions"] == {"ok": {"type": "noul"}}    # the original typed request


def test_the_first_stage_answers_when_it_passes(api, fake):
    r = ask(api, fake, "passes, yes", 0.05)     # hosted: confidence 0.95
    assert r.status_code == 200 and r.headers["x-vsr-selected-model"] == "hosted"
    assert r.json()["answers"]["ok"]["noul"] == 0.05


def test_no_accepted_answer_fails_the_escalation(api, fake):
    r = ask(api, fake, "strict, yes", 0.7)
    assert r.status_code == 502, r.text
    err = r.json()["error"]
    assert err["code"] == "looper_no_accepted_answer"
    assert "hosted: ok: confidence 0.700 < 0.95" in err["message"]
    assert "local-scripted: ok: confidence 0.900 < 0.95" in err["message"]


def test_max_calls_ends_the_escalation(api, fake):
    r = ask(api, fake, "budgeted, yes", 0.7)
    # The calls ran out, not the time: not a timeout.
    assert r.status_code == 502 and r.json()["error"]["code"] == "looper_budget_exhausted"
    assert "max_calls (1)" in r.json()["error"]["message"] and len(hosted_calls(fake)) == 1


def test_the_deadline_ends_the_escalation(api, fake):
    httpx.post(f"{fake.url}/_fake/reset")
    httpx.post(f"{fake.url}/_fake/rules", json={"rules": [{"fail": "hang"}]})
    body = {"model": "router-s1", "state": {"request": "late, yes"}, "questions": {"ok": {"type": "noul"}}}
    r = httpx.post(f"{api.url}/v1/systemone", json=body, timeout=20)
    httpx.post(f"{fake.url}/_fake/reset")
    assert r.status_code == 504 and r.json()["error"]["code"] == "looper_budget_exhausted", r.text
    assert "deadline (200 ms from arrival) passed during native stage hosted" in r.json()["error"]["message"]


def test_a_judge_chooses_among_the_answers_before_it(api, fake, judge):
    before = httpx.get(f"{judge.url}/_mock/stats").json()["requests"]
    r = ask(api, fake, "judged, yes", 0.7)      # neither passes 0.95; the judge names answer 1 (hosted's)
    assert r.status_code == 200, r.text
    assert r.headers["x-vsr-selected-model"] == "hosted"
    assert r.json()["answers"]["ok"]["noul"] == 0.7
    stats = httpx.get(f"{judge.url}/_mock/stats").json()
    assert stats["requests"] == before + 1
    prompt = stats["last_request"]["body"]["messages"][0]["content"]
    assert '"noul":0.7' in prompt and '"noul":0.9' in prompt and "judged, yes" in prompt


def load_errors(decisions: list[dict], chat_recipe: dict | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_raw(config("http://127.0.0.1:9", "http://127.0.0.1:9", decisions, chat_recipe))
    return info.value.lines


@pytest.mark.parametrize("algorithm, refs, fragment", [
    (escalate([{"type": "native", "model": "nope"}, NATIVE[1]], 0.8), ("hosted", "local-scripted"),
     "decisions[0].algorithm.escalate.stages[0].model: unknown_model"),
    (escalate([{"type": "native", "model": "judge-llm"}, NATIVE[1]], 0.8), ("judge-llm", "local-scripted"),
     "escalate.stages[0].model: invalid_value: a native stage asks a native alias"),
    (escalate([*NATIVE, {"type": "judge", "model": "hosted"}], 0.8), ("hosted", "local-scripted"),
     "escalate.stages[2].model: invalid_value: a judge stage asks a Chat model"),
    ({"type": "escalate", "escalate": {"stages": NATIVE, "quality": {"mode": "calibrated", "max_risk": 0.1}}},
     ("hosted", "local-scripted"), "escalate.quality.mode: invalid_value: calibrated quality"),
    ({"type": "escalate", "escalate": {"accept": {"refusal": False}}}, ("hosted", "local-scripted"),
     "escalate.stages: missing_field: on a System One entrypoint"),
])
def test_bad_stages_fail_the_load_with_their_path(algorithm, refs, fragment):
    lines = load_errors([decision("d", "passes", algorithm, refs)])
    assert any(fragment in line for line in lines), lines


def test_stages_on_a_chat_recipe_fail_the_load():
    refs = [{"model": "chat-model"}, {"model": "judge-llm"}]
    chat = {"name": "chat", "decisions": [{"name": "all", "modelRefs": refs,
                                           "algorithm": escalate([{"type": "native", "model": "chat-model"}], 0.8)}]}
    lines = load_errors([], chat)
    assert any("recipes[chat].decisions[0].algorithm.escalate.stages: invalid_value: stages run on a System One"
               in line for line in lines), lines


def test_a_stage_outside_the_keys_models_is_skipped_never_called(fake, judge, tmp_path):
    """A key limited to the scripted model: the hosted stage, which would pass, is never asked."""
    key, wide = "vsk-scripted-" + "s" * 32, "vsk-wide-" + "w" * 32
    doc = config(fake.url, judge.url, DECISIONS)
    doc["global"]["router"] = {"auth": {"enabled": True, "keys": [
        {"id": "scripted", "sha256": hashlib.sha256(key.encode()).hexdigest(), "models": ["local-scripted"]},
        {"id": "wide", "sha256": hashlib.sha256(wide.encode()).hexdigest()}]}}
    with router(write_config(doc, str(tmp_path))) as proc:
        def asked(k: str) -> httpx.Response:
            httpx.post(f"{fake.url}/_fake/reset")
            httpx.post(f"{fake.url}/_fake/rules", json={"rules": [{"question": "ok", "answer": {"noul": 0.05}}]})
            body = {"model": "router-s1", "state": {"request": "passes, yes"}, "questions": {"ok": {"type": "noul"}}}
            return httpx.post(f"{proc.url}/v1/systemone", json=body, headers={"authorization": f"Bearer {k}"},
                              timeout=20)

        r = asked(wide)
        assert r.status_code == 200 and r.headers["x-vsr-selected-model"] == "hosted", r.text
        r = asked(key)
        assert r.status_code == 200 and r.headers["x-vsr-selected-model"] == "local-scripted", r.text
        assert hosted_calls(fake) == [], "the hosted stage was skipped"
