"""A key limited by ``models`` (its ``entrypoints`` empty: all of them), as a client sees it: a real router,
the official SDKs.

- It calls any entrypoint, and a name that falls to the default recipe; the route's candidates are trimmed to
  its models, and a route none of whose models it may reach is refused 403 ``model_not_allowed``.
- ``GET /v1/models`` (OpenAI's and Anthropic's shapes) lists only what a key may call; one it may not is 404.
"""
from __future__ import annotations

import anthropic
import openai
import pytest

from .procs import model, router, write_config
from .test_e2e_auth import KEY, OTHER_KEY, _oa, sha

NARROW_KEY = "vsk-narrow-" + "n" * 32
MSGS = [{"role": "user", "content": "hi"}]


def models_doc(mock_url: str) -> dict:
    """vsr/auto's one decision prefers m-a, then m-b; m-c is in no decision."""
    return {
        "version": "v0.5",
        "providers": {"models": [model("m-a", f"{mock_url}/v1", upstream_name="mock-a"),
                                 model("m-b", f"{mock_url}/v1", upstream_name="mock-b"),
                                 model("m-c", f"{mock_url}/v1", upstream_name="mock-c")]},
        "recipes": [{"name": "default", "decisions": [
            {"name": "general", "modelRefs": [{"model": "m-a"}, {"model": "m-b"}]}]}],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "default", "default": True},
                        {"api": "chat", "model_names": ["vsr/other"], "recipe": "default"}],
        "global": {"router": {"auth": {"enabled": True, "keys": [
            {"id": "k4", "sha256": sha(KEY), "models": ["m-b"]},
            {"id": "only-c", "sha256": sha(NARROW_KEY), "models": ["m-c"]},
            {"id": "auto-only", "sha256": sha(OTHER_KEY), "entrypoints": ["vsr/auto"]}]}}},
    }


@pytest.fixture(scope="module")
def limited(mock, tmp_path_factory):
    with router(write_config(models_doc(mock.url), str(tmp_path_factory.mktemp("cfg")))) as proc:
        yield proc


def _selected(url: str, key: str, name: str) -> str:
    r = _oa(url, key).chat.completions.with_raw_response.create(model=name, messages=MSGS)
    return r.headers["x-vsr-selected-model"]


def _refused(url: str, key: str, name: str) -> dict:
    with pytest.raises(openai.PermissionDeniedError) as caught:
        _oa(url, key).chat.completions.create(model=name, messages=MSGS)
    return caught.value.body


def test_a_key_limited_by_models_calls_every_entrypoint_trimmed_to_them(limited):
    for name in ("vsr/auto", "vsr/other", "no-such-name-falls-to-the-default-recipe", "m-b"):
        assert _selected(limited.url, KEY, name) == "m-b", name
    body = _refused(limited.url, KEY, "m-a")
    assert body["code"] == "model_not_allowed" and body["param"] == "model"


def test_a_route_with_none_of_the_keys_models_is_refused(limited):
    body = _refused(limited.url, NARROW_KEY, "vsr/auto")
    assert body["code"] == "model_not_allowed" and "outside this key's models" in body["message"], body
    # The route's models are ones this key may not see (GET /v1/models hides them): the refusal names none.
    hidden = [m.id for m in _oa(limited.url, NARROW_KEY).models.list()]
    assert "m-a" not in hidden and "m-a" not in body["message"] and "m-b" not in body["message"], body
    assert _selected(limited.url, NARROW_KEY, "m-c") == "m-c"


def test_a_key_limited_by_entrypoints_still_names_only_them(limited):
    assert _selected(limited.url, OTHER_KEY, "vsr/auto") == "m-a"
    for name in ("vsr/other", "m-a", "no-such-name"):
        assert _refused(limited.url, OTHER_KEY, name)["code"] == "model_not_allowed", name
    # Nor is a name the catch-all would serve found for it: what it may not call is not found.
    with pytest.raises(openai.NotFoundError) as info:
        _oa(limited.url, OTHER_KEY).models.retrieve("no-such-name")
    assert info.value.body["code"] == "model_not_found" and info.value.body["type"] == "invalid_request_error"


@pytest.mark.parametrize("key,visible", [
    (KEY, ["vsr/auto", "vsr/other", "m-b"]),
    # Every route of vsr/auto and vsr/other is of models outside m-c (403 on call): neither is listed.
    (NARROW_KEY, ["m-c"]),
    (OTHER_KEY, ["vsr/auto"]),
])
def test_the_model_list_shows_only_what_the_key_may_call(limited, key, visible):
    c = _oa(limited.url, key)
    assert [m.id for m in c.models.list()] == visible
    a = anthropic.Anthropic(base_url=limited.url, api_key=key, max_retries=0)
    assert [m.id for m in a.models.list(limit=1000)] == visible
    for name in ("vsr/auto", "vsr/other", "m-a", "m-b", "m-c"):
        if name in visible:
            assert c.models.retrieve(name).id == name and a.models.retrieve(name).id == name
        else:
            with pytest.raises(openai.NotFoundError):
                c.models.retrieve(name)
            with pytest.raises(anthropic.NotFoundError):
                a.models.retrieve(name)


def test_anthropics_catch_all_is_not_found_for_a_key_whose_models_it_never_reaches(limited):
    """Claude Code's own default name falls to the default recipe: found for a key that reaches one of its
    models, not for one whose every route would be refused."""
    found = anthropic.Anthropic(base_url=limited.url, api_key=KEY, max_retries=0).models.retrieve("claude-x")
    assert found.id == "claude-x"
    with pytest.raises(anthropic.NotFoundError):
        anthropic.Anthropic(base_url=limited.url, api_key=NARROW_KEY, max_retries=0).models.retrieve("claude-x")
