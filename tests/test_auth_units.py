"""Who is calling, piece by piece: the identity load checks (spec 8), the usage meter, the local windows."""
from __future__ import annotations

import copy

import pytest
import trio

from vsr_fast.auth.limits import Limiter
from vsr_fast.auth.usage import UsageMeter, estimated
from vsr_fast.config.auth import AuthStore, Limits, RateLimits
from vsr_fast.errors import ConfigError, RateLimited
from vsr_fast.protocol.canonical import Identity
from vsr_fast.routing import load_raw

from .test_config_load import base

SHA = "a" * 64
ROLE = {"role_bindings": [{"name": "admins", "role": "admin", "subjects": [{"kind": "Group", "name": "g"}]}]}
SOURCE = "set global.router.auth.enabled with client keys, or identity.trust_headers: true on a serving listener " \
         "behind an authenticator"


def lines_of(doc: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_raw(doc)
    return info.value.lines


def with_(path: list, value) -> dict:
    doc = copy.deepcopy(base())
    node = doc
    for part in path[:-1]:
        node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
    node[path[-1]] = value
    return doc


def delegating(deployment: dict, *, authz: bool = True, plugins: list | None = None) -> dict:
    """The base configuration with deployment ``s1`` as its decision model (a keyword rule's recipe asks it)."""
    doc = copy.deepcopy(base())
    doc["global"] = {"model_catalog": {"deployments": {"s1": deployment}, "system": {"decision_model": {"deployment": "s1"}}},
                     "services": {"authz": {"delegated_credential": {"enabled": authz}}}}
    if plugins:
        doc["global"]["plugins"] = plugins
    return doc


def shadowing_a_delegated_model() -> dict:
    doc = with_(["providers", "models", 0, "backend_refs", 0, "auth"], {"credential": "delegated"})
    doc["global"] = {"services": {"authz": {"delegated_credential": {"enabled": True}}},
                     "plugins": [{"type": "router_replay", "configuration": {"shadow": {"model": "fast"}}}]}
    return doc


@pytest.mark.parametrize("doc,line", [
    (with_(["recipes", 0, "signals"], ROLE),
     f"recipes[default].signals.role_bindings: missing_identity_source: role bindings read the caller's identity "
     f"and nothing gives one; {SOURCE}"),
    (with_(["global", "router"], {"headers": {"debug": "authenticated"}}),
     f"global.router.headers.debug: missing_identity_source: 'authenticated' needs to know the caller; {SOURCE}"),
    (with_(["global", "router"], {"rate_limits": {"teams": {"t": {"rpm": 1}}}}),
     f"global.router.rate_limits.teams: missing_identity_source: limits per team need to know the caller's team; "
     f"{SOURCE}"),
    (with_(["global", "router"], {"auth": {"enabled": True}}),
     "global.router.auth.keys: missing_field: client keys are on and no key is declared or stored; declare keys "
     "(by sha256) or set store.backend: redis"),
    (with_(["global", "router"], {"auth": {"enabled": True, "keys": [{"id": "k", "sha256": SHA,
                                                                      "entrypoints": ["nope"]}]}}),
     "global.router.auth.keys[k].entrypoints[0]: unknown_entrypoint: 'nope' is no entrypoint's model name"),
    (with_(["global", "router"], {"auth": {"enabled": True, "keys": [{"id": "k", "sha256": SHA},
                                                                     {"id": "k", "sha256": "b" * 64}]}}),
     "global.router.auth.keys: duplicate_name: id 'k' is declared 2 times"),
    (with_(["listeners"], [{"name": "a", "role": "admin", "port": 9000}, {"name": "b", "role": "admin"}]),
     "listeners: invalid_value: 2 listeners have role admin (a, b); one may"),
    (with_(["global", "services"], {"authz": {"delegated_credential": {"enabled": True, "header": "Authorization"}}}),
     "global.services.authz.delegated_credential.header: invalid_value: 'Authorization' is an API-key, "
     "Authorization or identity header; the delegated credential needs a header of its own "
     "(x-vsr-delegated-credential)"),
    (delegating({"provider": "systemone", "endpoint": "http://127.0.0.1:9", "auth": {"credential": "delegated",
                                                                                 "api_key_env": "K"}}),
     "global.model_catalog.deployments.s1.auth: invalid_value: a delegated deployment sends the user's credential; "
     "it takes no api_key, api_key_env or api_key_file"),
    (delegating({"provider": "model_runtime", "endpoint": "http://127.0.0.1:9", "auth": {"credential": "delegated"}}),
     "global.model_catalog.deployments.s1.auth.credential: invalid_value: deployment 's1' is a model_runtime, which "
     "the router checks and prepares on its own behalf; only a systemone deployment can be delegated"),
    (delegating({"provider": "systemone", "endpoint": "http://127.0.0.1:9", "auth": {"credential": "delegated"}},
                authz=False),
     "global.model_catalog.deployments.s1.auth: deployment 's1' is delegated and "
     "global.services.authz.delegated_credential.enabled is false; enable global.services.authz.delegated_credential "
     "(the header the authenticator writes)"),
    (delegating({"provider": "systemone", "endpoint": "http://127.0.0.1:9", "auth": {"credential": "delegated"}},
                plugins=[{"type": "response_cache", "configuration": {"scope": "team"}}]),
     "global.plugins[0].configuration.scope: invalid_value: with delegated upstreams (s1) an answer is served only "
     "to the user whose credential obtained it; scope must be user"),
    (with_(["providers", "models", 0, "backend_refs", 0, "auth"], {"credential": "delegated", "api_key": "k"}),
     "providers.models[fast].backend_refs[0].auth: invalid_value: a delegated upstream sends the user's credential; "
     "it takes no api_key, api_key_env or api_key_file"),
    (with_(["providers", "models", 0, "backend_refs", 0, "auth"], {"credential": "delegated"}),
     "providers.models[fast].backend_refs[0].auth: upstream 'fast' is delegated and "
     "global.services.authz.delegated_credential.enabled is false; enable global.services.authz.delegated_credential "
     "(the header the authenticator writes)"),
    (shadowing_a_delegated_model(),
     "global.plugins[0].configuration.shadow.model: invalid_value: upstream 'fast' is delegated and a shadow copy "
     "never carries a user's credential"),
])
def test_each_identity_problem_fails_with_its_line(doc, line):
    assert line in lines_of(doc)


def delegating_smart(**plugins) -> dict:
    """The base configuration with model ``smart`` delegated (only decision b reaches it) and response_cache
    entries at the layers given: ``glob``, ``recipe``, ``a``, ``b`` (decision layers)."""
    doc = with_(["providers", "models", 1, "backend_refs", 0, "auth"], {"credential": "delegated"})
    doc["global"] = {"services": {"authz": {"delegated_credential": {"enabled": True}}}}
    entry = lambda conf: [{"type": "response_cache", "configuration": conf}]   # noqa: E731
    if "glob" in plugins:
        doc["global"]["plugins"] = entry(plugins["glob"])
    if "recipe" in plugins:
        doc["recipes"][0]["plugins"] = entry(plugins["recipe"])
    for i, name in enumerate("abc"):
        if name in plugins:
            doc["recipes"][0]["decisions"][i]["plugins"] = entry(plugins[name])
    return doc


def test_a_shared_cache_scope_is_refused_only_where_a_delegated_model_answers():
    # Decisions a and c never reach the delegated model: any scope. Decision b reaches it: user only, whichever
    # layer set its scope. The global layer serves a delegated model named directly, so it must say user too.
    assert load_raw(delegating_smart(a={"scope": "tenant"}, c={"scope": "global"}))
    assert load_raw(delegating_smart(recipe={"scope": "tenant"}, b={"scope": "user"}))
    assert load_raw(delegating_smart(recipe={"scope": "team"}, b={"enabled": False}))
    line = ("{}.configuration.scope: invalid_value: with delegated upstreams (smart) an answer is served only to the "
            "user whose credential obtained it; scope must be user")
    assert lines_of(delegating_smart(a={"scope": "tenant"}, b={"scope": "tenant"})) == [
        line.format("recipes[default].decisions[b].plugins[0]")]
    assert lines_of(delegating_smart(recipe={"scope": "tenant"})) == [line.format("recipes[default].plugins[0]")]
    assert lines_of(delegating_smart(glob={"scope": "tenant"}, recipe={"scope": "user"})) == [
        line.format("global.plugins[0]")]


def test_an_identity_source_lets_them_load():
    trusted = with_(["recipes", 0, "signals"], {**base()["recipes"][0]["signals"], **ROLE})
    trusted["listeners"] = [{"name": "main", "identity": {"trust_headers": True}}]
    assert load_raw(trusted)
    keyed = with_(["recipes", 0, "signals"], {**base()["recipes"][0]["signals"], **ROLE})
    keyed["global"] = {"router": {"auth": {"enabled": True, "keys": [{"id": "k", "sha256": SHA}]},
                                  "headers": {"debug": "authenticated"},
                                  "rate_limits": {"tenants": {"acme": {"tpm": 1000}}}}}
    assert load_raw(keyed)


def test_an_admin_listener_beyond_this_host_is_a_warning():
    doc = with_(["listeners"], [{"name": "main"}, {"name": "ops", "role": "admin", "address": "0.0.0.0", "port": 9}])
    assert any(w.startswith("listeners[ops].address: the admin listener") for w in load_raw(doc).warnings)


# --- usage -------------------------------------------------------------------------------------


def test_usage_of_a_whole_answer_in_each_protocol():
    for body, tokens in ((b'{"id":"x","usage":{"prompt_tokens":17,"completion_tokens":13,"total_tokens":30}}', 30),
                         (b'{\n  "type": "message",\n  "usage": {"input_tokens": 5, "output_tokens": 7}\n}', 12),
                         (b'{"object":"response","usage":{"input_tokens":3,"output_tokens":4,"total_tokens":7}}', 7)):
        m = UsageMeter(100)
        m.whole(body)
        assert m.tokens() == tokens


def test_usage_of_streams_split_anywhere():
    chat = (b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'
            b'data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}\n\n'
            b'data: [DONE]\n\n')
    messages = (b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":9,'
                b'"output_tokens":1}}}\n\nevent: content_block_delta\ndata: {"type":"content_block_delta"}\n\n'
                b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":6}}\n\n')
    responses = (b'event: response.completed\ndata: {"type":"response.completed","response":{"usage":'
                 b'{"input_tokens":2,"output_tokens":3,"total_tokens":5}}}\n\n')
    for stream, tokens in ((chat, 15), (messages, 15), (responses, 5)):
        for size in (1, 7, 64, len(stream)):
            m = UsageMeter(0)
            for i in range(0, len(stream), size):
                m.feed(stream[i:i + size])
            assert m.tokens() == tokens, (stream[:30], size)


def test_an_answer_without_usage_is_estimated_from_its_text_not_its_framing():
    m = UsageMeter(400)
    m.prompt = lambda: 40                  # the request's text, not its JSON
    m.answered = True                      # a model answered (answer.py says so)
    answer = (b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
              b'{"content":"' + b"x" * 390 + b'"},"logprobs":null,"finish_reason":null}]}\n\n') * 2
    for i in range(0, len(answer), 50):
        m.feed(answer[i:i + 50])
    assert m.tokens() == estimated(40) + estimated(2 * 390)     # each rounded up, as the access log shows
    for body, text in ((b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
                        b'{"type":"text_delta","text":"abcdefgh"}}\n\n', 8),
                       (b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
                        b'"delta":"abcd","item_id":"m","output_index":0,"content_index":0}\n\n', 4)):
        m = UsageMeter(1000)
        m.prompt = lambda: 0
        m.feed(body)
        assert m.text_bytes == text
    whole = UsageMeter(0)
    whole.answered = True
    whole.whole(b'{"choices":[{"index":0,"message":{"role":"assistant","content":"abcdefgh"}}]}')
    assert whole.tokens() == 2


def test_a_request_no_model_answered_is_charged_only_what_its_calls_reported():
    """A router's own refusal, a backend's error, every attempt failed: no estimate of the request's text."""
    m = UsageMeter(400_000)
    m.prompt = lambda: 40
    m.whole(b'{"error":{"message":"bad","type":"invalid_request_error"}}')
    assert m.tokens() == 0
    m.unsent = 7                            # a Looper call that answered and was not sent
    assert m.tokens() == 7


def test_a_request_cut_after_it_reached_a_backend_is_charged_its_prompt_at_least():
    """The provider bills the prompt of a request it read: cut by its client or its deadline, the key pays it."""
    m = UsageMeter(400_000)
    m.prompt = lambda: 40
    m.cut()
    assert m.tokens() == 10
    m.feed(b'data: {"choices":[{"index":0,"delta":{"content":"abcdefgh"}}]}\n\n')
    assert m.tokens() == 12                 # and what it delivered
    m.upstream(b'data: {"choices":[],"usage":{"prompt_tokens":30,"completion_tokens":2,"total_tokens":32}}\n\n')
    assert m.tokens() == 32                 # usage reported wins over the estimate
    looper = UsageMeter(0)
    looper.prompt, looper.prepaid, looper.unsent = (lambda: 40), True, 7
    assert looper.tokens() == 7             # an executor's calls, each charged as it ended
    looper.cut()
    assert looper.tokens() == 17            # and the one cut short, its prompt


def test_a_relayed_stream_is_read_from_the_backends_bytes():
    m = UsageMeter(0)
    m.upstream(b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n')
    m.feed(b'data: {"choices":[],"usage":{"prompt_tokens":300,"completion_tokens":2,"total_tokens":302}}\n\n')
    assert m.tokens() == 5


# --- the local windows (no Redis) ------------------------------------------------------------


def test_local_windows_hold_each_limit():
    async def main():
        lim = Limiter(RateLimits(teams={"t": Limits(concurrent=2, tpm=50)}), AuthStore(), keys_have_limits=True,
                      lease_s=60)
        me = Identity(user="u", key_id="k", team="t", limits=Limits(rpm=3))
        tickets = [await lim.admit(me, "chat"), await lim.admit(me, "chat")]
        with pytest.raises(RateLimited) as caught:
            await lim.admit(me, "chat")
        assert "requests in flight" in caught.value.message and caught.value.retry_after_s == 1
        lim.done(tickets.pop(), 60)
        with pytest.raises(RateLimited) as caught:
            await lim.admit(me, "chat")
        assert "tokens per minute" in caught.value.message and 1 <= caught.value.retry_after_s <= 60
        assert await lim.admit(Identity(user="v"), "chat") is None, "no limit applies to a caller without one"
    trio.run(main)


def test_check_refuses_as_admit_would_and_takes_no_place():
    """count_tokens' question: refused at the limit, yet asking never spends the window."""
    async def main():
        lim = Limiter(RateLimits(), AuthStore(), keys_have_limits=True)
        me = Identity(user="u", key_id="k", limits=Limits(rpm=2, concurrent=1))
        for _ in range(5):
            await lim.check(me, "count_tokens")
        ticket = await lim.admit(me, "chat")
        with pytest.raises(RateLimited) as caught:
            await lim.check(me, "count_tokens")
        assert "requests in flight" in caught.value.message
        lim.done(ticket, 0)
        await lim.check(me, "count_tokens")
        await lim.admit(me, "chat")
        with pytest.raises(RateLimited) as caught:
            await lim.check(me, "count_tokens")
        assert "requests per minute" in caught.value.message and caught.value.retry_after_s >= 1
    trio.run(main)


def test_the_production_example_loads():
    from vsr_fast.routing import load_file

    from .procs import ROOT

    loaded = load_file(str(ROOT / "config" / "examples" / "production.yaml"))
    auth = loaded.config.global_.router.auth
    assert auth.enabled and auth.store.backend == "redis" and {k.id for k in auth.keys} == {"oncall", "web-frontend"}
    assert [listener.role for listener in loaded.config.listeners] == ["serving", "admin"]
    assert not any("missing_identity_source" in w for w in loaded.warnings)


# --- budget periods ------------------------------------------------------------------------------


def test_a_month_budget_is_the_calendar_month_in_utc():
    """A key whose month began on 2026-12-04 ends it with December (not 30 days from the epoch's block: 2027-01-02),
    and what it spent in December does not count in January."""
    import datetime as dt

    from vsr_fast.auth import spend
    from vsr_fast.config.auth import Budget

    def at(*ymdhm: int) -> float:
        return dt.datetime(*ymdhm, tzinfo=dt.timezone.utc).timestamp()

    lim = Limiter(RateLimits(), AuthStore(), keys_have_limits=True)
    limits = Limits(budget=Budget(tokens=100, period="month"))
    december, last_minute, january = at(2026, 12, 4, 9, 0), at(2026, 12, 31, 23, 59), at(2027, 1, 1, 0, 0)
    (used,) = spend.local(lim, [("k", limits)], december)
    assert used.budget.period_end_ms == int(january * 1000)
    assert lim.own_use("k", limits, december) == (0, 0, 0)
    local = lim._local_of(lim.scopes(Identity(user="u", key_id="k", limits=limits))[0])
    local.spent_in(limits, december)
    local.spent += 60
    assert lim.own_use("k", limits, last_minute)[0] == 60, "the same month until its last second"
    assert lim.own_use("k", limits, january)[0] == 0, "a new month starts from nothing"
    (used,) = spend.local(lim, [("k", Limits(budget=Budget(tokens=100, period="day")))], december)
    assert used.budget.period_end_ms == int(at(2026, 12, 5) * 1000), "a day ends at midnight UTC"
