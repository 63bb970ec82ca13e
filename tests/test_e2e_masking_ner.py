"""Masking with the embedded model's named-entity stage: names, street addresses and organisations never
reach the provider, in every text position, whole and streamed."""
from __future__ import annotations

import json

import openai
import pytest

from .procs import config, mock_upstream, model, router, write_config
from .test_e2e_masking import sent

# --- names, street addresses, organisations: the embedded model's named-entity stage -------------------

PERSON, STREET, ORG = "Jane Doe", "12 Elm Street", "Acme Corporation"
NAMED_PLUGINS = [{"type": "masking", "configuration": {"enabled": True, "signal": "people", "entity_types": [
    "PERSON", "STREET_ADDRESS", "ORGANIZATION", "LOCATION", "EMAIL_ADDRESS"]}}]


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    with mock_upstream() as upstream:
        doc = config([model("m", f"{upstream.url}/v1")],
                     [{"name": "all", "rules": {"operator": "AND", "conditions": []}, "modelRefs": [{"model": "m"}],
                       "plugins": NAMED_PLUGINS}],
                     signals={"pii": [{"name": "people", "ignore_labels": ["DATE_TIME"]}]})
        with router(write_config(doc, str(tmp_path_factory.mktemp("named")))) as proc:
            yield proc, upstream


@pytest.mark.parametrize("stream", [False, True])
def test_names_street_addresses_and_organisations_never_reach_the_provider(named, stream):
    proc, upstream = named
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
    messages = [
        {"role": "system", "content": f"You help the customer {PERSON} of {ORG}."},
        {"role": "user", "content": f"My name is {PERSON} and I live at {STREET}, Springfield. "
                                    f"I work for {ORG}. Please update my account."},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"customer": PERSON, "address": STREET})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": f"Customer {PERSON} lives at {STREET}, works at {ORG}."},
        {"role": "user", "content": "Thanks, summarise it."},
    ]
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    if stream:
        chunks = list(client.chat.completions.create(model="vsr/auto", messages=messages, tools=tools, stream=True))
        assert chunks
    else:
        assert client.chat.completions.create(model="vsr/auto", messages=messages, tools=tools).choices
    text = sent(upstream)
    for value in (PERSON, "Jane", "Doe", STREET, "Elm Street", ORG, "Acme"):
        assert value not in text, f"{value!r} reached the provider: {text}"
    assert "[PERSON_1]" in text and "[STREET_ADDRESS_1]" in text and "[ORGANIZATION_1]" in text
    got = json.loads(text)
    assert json.loads(got["messages"][2]["tool_calls"][0]["function"]["arguments"]) == {
        "customer": "[PERSON_1]", "address": "[STREET_ADDRESS_1]"}


# --- names and firms no list holds (fix95): read by their shape, masked in every copy ----------------------

NEW_PERSON, NEW_ORG = "Adaeze Nwachukwu", "Harbourline Shipping"


@pytest.mark.parametrize("stream", [False, True])
def test_a_name_and_a_firm_no_list_holds_never_reach_the_provider(named, stream):
    proc, upstream = named
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
    messages = [
        {"role": "user", "content": f"Hi, this is {NEW_PERSON}. {NEW_ORG} lost my parcel, and {NEW_PERSON} is the "
                                    f"name on the order."},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "track", "arguments": json.dumps({"order": "4471"})}}]},
        {"role": "tool", "tool_call_id": "call_1",
         "content": f"Order 4471: customer {NEW_PERSON}, carrier {NEW_ORG}, status lost."},
        {"role": "user", "content": "What now?"},
    ]
    tools = [{"type": "function", "function": {"name": "track", "parameters": {"type": "object"}}}]
    if stream:
        assert list(client.chat.completions.create(model="vsr/auto", messages=messages, tools=tools, stream=True))
    else:
        assert client.chat.completions.create(model="vsr/auto", messages=messages, tools=tools).choices
    text = sent(upstream)
    for value in (NEW_PERSON, "Adaeze", "Nwachukwu", NEW_ORG, "Harbourline"):
        assert value not in text, f"{value!r} reached the provider: {text}"
    got = json.loads(text)
    # Every copy of a value gets the same placeholder, in the user's turn and in the tool's result.
    assert got["messages"][0]["content"] == ("Hi, this is [PERSON_1]. [ORGANIZATION_1] lost my parcel, and "
                                             "[PERSON_1] is the name on the order.")
    assert got["messages"][2]["content"] == "Order 4471: customer [PERSON_1], carrier [ORGANIZATION_1], status lost."


# --- the trial's names and addresses (trial 22, fix123): hyphenated first names, a register's "SURNAME, Given",
# a lower-case self-introduction, names in non-Latin scripts, German/French/Spanish street addresses ----------

TRIAL_VALUES = ("Hans-Peter", "Schmidt", "Jean-Pierre", "Dubois", "Anne-Marie", "O'Connor", "Nguyễn", "Văn An",
                "GONZALEZ", "Maria", "maria gonzalez", "王小明", "محمد الأحمد", "Александр", "Иванов", "山田太郎",
                "Hauptstraße 5", "10115", "Rue de Rivoli", "75001", "Calle Mayor", "28013")


def test_the_trials_names_and_addresses_never_reach_the_provider(named):
    proc, upstream = named
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
    messages = [
        {"role": "system", "content": "Customer: GONZALEZ, Maria"},
        {"role": "user", "content": "my name is maria gonzalez and i need help. Please ask Hans-Peter Schmidt, "
                                    "Jean-Pierre Dubois and Anne-Marie O'Connor to call back."},
        {"role": "user", "content": "Ticket opened by Nguyễn Văn An. My name is 王小明. 我叫王小明，请联系我。"},
        {"role": "user", "content": "اسمي محمد الأحمد"},
        {"role": "user", "content": "Ticket opened by Aleksandr Ivanov (Александр Иванов) and 山田太郎 "
                                    "(yamada@example.jp)."},
        {"role": "user", "content": "Send it to Hauptstraße 5, 10115 Berlin, or to 10 Rue de Rivoli, 75001 Paris, "
                                    "or to Calle Mayor 12, 28013 Madrid."},
    ]
    assert client.chat.completions.create(model="vsr/auto", messages=messages).choices
    text = sent(upstream)
    for value in TRIAL_VALUES:
        assert value not in text, f"{value!r} reached the provider: {text}"
    got = json.loads(text)
    assert got["messages"][0]["content"] == "Customer: [PERSON_1]"
    assert "[STREET_ADDRESS_1]" in got["messages"][5]["content"]
