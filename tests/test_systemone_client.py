"""System One from the router's side: load checks, the wire form of merged calls, answers to outcomes."""
from __future__ import annotations


import httpx
import msgspec
import pytest

from vsr_fast.routing import load_raw
from vsr_fast.errors import ConfigError
from vsr_fast.protocol import systemone as wire
from vsr_fast.signals.base import CanonicalRequest
from vsr_fast.protocol.chat import Message
from vsr_fast.config.catalog import Deployment
from vsr_fast.systemone.client import SystemOneClient
from vsr_fast.systemone.deployments import Remote

REMOTE = {"provider": "systemone", "endpoint": "http://127.0.0.1:9/v1/systemone", "model": "fake",
          "capabilities": {"question_types": ["choice", "noul", "score", "set", "span"]}}


def doc(signals: dict, conditions: list[dict], *, deployments=None, decisions=None, **recipe) -> dict:
    return {
        "version": "v0.5",
        "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9"}]}]},
        "global": {"model_catalog": {"deployments": deployments or {"remote": REMOTE},
                                     "system": {"decision_model": {"deployment": "remote"}}}},
        "recipes": [{"name": "default", "signals": signals,
                     "decisions": decisions or [{"name": "d", "rules": {"operator": "AND", "conditions": conditions},
                                                 "modelRefs": [{"model": "m"}]}],
                     "fallback": {"modelRefs": [{"model": "m"}]}, **recipe}],
    }


def errors_of(d: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_raw(d)
    return info.value.lines


class Recorder:
    """An in-process runner that records each call's exact wire body and answers from a function."""

    kind, local = "remote", False

    def __init__(self, answer):
        self.bodies: list[dict] = []
        self.answer = answer
        self.runner = self

    async def call(self, body):
        self.bodies.append(msgspec.json.decode(wire.ENCODER.encode(body)))
        entries = [(n, e) for n, e in (body.states.items() if isinstance(body, wire.BatchRequest) else [("", body)])]
        answered = {n: {q: self.answer(e.state, qid=q, question=question) for q, question in e.questions.items()}
                    for n, e in entries}
        if isinstance(body, wire.StandardRequest):
            return wire.StandardResponse(model="rec", answers=answered[""])
        return wire.BatchResponse(model="rec", states={n: wire.EntryResponse(answers=a) for n, a in answered.items()})

    async def aclose(self):
        return None


def neutral(state, *, qid, question):
    if isinstance(question, wire.NoulQuestion):
        return wire.NoulAnswer(0.8)
    if isinstance(question, wire.ChoiceQuestion):
        opts = list(question.criteria)
        probs = {o: (0.6 if o in ("math", "hard", "jailbreak") else 0.4 / (len(opts) - 1)) for o in opts}
        best = max(probs, key=probs.get)
        return wire.ChoiceAnswer(best, probs[best], probs)
    if isinstance(question, wire.SpanQuestion):
        return wire.SpanAnswer([])
    return wire.SetAnswer({o: 0.1 for o in question.criteria})


def user(*turns: str) -> CanonicalRequest:
    msgs = []
    for i, t in enumerate(turns):
        msgs.append(Message(role="user", content=t))
        if i < len(turns) - 1:
            msgs.append(Message(role="assistant", content=f"answer {i}"))
    return CanonicalRequest(msgs)


SPEC_EXAMPLE = {
    "domains": [{"name": "math", "labels": ["math"]}],
    "jailbreak": [{"name": "attack"}],
    "complexity": [{"name": "difficulty"}],
    "systemone": [{"name": "needs_tools", "question": {"type": "noul", "instructions": "Does answering this request need a tool call?"},
                   "predicate": {"gte": 0.7}}],
}
SPEC_CONDITIONS = [{"type": "domain", "name": "math"}, {"type": "complexity", "name": "difficulty", "label": "hard"},
                   {"type": "jailbreak", "name": "attack"}, {"type": "systemone", "name": "needs_tools"}]


# ``neutral`` as rules of the fake System One (an option a rule leaves out gets 0, not 0.4 / (n - 1)).
NEUTRAL_RULES = [{"answer": {"noul": 0.8}}, {"answer": {"choice": {"math": 0.6, "hard": 0.6, "jailbreak": 0.6}}},
                 {"answer": {"set": {}}}]


class OverHttp:
    """The fake System One API over HTTP as the decision model, answering by ``rules``."""

    def __init__(self, fake, rules: list[dict]) -> None:
        httpx.post(f"{fake.url}/_fake/reset").raise_for_status()
        httpx.post(f"{fake.url}/_fake/rules", json={"rules": rules}).raise_for_status()
        self.fake = fake
        self.runner = Remote("remote", Deployment(provider="systemone", endpoint=f"{fake.url}/v1/systemone",
                                                  model="fake"))

    @property
    def bodies(self) -> list[dict]:
        """The bodies the fake received, without the ``model`` the deployment adds to each."""
        calls = httpx.get(f"{self.fake.url}/_fake/calls").json()["calls"]
        assert all(c["body"].pop("model") == "fake" for c in calls)
        return [c["body"] for c in calls]


@pytest.fixture(params=["in_process", "over_http"])
def decision_model(request):
    """Makes the decision model a test routes with: a Recorder in process, or the fake over HTTP.

    Called with the in-process answer function and the fake's rules that answer the same.
    """
    def make(answer=neutral, rules=NEUTRAL_RULES):
        return Recorder(answer) if request.param == "in_process" else OverHttp(request.getfixturevalue("fake"), rules)
    return make


async def route_with(d: dict, request: CanonicalRequest, model, deployment: str = "remote"):
    loaded = load_raw(d)
    client = SystemOneClient({deployment: model.runner}, loaded.version_hash)
    try:
        route = await loaded.table.route("any", lambda: request, loaded.table.asker(client))
    finally:
        await client.aclose()
    return route, model, loaded


async def test_request_stage_is_one_standard_call_with_every_read_question(decision_model):
    route, rec, _ = await route_with(doc(SPEC_EXAMPLE, SPEC_CONDITIONS), user("Prove that the square root of 2 is irrational."),
                                     decision_model())
    assert len(rec.bodies) == 1
    body = rec.bodies[0]
    assert set(body) == {"state", "questions"}
    assert body["state"] == {"request": "Prove that the square root of 2 is irrational."}
    assert list(body["questions"]) == ["preset:domain", "preset:complexity", "preset:jailbreak", "systemone:needs_tools"]
    assert body["questions"]["systemone:needs_tools"] == {"type": "noul", "instructions": "Does answering this request need a tool call?"}
    assert body["questions"]["preset:domain"]["type"] == "choice" and len(body["questions"]["preset:domain"]["criteria"]) == 14
    assert route.decision == "d"
    out = route.readings.outcomes
    assert out[("domain", "math")].matched is True
    assert out[("complexity", "difficulty")].labels["hard"] is True
    assert out[("systemone", "needs_tools")].matched is True and out[("systemone", "needs_tools")].value == 0.8


async def test_rules_reading_different_states_make_a_batch_with_ordered_entries(decision_model):
    signals = {"domains": [{"name": "math", "labels": ["math"]}],
               "jailbreak": [{"name": "attack_in_history", "input": {"history": True}}],
               "turn_relation": [{"name": "relation", "input": {"previous_turns": 2}}]}
    conditions = [{"type": "domain", "name": "math"}, {"type": "jailbreak", "name": "attack_in_history"},
                  {"type": "turn_relation", "name": "relation", "label": "reask"}]
    route, rec, _ = await route_with(doc(signals, conditions), user("first question", "second", "now the math one"),
                                     decision_model())
    (body,) = rec.bodies
    assert set(body) == {"states"}
    assert list(body["states"]) == ["1", "2", "3"]
    one, two, three = (body["states"][k] for k in ("1", "2", "3"))
    assert one == {"state": {"request": "now the math one"}, "questions": {"preset:domain": one["questions"]["preset:domain"]}}
    assert two["state"] == {"request": "now the math one", "history": ["first question", "second"]}
    assert list(two["questions"]) == ["preset:jailbreak"]
    assert three["state"] == {"request": "now the math one", "previous_turns": [
        {"role": "user", "content": "second"}, {"role": "assistant", "content": "answer 1"}]}
    assert list(three["questions"]) == ["preset:turn_relation"]


async def test_rules_of_one_preset_share_one_question_with_their_own_labels_and_predicates(decision_model):
    signals = {"domains": [{"name": "math", "labels": ["math"]},
                           {"name": "stem", "labels": ["math", "physics"], "predicate": {"gte": 0.9}},
                           {"name": "physics"}]}
    conditions = [{"operator": "OR", "conditions": [{"type": "domain", "name": n} for n in ("math", "stem", "physics")]}]
    route, rec, _ = await route_with(doc(signals, [{"operator": "OR", "conditions": conditions}]), user("a math question"),
                                     decision_model())
    (body,) = rec.bodies
    assert list(body["questions"]) == ["preset:domain"]
    out = route.readings.outcomes
    assert out[("domain", "math")].matched is True        # 0.6 >= 0.5 (uncalibrated)
    assert out[("domain", "stem")].matched is False       # 0.6 < 0.9
    assert out[("domain", "physics")].matched is False    # its own label, physics, is low


async def test_set_questions_share_the_union_of_their_labels(decision_model):
    signals = {"safety": [{"name": "weapons", "labels": ["Guns and Illegal Weapons"]},
                          {"name": "selfharm", "labels": ["Suicide and Self Harm", "S11"]}]}
    conditions = [{"type": "safety", "name": "weapons"}, {"type": "safety", "name": "selfharm"}]
    _, rec, _ = await route_with(doc(signals, conditions), user("hello"), decision_model())
    (body,) = rec.bodies
    assert list(body["questions"]) == ["preset:harm_categories"]
    assert list(body["questions"]["preset:harm_categories"]["criteria"]) == [
        "Suicide and Self Harm", "Guns and Illegal Weapons", "S11"]


async def test_unread_rules_are_not_asked_and_repeated_state_is_reused(decision_model):
    signals = {"domains": [{"name": "math"}], "complexity": [{"name": "difficulty"}]}
    d = doc(signals, [{"type": "domain", "name": "math"}])
    loaded = load_raw(d)
    rec = decision_model()
    client = SystemOneClient({"remote": rec.runner}, loaded.version_hash)
    asker = loaded.table.asker(client)
    for _ in range(3):
        await loaded.table.route("any", lambda: user("the same math question"), asker)
    await client.aclose()
    assert len(rec.bodies) == 1
    assert list(rec.bodies[0]["questions"]) == ["preset:domain"]


def remote_with(types: list[str], **extra) -> dict:
    return {"remote": {**REMOTE, "capabilities": {"question_types": types, **extra}}}


LOAD_CASES = [
    (doc({"pii": [{"name": "personal_data"}]}, [{"type": "pii", "name": "personal_data"}],
         deployments=remote_with(["choice", "noul", "score"])),
     ['recipes[default].signals.pii[personal_data]: span_required: resolves to deployment "remote", which cannot answer '
      "span questions; bind pii to a span-capable deployment (rule deployment, recipes[default].model_bindings.pii or "
      "global.model_catalog.bindings.pii)"]),
    (doc({"systemone": [{"name": "urgency", "question": {"type": "score", "criteria": ["low", "high"]}, "predicate": {"gte": 0.5}}]},
         [{"type": "systemone", "name": "urgency"}], deployments=remote_with(["choice", "noul"])),
     ['recipes[default].signals.systemone[urgency]: question_type_unsupported: asks a score question; deployment "remote" '
      "(fake) answers choice, noul"]),
    (doc({"systemone": [{"name": "spans", "question": {"type": "span", "criteria": {"x": "X"}, "head": "broad"}}]},
         [{"type": "systemone", "name": "spans"}]),
     ["recipes[default].signals.systemone[spans]: span_head_unsupported: names span head 'broad'; the model of deployment "
      '"remote" has no named heads']),
    (doc({"systemone": [{"name": "pic", "question": {"type": "noul"}, "input": {"image": True}}]},
         [{"type": "systemone", "name": "pic"}]),
     ['recipes[default].signals.systemone[pic]: input_modality_unsupported: reads image; deployment "remote" reads text']),
    (doc({"jailbreak": [{"name": "a", "labels": ["jailbreak"]}]}, [{"type": "jailbreak", "name": "a"}]),
     ["recipes[default].signals.jailbreak[a].labels: unknown_field: not a field of this block"]),
    (doc({"refusal": [{"name": "r"}]}, [{"type": "refusal", "name": "r"}]),
     ["recipes[default].decisions[0].rules.conditions[0]: invalid_value: decisions route before an answer exists; "
      "refusal rule 'r' reads the response stage"]),
    (doc({"complexity": [{"name": "c"}]}, [{"type": "complexity", "name": "c", "label": "extreme"}]),
     ["recipes[default].decisions[0].rules.conditions[0].label: invalid_value: 'extreme' is not an option of complexity "
      "rule 'c' (easy, medium, hard)"]),
    (doc({"domains": [{"name": "math", "deployment": "nowhere"}]}, [{"type": "domain", "name": "math"}]),
     ["recipes[default].signals.domains[math]: unknown_deployment: resolves to deployment 'nowhere', which "
      "global.model_catalog.deployments does not declare"]),
    (doc({"systemone": [{"name": "one", "question": {"type": "choice", "criteria": {"only": "One option"}}}]},
         [{"type": "systemone", "name": "one"}]),
     ["recipes[default].signals.systemone[one].question.criteria: invalid_value: a choice question takes 2 to 255 options, not 1"]),
    (doc({"systemone": [{"name": "n", "question": {"type": "noul"}}]},
         [{"type": "systemone", "name": "n", "on_error": "match"}], decisions=[{
             "name": "d", "modelRefs": [{"model": "m"}], "rules": {"operator": "AND", "on_unknown": "match",
                                                                   "conditions": [{"type": "systemone", "name": "n", "on_error": "match"}]}}]),
     ["recipes[default].decisions[0].rules.conditions[0].on_error: invalid_value: a condition's on_error cannot be set "
      "together with its decision's rules.on_unknown"]),
]

@pytest.mark.parametrize("d, lines", LOAD_CASES, ids=[c[1][0].split(": ")[1] for c in LOAD_CASES])
def test_load_checks(d, lines):
    assert errors_of(d) == lines


def test_unknown_domain_label_is_refused():
    lines = errors_of(doc({"domains": [{"name": "astrology"}]}, [{"type": "domain", "name": "astrology"}]))
    assert lines == ["recipes[default].signals.domains[astrology].labels[0]: invalid_value: 'astrology' is not an option "
                     "of preset domain (biology, business, chemistry, computer science, economics, engineering, health, "
                     "history, law, math, other, philosophy, physics, psychology)"]


def test_uncalibrated_preset_warns_naming_the_rule_and_calibrated_ones_do_not():
    d = doc({"complexity": [{"name": "difficulty"}], "domains": [{"name": "math", "deployment": "local"}]},
            [{"type": "complexity", "name": "difficulty", "label": "hard"}, {"type": "domain", "name": "math"}],
            deployments={"remote": REMOTE, "local": {"provider": "model_runtime", "artifact": "tests.scripted_model:make"}})
    loaded = load_raw(d)
    assert loaded.warnings == [
        "recipes[default].signals.complexity[difficulty]: uncalibrated_preset: preset complexity on deployment 'remote' "
        "(fake) has no calibrated threshold; the rule uses 0.5"]


def test_decision_alias_loads_as_systemone_with_warnings():
    d = doc({}, [])
    d["recipes"][0]["signals"] = {"decision": [{"name": "needs_tools", "question": {"type": "noul"}}]}
    d["recipes"][0]["decisions"][0]["rules"] = {"operator": "AND", "conditions": [{"type": "decision", "name": "needs_tools"}]}
    loaded = load_raw(d)
    assert loaded.warnings == [
        "recipes[default].signals.decision: renamed_signal_type: decision loads as systemone; write systemone",
        "recipes[default].decisions[0].rules.conditions[0].type: renamed_signal_type: decision loads as systemone; write systemone",
    ]
    assert loaded.config.recipes[0].signals.systemone[0].name == "needs_tools"


def test_a_deployment_nothing_resolves_to_never_starts():
    d = doc({"keywords": [{"name": "k", "keywords": ["x"]}]}, [{"type": "keyword", "name": "k"}],
            deployments={"remote": REMOTE, "broken": {"provider": "model_runtime", "artifact": "no.such.module:make"}})
    loaded = load_raw(d)
    assert loaded.table.used_deployments() == {}
    assert "broken" not in loaded.table.decision_models


async def test_embedded_model_answers_in_a_worker_thread():
    d = doc({"pii": [{"name": "emails"}]}, [{"type": "pii", "name": "emails"}],
            deployments={"local": {"provider": "model_runtime", "artifact": "tests.scripted_model:make"}})
    d["global"]["model_catalog"]["system"] = {"decision_model": {"deployment": "local"}}
    loaded = load_raw(d)
    from vsr_fast.systemone.deployments import runner
    runners = {"local": runner("local", loaded.table.deployments["local"], loaded.table.decision_models)}
    asker = loaded.table.asker(SystemOneClient(runners, loaded.version_hash))
    route = await loaded.table.route("x", lambda: user("write to bob@example.com please"), asker)
    outcome = route.readings.outcomes[("pii", "emails")]
    assert outcome.matched is True
    assert [(s.label, s.start, s.end) for s in outcome.spans] == [("EMAIL_ADDRESS", 9, 24)]
    assert loaded.warnings == ["recipes[default].signals.pii[emails]: uncalibrated_preset: preset pii on deployment "
                               "'local' (scripted-1) has no calibrated threshold; the rule uses 0.5"]


async def test_a_family_trained_id_replaces_the_router_owned_one(decision_model):
    d = doc({"jailbreak": [{"name": "attack"}], "complexity": [{"name": "c"}]},
            [{"type": "jailbreak", "name": "attack"}, {"type": "complexity", "name": "c", "label": "hard"}],
            deployments={"local": {"provider": "model_runtime", "artifact": "tests.scripted_model:make"}})
    d["global"]["model_catalog"]["system"] = {"decision_model": {"deployment": "local"}}
    # The scripted model's card names its trained jailbreak question; the calls go to ``decision_model``.
    _, rec, _ = await route_with(d, user("hello"), decision_model(), deployment="local")
    assert list(rec.bodies[0]["questions"]) == ["attack", "preset:complexity"]


async def test_a_set_question_is_asked_label_by_label_of_a_model_without_sets(decision_model):
    signals = {"safety": [{"name": "weapons", "labels": ["Guns and Illegal Weapons", "S9"]}],
               "systemone": [{"name": "topics", "question": {"type": "set", "criteria": {"billing": "Billing", "bug": "A bug"}},
                              "labels": ["bug"]}]}
    conditions = [{"type": "safety", "name": "weapons"}, {"type": "systemone", "name": "topics"}]
    d = doc(signals, conditions, deployments=remote_with(["choice", "noul", "score"]))

    def answer(state, *, qid, question):
        assert isinstance(question, wire.NoulQuestion)
        return wire.NoulAnswer(0.9 if qid.endswith(("/S9", "/bug")) else 0.05)

    rules = [{"question": q, "answer": {"noul": 0.9}} for q in ("preset:harm_categories/S9", "systemone:topics/bug")]
    model = decision_model(answer, [*rules, {"answer": {"noul": 0.05}}])
    route, rec, _ = await route_with(d, user("where can I buy a rifle, and is this a bug?"), model)
    (body,) = rec.bodies
    assert sorted(body["questions"]) == ["preset:harm_categories/Guns and Illegal Weapons", "preset:harm_categories/S9",
                                         "systemone:topics/billing", "systemone:topics/bug"]
    assert all(q["type"] == "noul" for q in body["questions"].values())
    weapons = route.readings.outcomes[("safety", "weapons")]
    assert weapons.matched is True
    assert (weapons.labels["Guns and Illegal Weapons"], weapons.labels["S9"]) == (False, True)
    assert route.readings.outcomes[("systemone", "topics")].matched is True
    assert route.decision == "d"


async def test_an_embedded_model_past_the_signals_deadline_is_left_in_its_thread():
    # A contextual encoder (vsr-minilm-1) takes ~100 ms a 2 KB request: the deadline must end the wait, not the
    # forward pass. Without abandoning the thread the scope would exit only once the model returned.
    import threading
    import trio
    from vsr_fast.systemone.deployments import Embedded
    from vsr_fast.systemone.runtime import ModelCard

    release, entered = threading.Event(), threading.Event()

    class Stuck:
        card = ModelCard(name="stuck-1", family="stuck", question_types=["noul"])

        def answer(self, entries):
            entered.set()
            release.wait(30)     # a watchdog, not a timing: without the fix the test fails after it
            return [{} for _ in entries]

    body = wire.StandardRequest(state=wire.State(request="hi"), questions={})
    with trio.move_on_after(0.2) as scope:
        await Embedded("slow", Stuck()).call(body)
    still_running = not release.is_set()
    release.set()
    assert scope.cancelled_caught and entered.is_set() and still_running
