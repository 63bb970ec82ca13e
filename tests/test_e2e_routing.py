"""End to end: a 12-decision heuristic recipe routes real requests; the preview agrees with every live route."""
from __future__ import annotations

import copy
import hashlib

import httpx
import openai
import pytest
import yaml

from .procs import ROOT, router, write_config

EXAMPLE = ROOT / "config" / "examples" / "heuristics.yaml"
LONG = "Please summarise the following report. " + "The quarterly numbers were steady across regions. " * 200
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]
IMAGE = [{"type": "text", "text": "What is in this picture?"},
         {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]


def user(text):
    return [{"role": "user", "content": text}]


# (case id, messages, extra body fields, expected decision or None for the fallback, expected model)
CASES = [
    ("image", [{"role": "user", "content": IMAGE}], {}, "vision", "vision-model"),
    ("long", user(LONG), {}, "long_context", "long-model"),
    ("tools", user("What's the weather in Paris?"), {"tools": TOOLS}, "tools", "tool-model"),
    ("urgent_code", user("URGENT: my python function crashes, please debug ASAP"), {}, "urgent_code", "premium-model"),
    ("arithmetic", user("What is 12 * 34 and then 5+6"), {}, "math", "math-model"),
    ("integral", user("Compute the integral of x squared"), {}, "math", "math-model"),
    ("chinese", user("请帮我写一首关于秋天的诗，描写落叶和夕阳的景色。"), {}, "chinese", "zh-model"),
    ("cjk_keyword", user("我的数据库很慢"), {}, "chinese", "zh-model"),
    ("french", user("Bonjour, pouvez-vous me recommander un bon restaurant à Lyon pour ce soir ?"), {}, "french", "fr-model"),
    ("code", user("Can you refactor this code for readability?"), {}, "code", "code-model"),
    ("bm25", user("how do I speed up a sql query that joins two tables"), {}, "code", "code-model"),
    ("fuzzy", user("my kubernets cluster keeps restarting pods"), {}, "code", "code-model"),
    ("questions", user("Why is the sky blue? Why is grass green? Why is the sea salty?"), {}, "many_questions", "chat-model"),
    ("dialogue", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                  {"role": "user", "content": "tell me a story"}, {"role": "assistant", "content": "once upon"},
                  {"role": "user", "content": "and then what happened"}], {}, "long_dialogue", "chat-model"),
    ("gold", user("Write a haiku about the sea"), {"metadata": {"tier": "gold"}}, "gold_calm", "premium-model"),
    ("gold_urgent", user("urgent: write a haiku about the sea"), {"metadata": {"tier": "gold"}}, "urgent", "premium-model"),
    ("fallback", user("Write a haiku about the sea"), {}, None, "default-model"),
    ("emoji", user("🙂🙂🙂"), {}, None, "default-model"),
]


@pytest.fixture(scope="module")
def heuristic_router(mock, tmp_path_factory):
    doc = yaml.safe_load(EXAMPLE.read_text())
    for m in doc["providers"]["models"]:
        m["backend_refs"] = [{"endpoint": f"{mock.url}/v1"}]
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg")))) as proc:
        yield proc


@pytest.mark.parametrize("case, messages, extra, decision, model", CASES, ids=[c[0] for c in CASES])
def test_live_route_and_preview_agree(heuristic_router, case, messages, extra, decision, model):
    client = openai.OpenAI(base_url=f"{heuristic_router.url}/v1", api_key="x", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(model="vsr/auto", messages=messages, **extra)
    assert raw.parse().choices[0].message.content
    assert raw.headers.get("x-vsr-selected-decision") == decision
    assert raw.headers["x-vsr-selected-model"] == model
    # The recipe's fallback is a model's answer too (no decision header says it); ``fallback`` is a failover.
    assert raw.headers["x-vsr-response-path"] == "upstream"

    body = {"model": "vsr/auto", "messages": messages, **extra}
    preview = httpx.post(f"{heuristic_router.url}/api/v1/routing/preview", json=body).json()
    assert preview["decision"] == decision
    assert preview["model"] == model
    assert preview["recipe"] == "default"
    assert preview["fallback"] is (decision is None)
    matched = [d["name"] for d in preview["decisions"] if d["matched"]]
    if decision:
        assert decision in matched and preview["why"].startswith("highest priority")
    else:
        assert matched == [] and preview["why"] == "no decision matched"
    assert preview["timings_us"]["routing"] > 0


def test_preview_lists_signals_with_values_and_timings(heuristic_router):
    body = {"model": "vsr/auto", "messages": user("Why? Why? Why? urgent")}
    preview = httpx.post(f"{heuristic_router.url}/api/v1/routing/preview", json=body).json()
    by_name = {(s["type"], s["name"]): s for s in preview["signals"]}
    assert by_name[("keyword", "many_questions")]["matched"] is True
    assert by_name[("keyword", "many_questions")]["value"] == 3.0
    assert by_name[("keyword", "urgent")]["matched"] is True
    assert by_name[("context", "long")]["matched"] is False
    assert by_name[("language", "zh")]["matched"] in (False, None)
    assert set(preview["timings_us"]["signals"]) >= {"keyword", "language", "context", "conversation"}


def test_preview_reports_bad_bodies_like_the_hot_path(heuristic_router):
    r = httpx.post(f"{heuristic_router.url}/api/v1/routing/preview", content=b'{"model": "x", "messages": 5}',
                   headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "messages"


def test_provider_model_named_directly_in_preview(heuristic_router):
    preview = httpx.post(f"{heuristic_router.url}/api/v1/routing/preview",
                         json={"model": "code-model", "messages": user("hi")}).json()
    assert preview["recipe"] is None and preview["decision"] is None and preview["model"] == "code-model"
    assert preview["signals"] == []


def test_no_fallback_means_routing_error(mock, tmp_path):
    doc = yaml.safe_load(EXAMPLE.read_text())
    for m in doc["providers"]["models"]:
        m["backend_refs"] = [{"endpoint": f"{mock.url}/v1"}]
    del doc["recipes"][0]["fallback"]
    with router(write_config(copy.deepcopy(doc), str(tmp_path))) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": user("a haiku")})
        assert r.status_code == 400
        assert r.json()["error"]["code"] == "no_decision_matched"
        assert r.headers["x-vsr-selected-recipe"] == "default"
        p = httpx.post(f"{proc.url}/api/v1/routing/preview", json={"model": "vsr/auto", "messages": user("a haiku")})
        assert p.status_code == 400 and p.json()["error"]["code"] == "no_decision_matched"


def role_doc(mock_url: str, identity: dict) -> dict:
    """Members of the group platform-admins go to admin-model, everyone else to user-model."""
    return {
        "version": "v0.5",
        "listeners": [{"name": "main", "identity": identity}],
        "providers": {"models": [{"name": "admin-model", "backend_refs": [{"endpoint": f"{mock_url}/v1"}]},
                                 {"name": "user-model", "backend_refs": [{"endpoint": f"{mock_url}/v1"}]}]},
        "recipes": [{"name": "default",
                     "signals": {"role_bindings": [{"name": "admins", "role": "admin",
                                                    "subjects": [{"kind": "Group", "name": "platform-admins"}]}]},
                     "decisions": [{"name": "admin", "priority": 10,
                                    "rules": {"operator": "AND", "conditions": [{"type": "authz", "name": "admins"}]},
                                    "modelRefs": [{"model": "admin-model"}]}],
                     "fallback": {"modelRefs": [{"model": "user-model"}]}}],
    }


def test_trusted_identity_routes_by_role(mock, tmp_path):
    doc = role_doc(mock.url, {"trust_headers": True})
    trusted = write_config(doc, str(tmp_path))
    # An untrusted listener needs another identity source to load with role bindings: client keys here.
    untrusted_doc = copy.deepcopy(doc)
    untrusted_doc["listeners"][0]["identity"]["trust_headers"] = False
    untrusted_doc["global"] = {"router": {"auth": {"enabled": True, "keys": [
        {"id": "bob", "sha256": hashlib.sha256(b"vsk-bob").hexdigest()}]}}}
    untrusted = write_config(untrusted_doc, str(tmp_path))
    headers = {"x-authz-user-id": "alice", "x-authz-user-groups": "staff, platform-admins"}
    body = {"model": "auto", "messages": user("hello")}
    with router(trusted) as proc:
        assert httpx.post(f"{proc.url}/v1/chat/completions", json=body, headers=headers).headers["x-vsr-selected-model"] == "admin-model"
        assert httpx.post(f"{proc.url}/v1/chat/completions", json=body).headers["x-vsr-selected-model"] == "user-model"
    with router(untrusted) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json=body,
                       headers={**headers, "authorization": "Bearer vsk-bob"})
        assert r.headers["x-vsr-selected-model"] == "user-model", "client identity headers must be ignored"


def test_trace_only_for_allowed_callers_that_ask(mock, heuristic_router, tmp_path):
    body = {"model": "vsr/auto", "messages": user("URGENT: debug my python code ASAP")}
    r = httpx.post(f"{heuristic_router.url}/v1/chat/completions", json=body, headers={"x-vsr-debug": "1"})
    assert "x-vsr-trace" not in r.headers, "debug: none (the default) never sends the trace"
    doc = yaml.safe_load(EXAMPLE.read_text())
    for m in doc["providers"]["models"]:
        m["backend_refs"] = [{"endpoint": f"{mock.url}/v1"}]
    doc["global"] = {"router": {"headers": {"debug": "any"}}}
    with router(write_config(doc, str(tmp_path))) as proc:
        plain = httpx.post(f"{proc.url}/v1/chat/completions", json=body)
        assert "x-vsr-trace" not in plain.headers
        traced = httpx.post(f"{proc.url}/v1/chat/completions", json=body, headers={"x-vsr-debug": "1"})
        trace = traced.headers["x-vsr-trace"]
        assert 'signals=("keyword:code" "keyword:urgent")' in trace
        assert 'decision="urgent_code"' in trace and 'why="highest priority 230 of' in trace
        assert len(trace) <= 4096


def test_custom_identity_header_names_and_debug_principals(mock, tmp_path):
    doc = role_doc(mock.url, {"trust_headers": True, "user_header": "X-Auth-User", "groups_header": "x-auth-groups"})
    doc["global"] = {"router": {"headers": {"debug": "authenticated", "debug_principals": ["alice"]}}}
    body = {"model": "auto", "messages": user("hello")}

    def send(**headers: str) -> httpx.Response:
        return httpx.post(f"{proc.url}/v1/chat/completions", json=body, headers={"x-vsr-debug": "1", **headers})

    with router(write_config(doc, str(tmp_path))) as proc:
        alice = send(**{"x-auth-user": "alice", "x-auth-groups": "staff, platform-admins"})
        assert alice.headers["x-vsr-selected-model"] == "admin-model", "the configured header names are read"
        assert 'decision="admin"' in alice.headers["x-vsr-trace"], "alice is a debug principal"
        bob = send(**{"x-auth-user": "bob", "x-auth-groups": "platform-admins"})
        assert bob.headers["x-vsr-selected-model"] == "admin-model"
        assert "x-vsr-trace" not in bob.headers, "authenticated, but not a debug principal"
        default_names = send(**{"x-authz-user-id": "alice", "x-authz-user-groups": "platform-admins"})
        assert default_names.headers["x-vsr-selected-model"] == "user-model", "the default names are not read"
        assert "x-vsr-trace" not in default_names.headers, "so the caller is anonymous"
        assert "x-vsr-trace" not in send().headers
