"""The six table-driven heuristic signals: language, context, conversation, authz, metadata, input_modality."""
from __future__ import annotations

from typing import Any

import msgspec
import pytest

from vsr_fast.config.signals import (
    ContextRule,
    ConversationRule,
    InputModalityRule,
    LanguageRule,
    MetadataRule,
    RoleBinding,
)
from vsr_fast.protocol.chat import (
    REQUEST_DECODER,
    AudioPart,
    FilePart,
    ImagePart,
    ImageURL,
    InputAudio,
    Message,
    TextPart,
)
from vsr_fast.signals import authz, context, conversation, input_modality, language, metadata
from vsr_fast.signals.base import ANONYMOUS, CanonicalRequest, CompileErrors, Identity, Outcome

P = "recipes[default].signals"
MB = 1 << 20


def compiled(module, rule_type, key: str, rules: list[dict[str, Any]]):
    """Compile rules written as config dicts; returns (family, errors)."""
    errors = CompileErrors()
    family = module.compile([msgspec.convert(r, rule_type) for r in rules], f"{P}.{key}", errors)
    return family, errors


def clean(module, rule_type, key: str, *rules: dict[str, Any]):
    family, errors = compiled(module, rule_type, key, list(rules))
    assert errors.lines == []
    return family


def ask(family, request: CanonicalRequest, name: str) -> Outcome:
    outcomes = family.evaluate(request, [name])
    assert list(outcomes) == [name]
    return outcomes[name]


def user(text: str, *, identity: Identity = ANONYMOUS, **kw: Any) -> CanonicalRequest:
    return CanonicalRequest([Message(role="user", content=text)], identity=identity, **kw)


def chat(doc: dict[str, Any], identity: Identity = ANONYMOUS) -> CanonicalRequest:
    """A request as the server builds it: Chat JSON bytes through the shared decoder. An empty
    conversation never passes the Chat decoder (OpenAI's empty_array), but reaches the signals
    from a Responses request whose input is empty: built directly."""
    if not doc["messages"]:
        return CanonicalRequest([], identity=identity)
    return CanonicalRequest.from_chat(REQUEST_DECODER.decode(msgspec.json.encode(doc)), identity)


IMAGE = ImagePart(image_url=ImageURL(url="data:image/png;base64,iVBORw0KGgo="))
AUDIO = AudioPart(input_audio=InputAudio(data="UklGRg==", format="wav"))


# --- language -----------------------------------------------------------------------

LANGUAGE_RULES = [
    {"name": "en"},                                          # languages default to [name]
    {"name": "zh"},
    {"name": "ja"},
    {"name": "ko"},
    {"name": "ru"},
    {"name": "english_upper", "languages": ["EN-us"]},       # case and region ignored
    {"name": "chinese", "languages": ["zh-CN", "zh_Hant"]},
    {"name": "romance", "languages": ["fr", "es", "it"]},
    {"name": "en_sure", "languages": ["en"], "min_confidence": 0.99},
    {"name": "en_any", "languages": ["en"], "min_confidence": 0.0},
]


@pytest.fixture(scope="module")
def languages():
    return clean(language, LanguageRule, "language", *LANGUAGE_RULES)


@pytest.mark.parametrize(("text", "rule", "matched", "p_low", "p_high"), [
    ("Hello, how are you doing today?", "en", True, 0.9, 1.0),
    ("Hello, how are you doing today?", "english_upper", True, 0.9, 1.0),
    ("Hello, how are you doing today?", "zh", False, 0.9, 1.0),
    ("请帮我把这段代码改写成异步的版本，并解释原因。", "zh", True, 0.8, 1.0),
    ("请帮我把这段代码改写成异步的版本，并解释原因。", "chinese", True, 0.8, 1.0),
    ("请帮我把这段代码改写成异步的版本，并解释原因。", "en", False, 0.8, 1.0),
    ("これは日本語の文章です。", "ja", True, 0.99, 1.0),
    ("これは日本語の文章です。", "zh", False, 0.99, 1.0),
    ("안녕하세요, 오늘 날씨가 정말 좋네요.", "ko", True, 0.9, 1.0),
    ("Привет, как дела? Я хотел бы узнать больше о вашем продукте.", "ru", True, 0.9, 1.0),
    ("Bonjour, comment allez-vous? Je voudrais réserver une chambre.", "romance", True, 0.99, 1.0),
    ("Quiero reservar una mesa para dos personas.", "romance", True, 0.6, 0.95),
    ("PLEASE SUMMARIZE THIS DOCUMENT FOR ME IN THREE BULLET POINTS", "en", True, 0.9, 1.0),
    ("ThIs Is A tEsT oF mIxEd CaSe TeXt WrItTeN iN eNgLiSh", "en", True, 0.9, 1.0),
    ("hELLO, hOW ARE YOU DOING TODAY?", "en", True, 0.9, 1.0),
    ("Hello 😀 how are you doing today my friend? 🎉", "en", True, 0.9, 1.0),
    # Known but below the rule's bar: unknown, with the detector's p as confidence.
    ("Quiero reservar una mesa para dos personas.", "en_sure", None, 0.6, 0.95),
    ("Hello, how are you doing today?", "en_sure", None, 0.9, 0.99),
    # Too short to decide: below the default 0.5, while min_confidence 0 always answers.
    ("ok", "en", None, 0.0, 0.1),
    ("ok", "en_any", False, 0.0, 0.1),
    # Nothing to classify: unknown at confidence 0, whatever the rule's bar.
    ("😀🎉👍", "en", None, 0.0, 0.0),
    ("😀🎉👍", "en_any", None, 0.0, 0.0),
    ("1234 5678 !!! ??? 3.14", "en", None, 0.0, 0.0),
    ("", "en", None, 0.0, 0.0),
    ("   \n\t ", "zh", None, 0.0, 0.0),
])
def test_language_table(languages, text, rule, matched, p_low, p_high):
    outcome = ask(languages, user(text), rule)
    assert outcome.matched is matched
    assert p_low <= outcome.confidence <= p_high
    assert outcome.value is None


@pytest.mark.parametrize(("text", "detail"), [
    ("😀🎉👍", "no letters"),
    ("", "no letters"),
])
def test_language_detail_without_letters(languages, text, detail):
    assert ask(languages, user(text), "en").detail == detail


def test_language_details_name_code_and_p(languages):
    text = "请帮我把这段代码改写成异步的版本，并解释原因。"
    assert ask(languages, user(text), "zh").detail.startswith("zh p=0.")
    assert ask(languages, user("Hello, how are you doing today?"), "en_sure").detail.endswith("< 0.99")


def test_language_reads_only_the_current_user_turn(languages):
    request = CanonicalRequest([
        Message(role="system", content="Tu es un assistant qui répond toujours en français."),
        Message(role="user", content="Bonjour, comment allez-vous? Je voudrais réserver une chambre."),
        Message(role="assistant", content="Bien sûr, pour quelle date?"),
        Message(role="user", content=[IMAGE, TextPart(text="What is shown in this picture? Please describe it.")]),
    ])
    assert ask(languages, request, "en").matched is True
    assert ask(languages, request, "romance").matched is False


@pytest.mark.parametrize("messages", [
    [Message(role="system", content="You are a helpful assistant for every question.")],
    [Message(role="user", content=[IMAGE])],
    [Message(role="user", content=None)],
])
def test_language_without_user_text_is_unknown(languages, messages):
    outcome = ask(languages, CanonicalRequest(messages), "en")
    assert (outcome.matched, outcome.confidence, outcome.detail) == (None, 0.0, "no letters")


ENGLISH = "The quick brown fox jumps over the lazy dog while the farmer watches. "
CHINESE = "这是一个很长的中文文档，用来测试语言识别的速度。"


@pytest.mark.parametrize(("head_sentence", "rule", "code", "tail_sentence"), [
    (ENGLISH, "en", "en", CHINESE),
    (CHINESE, "zh", "zh", ENGLISH),
])
def test_language_of_a_megabyte_is_the_language_of_its_head(languages, head_sentence, rule, code, tail_sentence):
    # The head (HEAD_BYTES) is one language and the megabyte behind it another: the
    # answer is the head's, so only the head was classified. The whole megabyte would
    # also score p ~0.02 (the model's temperature grows with length), not this confidence.
    head_text = head_sentence * (language.HEAD_BYTES // len(head_sentence.encode()) + 1)
    tail_text = tail_sentence * (MB // len(tail_sentence.encode()) + 1)
    request = user(head_text + tail_text)
    assert len((head_text + tail_text).encode()) > MB
    outcome = ask(languages, request, rule)
    assert outcome.matched is True and outcome.confidence > 0.8, outcome
    assert outcome.detail.startswith(f"{code} p=")
    other = "zh" if rule == "en" else "en"
    assert ask(languages, request, other).matched is False


@pytest.mark.parametrize(("text", "size"), [
    ("a" * 10_000, 4096),
    ("中" * 10_000, 4095),              # 3-byte characters: 1365 whole ones
    ("😀" * 10_000, 4096),              # 4-byte characters: 1024 whole ones
    ("a" * 4094 + "中" * 10, 4094),     # the cut lands inside a character: drop it
    ("short text", 10),
    ("", 0),
])
def test_language_head_cuts_on_a_character_boundary(text, size):
    cut = language.head(text)
    assert len(cut.encode()) == size
    assert text.startswith(cut)


def test_language_detects_once_per_evaluate(languages, monkeypatch):
    calls = []
    real = language.detect
    monkeypatch.setattr(language, "detect", lambda text: calls.append(text) or real(text))
    outcomes = languages.evaluate(user("Hello, how are you doing today?"), [r["name"] for r in LANGUAGE_RULES])
    assert len(calls) == 1
    assert set(outcomes) == {r["name"] for r in LANGUAGE_RULES}
    assert languages.evaluate(user("Hello"), []) == {}
    assert len(calls) == 1


def test_language_family_shape(languages):
    assert languages.condition_type == "language"
    assert set(languages.names()) == {r["name"] for r in LANGUAGE_RULES}


def test_language_known_codes():
    codes = language.known_codes()
    assert {"en", "zh", "ja", "ko", "fr", "de", "es", "ru", "ar"} <= codes
    assert "zxx" not in codes


LANG = f"{P}.language"
NOT_A_CODE = "is not a language code the detector answers; it answers ISO 639 codes such as en, zh, ja, de"


@pytest.mark.parametrize(("rules", "lines"), [
    ([{"name": "bad", "languages": ["en", "xx"]}],
     [f"{LANG}[bad].languages: invalid_value: language rule 'bad': 'xx' (from languages) {NOT_A_CODE}"]),
    ([{"name": "bad", "languages": ["klingon-KL"]}],
     [f"{LANG}[bad].languages: invalid_value: language rule 'bad': 'klingon-KL' (from languages) {NOT_A_CODE}"]),
    ([{"name": "chinese"}],
     [f"{LANG}[chinese]: invalid_value: language rule 'chinese': 'chinese' "
      f"(from the rule's name, as languages is not set) {NOT_A_CODE}"]),
    ([{"name": "none", "languages": ["zxx"]}],
     [f"{LANG}[none].languages: invalid_value: language rule 'none': 'zxx' (from languages) is the "
      f"detector's label for text with no language, which answers unknown rather than matching"]),
    ([{"name": "empty", "languages": []}],
     [f"{LANG}[empty].languages: invalid_value: an empty list matches no language"]),
    ([{"name": "en"}, {"name": "en", "languages": ["fr"]}],
     [f"{LANG}[en].name: duplicate_name: language rule 'en' is declared more than once"]),
])
def test_language_load_errors(rules, lines):
    family, errors = compiled(language, LanguageRule, "language", rules)
    assert errors.lines == lines
    # The load fails on these lines; the family still declares every name, so no
    # "undeclared rule" errors pile on, and a rule that failed answers unknown.
    assert set(family.names()) == {r["name"] for r in rules}


def test_language_failed_rule_answers_unknown():
    family, errors = compiled(language, LanguageRule, "language", [{"name": "bad", "languages": ["xx"]}])
    assert errors.lines
    outcome = ask(family, user("Hello, how are you doing today?"), "bad")
    assert (outcome.matched, outcome.detail) == (None, "rule failed to load")


# --- context ------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "tokens"), [
    (0, 0), (8000, 8000), ("8000", 8000), ("16K", 16_000), ("16k", 16_000), ("1.5K", 1_500),
    ("1.1K", 1_100), ("1M", 1_000_000), ("1.5m", 1_500_000), ("0.001M", 1_000), ("0K", 0),
])
def test_context_token_counts_parse(raw, tokens):
    assert context.parse_token_count(raw) == tokens


CONTEXT_RULES = [
    {"name": "short", "max_tokens": 999},
    {"name": "medium", "min_tokens": "1K", "max_tokens": "16K"},
    {"name": "long", "min_tokens": "200k"},
    {"name": "huge", "min_tokens": "1.5M"},
    {"name": "exact", "min_tokens": 10, "max_tokens": 10},
    {"name": "anything"},
]


@pytest.fixture(scope="module")
def contexts():
    return clean(context, ContextRule, "context", *CONTEXT_RULES)


def _messages(*texts: str) -> CanonicalRequest:
    return CanonicalRequest([Message(role="user", content=t) for t in texts])


@pytest.mark.parametrize(("request_", "tokens", "hits"), [
    (_messages(""), 0, {"short", "anything"}),
    (_messages("a"), 1, {"short", "anything"}),
    (_messages("a" * 3996), 999, {"short", "anything"}),
    (_messages("a" * 3997), 1000, {"medium", "anything"}),         # ceil(3997 / 4)
    (_messages("a" * 4000), 1000, {"medium", "anything"}),
    (_messages("a" * 64_000), 16_000, {"medium", "anything"}),
    (_messages("a" * 64_001), 16_001, {"anything"}),
    (_messages("中" * 1000), 750, {"short", "anything"}),            # 3 bytes a character
    (_messages("😀" * 10), 10, {"short", "exact", "anything"}),     # 4 bytes a character
    (_messages("ab", "cd", "ef" * 17), 10, {"short", "exact", "anything"}),   # every message counts
    (_messages("a" * MB), MB // 4, {"long", "anything"}),
    (_messages("中" * (2 * MB)), 3 * MB // 2, {"long", "huge", "anything"}),
])
def test_context_table(contexts, request_, tokens, hits):
    outcomes = contexts.evaluate(request_, [r["name"] for r in CONTEXT_RULES])
    assert {o.value for o in outcomes.values()} == {tokens}
    assert {name for name, o in outcomes.items() if o.matched} == hits
    assert all(o.matched is not None for o in outcomes.values())


def test_context_counts_every_role_and_skips_media(contexts):
    request = CanonicalRequest([
        Message(role="system", content="s" * 400),                                    # 400 bytes
        Message(role="user", content=[IMAGE, TextPart(text="abc"), TextPart(text="def"), AUDIO]),  # "abc\ndef"
        Message(role="assistant", content=None, tool_calls=None),
        Message(role="tool", content="t" * 93, tool_call_id="c1"),
    ])
    outcome = ask(contexts, request, "short")
    assert outcome.value == 125                         # ceil((400 + 7 + 93) / 4)
    assert (outcome.matched, outcome.detail) == (True, "125 tokens in [0, 999]")


@pytest.mark.parametrize(("rule", "detail"), [
    ("short", "2400 tokens not in [0, 999]"),
    ("medium", "2400 tokens in [1000, 16000]"),
    ("long", "2400 tokens not in [200000, inf)"),
    ("anything", "2400 tokens in [0, inf)"),
])
def test_context_details(contexts, rule, detail):
    assert ask(contexts, _messages("x" * 9600), rule).detail == detail


def test_context_family_shape(contexts):
    assert contexts.condition_type == "context"
    assert set(contexts.names()) == {r["name"] for r in CONTEXT_RULES}


CTX = f"{P}.context"
NOT_A_COUNT = "is not a token count such as 8000, \"16K\" or \"1.5M\""


@pytest.mark.parametrize(("rule", "lines"), [
    ({"name": "c", "min_tokens": "lots"}, [f"{CTX}[c].min_tokens: invalid_value: 'lots' {NOT_A_COUNT}"]),
    ({"name": "c", "max_tokens": "16KB"}, [f"{CTX}[c].max_tokens: invalid_value: '16KB' {NOT_A_COUNT}"]),
    ({"name": "c", "max_tokens": "1e3"}, [f"{CTX}[c].max_tokens: invalid_value: '1e3' {NOT_A_COUNT}"]),
    ({"name": "c", "max_tokens": " 16K"}, [f"{CTX}[c].max_tokens: invalid_value: ' 16K' {NOT_A_COUNT}"]),
    ({"name": "c", "max_tokens": ""}, [f"{CTX}[c].max_tokens: invalid_value: '' {NOT_A_COUNT}"]),
    ({"name": "c", "max_tokens": "١٦K"}, [f"{CTX}[c].max_tokens: invalid_value: '١٦K' {NOT_A_COUNT}"]),
    ({"name": "c", "min_tokens": "-5K"}, [f"{CTX}[c].min_tokens: invalid_value: '-5K' {NOT_A_COUNT}"]),
    ({"name": "c", "min_tokens": -1}, [f"{CTX}[c].min_tokens: invalid_value: -1 is below 0"]),
    ({"name": "c", "max_tokens": -1000}, [f"{CTX}[c].max_tokens: invalid_value: -1000 is below 0"]),
    ({"name": "c", "max_tokens": "1.0005K"},
     [f"{CTX}[c].max_tokens: invalid_value: '1.0005K' is 1000.5 tokens, not a whole number"]),
    ({"name": "c", "min_tokens": "2K", "max_tokens": "1K"},
     [f"{CTX}[c]: invalid_value: min_tokens 2000 is above max_tokens 1000: no request can match"]),
    ({"name": "c", "min_tokens": "x", "max_tokens": -2},
     [f"{CTX}[c].min_tokens: invalid_value: 'x' {NOT_A_COUNT}",
      f"{CTX}[c].max_tokens: invalid_value: -2 is below 0"]),
])
def test_context_load_errors(rule, lines):
    family, errors = compiled(context, ContextRule, "context", [rule])
    assert errors.lines == lines
    outcome = ask(family, _messages("abcd"), "c")
    assert (outcome.matched, outcome.value, outcome.detail) == (None, 1, "rule failed to load")


def test_context_duplicate_names():
    _, errors = compiled(context, ContextRule, "context",
                         [{"name": "c"}, {"name": "d"}, {"name": "c", "max_tokens": 5}])
    assert errors.lines == [f"{CTX}[c].name: duplicate_name: context rule 'c' is declared more than once"]


# --- conversation -------------------------------------------------------------------

AGENT_CHAT = {
    "model": "auto",
    "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "developer", "content": "Prefer small diffs."},
        {"role": "user", "content": "Find the failing test."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{\"q\": \"FAIL\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "tests/test_x.py FAILED"},
        {"role": "tool", "tool_call_id": "c2", "content": "tests/ src/"},
        {"role": "assistant", "content": "Let me read it.", "tool_calls": [
            {"id": "c3", "type": "function", "function": {"name": "read", "arguments": "{\"p\": \"x\"}"}},
        ]},
        {"role": "tool", "tool_call_id": "c3", "content": "def test_x(): assert 1 == 2"},
        {"role": "assistant", "content": "The assertion is wrong."},
        {"role": "user", "content": [{"type": "text", "text": "Fix it."},
                                     {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
    ],
    "tools": [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
              for n in ("grep", "ls", "read", "write")],
}
PLAIN_CHAT = {"messages": [{"role": "user", "content": "Hi"}]}
LEGACY_CHAT = {"messages": [
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": None},
    {"role": "function", "name": "weather", "content": "sunny"},
]}
EMPTY_CHAT = {"messages": []}


def _count(source: str, predicate: dict[str, float], role: str | None = None) -> dict[str, Any]:
    src = {"type": source} if role is None else {"type": source, "role": role}
    return {"feature": {"type": "count", "source": src}, "predicate": predicate}


def _exists(source: str, role: str | None = None) -> dict[str, Any]:
    src = {"type": source} if role is None else {"type": source, "role": role}
    return {"feature": {"type": "exists", "source": src}}


# (rule, the chat, matched, value, detail)
CONVERSATION_CASES = [
    (_count("message", {"gte": 10}), AGENT_CHAT, True, 10, "10 messages, >= 10"),
    (_count("message", {"gt": 10}), AGENT_CHAT, False, 10, "10 messages, not > 10"),
    (_count("message", {"eq": 2}, "user"), AGENT_CHAT, True, 2, "2 user messages, == 2"),
    (_count("message", {"eq": 3}, "assistant"), AGENT_CHAT, True, 3, "3 assistant messages, == 3"),
    (_count("message", {"lt": 1}, "tool"), AGENT_CHAT, False, 3, "3 tool messages, not < 1"),
    (_count("message", {"eq": 1}, "developer"), AGENT_CHAT, True, 1, "1 developer messages, == 1"),
    (_count("message", {"gte": 1, "lte": 1}), PLAIN_CHAT, True, 1, "1 messages, >= 1 and <= 1"),
    (_count("turn", {"gte": 2}), AGENT_CHAT, True, 2, "2 user turns, >= 2"),
    (_count("turn", {"gte": 2}), PLAIN_CHAT, False, 1, "1 user turns, not >= 2"),
    (_count("tool_definition", {"gt": 3}), AGENT_CHAT, True, 4, "4 tools defined, > 3"),
    (_count("tool_definition", {"gt": 0}), PLAIN_CHAT, False, 0, "0 tools defined, not > 0"),
    (_count("tool_call", {"eq": 3}), AGENT_CHAT, True, 3, "3 tool calls, == 3"),
    (_count("tool_call", {"gte": 2, "lt": 3}), AGENT_CHAT, False, 3, "3 tool calls, not >= 2 and < 3"),
    (_count("tool_result", {"eq": 3}), AGENT_CHAT, True, 3, "3 tool results, == 3"),
    (_count("tool_result", {"eq": 1}), LEGACY_CHAT, True, 1, "1 tool results, == 1"),
    (_count("system_prompt", {"eq": 2}), AGENT_CHAT, True, 2, "2 system prompts, == 2"),
    (_count("system_prompt", {"lte": 0}), PLAIN_CHAT, True, 0, "0 system prompts, <= 0"),
    (_count("message", {"eq": 0}), EMPTY_CHAT, True, 0, "0 messages, == 0"),
    (_exists("message", "system"), AGENT_CHAT, True, 1, "1 system messages"),
    (_exists("message", "tool"), PLAIN_CHAT, False, 0, "0 tool messages"),
    (_exists("turn"), EMPTY_CHAT, False, 0, "0 user turns"),
    (_exists("tool_definition"), AGENT_CHAT, True, 4, "4 tools defined"),
    (_exists("tool_call"), AGENT_CHAT, True, 3, "3 tool calls"),
    (_exists("tool_call"), LEGACY_CHAT, False, 0, "0 tool calls"),
    (_exists("tool_result"), AGENT_CHAT, True, 3, "3 tool results"),
    (_exists("tool_result"), PLAIN_CHAT, False, 0, "0 tool results"),
    (_exists("system_prompt"), AGENT_CHAT, True, 2, "2 system prompts"),
    (_exists("system_prompt"), PLAIN_CHAT, False, 0, "0 system prompts"),
    ({"feature": {"type": "exists"}}, PLAIN_CHAT, True, 1, "1 messages"),   # source defaults to message
]


@pytest.mark.parametrize(("rule", "doc", "matched", "value", "detail"), CONVERSATION_CASES)
def test_conversation_table(rule, doc, matched, value, detail):
    family = clean(conversation, ConversationRule, "conversation", {"name": "r", **rule})
    outcome = ask(family, chat(doc), "r")
    assert (outcome.matched, outcome.value, outcome.detail) == (matched, value, detail)


def test_conversation_counts_once_per_evaluate_for_every_rule():
    rules = [{"name": f"r{i}", **rule} for i, (rule, *_rest) in enumerate(CONVERSATION_CASES)]
    family = clean(conversation, ConversationRule, "conversation", *rules)
    assert family.condition_type == "conversation"
    request = chat(AGENT_CHAT)
    outcomes = family.evaluate(request, list(family.names()))
    for i, (_rule, doc, matched, value, _detail) in enumerate(CONVERSATION_CASES):
        if doc is AGENT_CHAT:
            assert (outcomes[f"r{i}"].matched, outcomes[f"r{i}"].value) == (matched, value)
    assert family.evaluate(request, ["r3"]).keys() == {"r3"}


CONV = f"{P}.conversation"


@pytest.mark.parametrize(("rule", "lines"), [
    ({"feature": {"type": "count", "source": {"type": "turn", "role": "user"}}, "predicate": {"gt": 1}},
     [f"{CONV}[r].feature.source.role: invalid_value: role applies only to source type message, not turn"]),
    ({"feature": {"type": "exists", "source": {"type": "tool_result", "role": "tool"}}},
     [f"{CONV}[r].feature.source.role: invalid_value: role applies only to source type message, "
      f"not tool_result"]),
    ({"feature": {"type": "exists", "source": {"type": "tool_call"}}, "predicate": {"gt": 1}},
     [f"{CONV}[r].predicate: invalid_value: an exists feature takes no predicate: it matches when the "
      f"count is above 0; use feature.type count to test the number"]),
    ({"feature": {"type": "exists"}, "predicate": {}},
     [f"{CONV}[r].predicate: invalid_value: an exists feature takes no predicate: it matches when the "
      f"count is above 0; use feature.type count to test the number"]),
    ({"feature": {"type": "count", "source": {"type": "message"}}},
     [f"{CONV}[r].predicate: invalid_value: a count feature needs a predicate with at least one of "
      f"gt, gte, lt, lte, eq"]),
    ({"feature": {"type": "count", "source": {"type": "tool_call"}}, "predicate": {}},
     [f"{CONV}[r].predicate: invalid_value: a count feature needs a predicate with at least one of "
      f"gt, gte, lt, lte, eq"]),
    ({"feature": {"type": "count", "source": {"type": "turn", "role": "user"}}},
     [f"{CONV}[r].feature.source.role: invalid_value: role applies only to source type message, not turn",
      f"{CONV}[r].predicate: invalid_value: a count feature needs a predicate with at least one of "
      f"gt, gte, lt, lte, eq"]),
])
def test_conversation_load_errors(rule, lines):
    family, errors = compiled(conversation, ConversationRule, "conversation", [{"name": "r", **rule}])
    assert errors.lines == lines
    assert list(family.names()) == ["r"]
    assert ask(family, chat(AGENT_CHAT), "r").matched is None


def test_conversation_duplicate_names():
    rule = {"name": "r", "feature": {"type": "exists"}}
    _, errors = compiled(conversation, ConversationRule, "conversation", [rule, rule])
    assert errors.lines == [f"{CONV}[r].name: duplicate_name: conversation rule 'r' is declared more than once"]


# --- authz --------------------------------------------------------------------------

BINDINGS = [
    {"name": "admins", "role": "admin", "subjects": [{"kind": "User", "name": "alice"},
                                                     {"kind": "Group", "name": "ops"}]},
    {"name": "staff", "role": "employee", "subjects": [{"kind": "Group", "name": "eng"},
                                                       {"kind": "Group", "name": "sales"}]},
    {"name": "kind_matters", "role": "x", "subjects": [{"kind": "Group", "name": "alice"},
                                                       {"kind": "User", "name": "ops"}]},
]


@pytest.fixture(scope="module")
def bindings():
    return clean(authz, RoleBinding, "role_bindings", *BINDINGS)


@pytest.mark.parametrize(("identity", "rule", "matched", "detail"), [
    (Identity("alice"), "admins", True, "user alice holds role admin"),
    (Identity("bob", frozenset({"ops"})), "admins", True, "group ops holds role admin"),
    (Identity("bob", frozenset({"eng", "ops"})), "staff", True, "group eng holds role employee"),
    (Identity("carol", frozenset({"eng"})), "admins", False, "user carol does not hold role admin"),
    (Identity("dave"), "staff", False, "user dave does not hold role employee"),
    (Identity("alice"), "kind_matters", False, "user alice does not hold role x"),      # a Group named alice
    (Identity("bob", frozenset({"ops"})), "kind_matters", False, "user bob does not hold role x"),
    (Identity("ALICE"), "admins", False, "user ALICE does not hold role admin"),       # exact names
    (ANONYMOUS, "admins", False, "anonymous caller"),
    (ANONYMOUS, "staff", False, "anonymous caller"),
    # Groups without a user are still anonymous: fail closed.
    (Identity(None, frozenset({"ops"})), "admins", False, "anonymous caller"),
])
def test_authz_table(bindings, identity, rule, matched, detail):
    outcome = ask(bindings, user("hi", identity=identity), rule)
    assert (outcome.matched, outcome.detail, outcome.value) == (matched, detail, None)


def test_authz_ignores_what_the_client_claims(bindings):
    # Client-supplied fields that look like identity change nothing.
    doc = {"messages": [{"role": "user", "content": "I am alice, an admin"}], "user": "alice",
           "metadata": {"user": "alice", "role": "admin", "groups": "ops"}}
    outcomes = bindings.evaluate(chat(doc), ["admins", "staff"])
    assert [o.matched for o in outcomes.values()] == [False, False]
    assert ask(bindings, chat(doc, Identity("alice")), "admins").matched is True


def test_authz_family_shape_and_duplicates(bindings):
    assert bindings.condition_type == "authz"
    assert set(bindings.names()) == {"admins", "staff", "kind_matters"}
    _, errors = compiled(authz, RoleBinding, "role_bindings", [BINDINGS[0], BINDINGS[1], BINDINGS[0]])
    assert errors.lines == [
        f"{P}.role_bindings[admins].name: duplicate_name: role_bindings rule 'admins' is declared more than once"]


# --- metadata -----------------------------------------------------------------------

METADATA_RULES = [
    {"name": "gold", "key": "tier", "predicate": {"equals": "gold"}},
    {"name": "not_free", "key": "tier", "predicate": {"not_equals": "free"}},
    {"name": "paid", "key": "tier", "predicate": {"in": ["gold", "silver"]}},
    {"name": "has_tier", "key": "tier", "predicate": {"exists": True}},
    {"name": "no_tier", "key": "tier", "predicate": {"exists": False}},
    {"name": "eu", "key": "region", "predicate": {"matches": "^eu-(west|central)-[0-9]+$"}},
    {"name": "consent", "key": "consent", "predicate": {"matches": "(?i)yes"}},
    {"name": "empty_is_value", "key": "tag", "predicate": {"equals": ""}},
]


@pytest.fixture(scope="module")
def metadatas():
    return clean(metadata, MetadataRule, "metadata", *METADATA_RULES)


@pytest.mark.parametrize(("meta", "rule", "matched", "detail"), [
    ({"tier": "gold"}, "gold", True, "tier='gold', == 'gold' holds"),
    ({"tier": "Gold"}, "gold", False, "tier='Gold', == 'gold' fails"),            # case-sensitive
    ({}, "gold", False, "tier missing, == 'gold' fails"),
    ({"tier": "gold"}, "not_free", True, "tier='gold', != 'free' holds"),
    ({"tier": "free"}, "not_free", False, "tier='free', != 'free' fails"),
    ({}, "not_free", True, "tier missing, != 'free' holds"),
    ({"tier": "silver"}, "paid", True, "tier='silver', in ['gold', 'silver'] holds"),
    ({"tier": "bronze"}, "paid", False, "tier='bronze', in ['gold', 'silver'] fails"),
    ({"other": "gold"}, "paid", False, "tier missing, in ['gold', 'silver'] fails"),
    ({"tier": ""}, "has_tier", True, "tier='', exists holds"),
    ({}, "has_tier", False, "tier missing, exists fails"),
    ({"tier": "x"}, "no_tier", False, "tier='x', absent fails"),
    ({}, "no_tier", True, "tier missing, absent holds"),
    ({"region": "eu-west-1"}, "eu", True, "region='eu-west-1', matches '^eu-(west|central)-[0-9]+$' holds"),
    ({"region": "us-east-1"}, "eu", False, "region='us-east-1', matches '^eu-(west|central)-[0-9]+$' fails"),
    ({}, "eu", False, "region missing, matches '^eu-(west|central)-[0-9]+$' fails"),
    ({"consent": "I said YES"}, "consent", True, "consent='I said YES', matches '(?i)yes' holds"),   # search
    ({"consent": "no"}, "consent", False, "consent='no', matches '(?i)yes' fails"),
    ({"tag": ""}, "empty_is_value", True, "tag='', == '' holds"),
    ({}, "empty_is_value", False, "tag missing, == '' fails"),
    ({"consent": "yes " + "x" * 100}, "consent", True, f"consent='yes {'x' * 36}...', matches '(?i)yes' holds"),
])
def test_metadata_table(metadatas, meta, rule, matched, detail):
    outcome = ask(metadatas, user("hi", metadata=meta), rule)
    assert (outcome.matched, outcome.detail) == (matched, detail)


def test_metadata_redacted_detail_names_the_key_and_verdict_not_the_clients_value(metadatas):
    # What a private request's signals event carries (events/request.py): the client's value may be personal.
    outcome = ask(metadatas, user("hi", metadata={"consent": "yes, jane.doe@example.com"}), "consent")
    assert outcome.redacted == "consent matches '(?i)yes' holds" and "jane" in outcome.detail


def test_metadata_from_chat_json(metadatas):
    message = {"role": "user", "content": "x"}
    present = chat({"messages": [message], "metadata": {"tier": "gold", "region": "eu-central-2"}})
    absent = chat({"messages": [message]})
    names = ["gold", "not_free", "paid", "has_tier", "no_tier", "eu"]
    outcomes = metadatas.evaluate(present, names)
    assert [outcomes[n].matched for n in names] == [True, True, True, True, False, True]
    outcomes = metadatas.evaluate(absent, names)
    assert [outcomes[n].matched for n in names] == [False, True, False, False, True, False]
    assert metadatas.condition_type == "metadata"
    assert set(metadatas.names()) == {r["name"] for r in METADATA_RULES}


MD = f"{P}.metadata"
ONE_OF = "set exactly one of equals, not_equals, in, exists, matches; got"


@pytest.mark.parametrize(("predicate", "lines"), [
    ({}, [f"{MD}[consent].predicate: invalid_value: {ONE_OF} none"]),
    ({"equals": "a", "in": ["a"]}, [f"{MD}[consent].predicate: invalid_value: {ONE_OF} equals, in"]),
    ({"exists": False, "matches": "x"}, [f"{MD}[consent].predicate: invalid_value: {ONE_OF} exists, matches"]),
    ({"in": []}, [f"{MD}[consent].predicate.in: invalid_value: an empty list matches no value"]),
    ({"matches": "([a-z]"},
     [f"{MD}[consent].predicate.matches: invalid_value: '([a-z]' is not a valid regex: "
      f"missing ), unterminated subpattern at position 0"]),
    ({"matches": "*yes"},
     [f"{MD}[consent].predicate.matches: invalid_value: '*yes' is not a valid regex: "
      f"nothing to repeat at position 0"]),
])
def test_metadata_load_errors(predicate, lines):
    family, errors = compiled(metadata, MetadataRule, "metadata",
                              [{"name": "consent", "key": "consent", "predicate": predicate}])
    assert errors.lines == lines
    outcome = ask(family, user("hi", metadata={"consent": "yes"}), "consent")
    assert (outcome.matched, outcome.detail) == (None, "rule failed to load")


def test_metadata_duplicate_names():
    rule = {"name": "m", "key": "k", "predicate": {"exists": True}}
    _, errors = compiled(metadata, MetadataRule, "metadata", [rule, rule, rule])
    assert errors.lines == [f"{MD}[m].name: duplicate_name: metadata rule 'm' is declared more than once"] * 2


# --- input_modality -----------------------------------------------------------------

MODALITY_RULES = [{"name": m, "modality": m} for m in ("text", "image", "audio", "video")]


@pytest.fixture(scope="module")
def modalities():
    return clean(input_modality, InputModalityRule, "input_modality", *MODALITY_RULES)


def _parts(*parts) -> CanonicalRequest:
    return CanonicalRequest([Message(role="user", content=list(parts))])


def _file(**file: str) -> FilePart:
    return FilePart(file={"file_data": "AAAA", **file})


@pytest.mark.parametrize(("request_", "carried"), [
    (_messages("hello"), {"text"}),
    (_messages(""), set()),                                            # an empty string carries nothing
    (CanonicalRequest([]), set()),
    (_parts(TextPart(text="what is this?"), IMAGE), {"text", "image"}),
    (_parts(IMAGE), {"image"}),
    (_parts(AUDIO), {"audio"}),
    (_parts(TextPart(text="transcribe"), AUDIO, IMAGE), {"text", "audio", "image"}),
    (_parts(_file(mime_type="video/mp4")), {"video"}),
    (_parts(_file(filename="clip.mov")), {"video"}),
    (_parts(_file(filename="scan.png")), {"image"}),
    (_parts(_file(filename="report.pdf")), set()),                      # a file, none of the four media
    (CanonicalRequest([Message(role="system", content="be brief"), Message(role="user", content=[IMAGE])]),
     {"text", "image"}),                                                # every message counts
])
def test_input_modality_table(modalities, request_, carried):
    outcomes = modalities.evaluate(request_, ["text", "image", "audio", "video"])
    assert {name for name, o in outcomes.items() if o.matched} == carried
    assert all(o.matched is not None for o in outcomes.values())


def test_input_modality_from_chat_json_and_details(modalities):
    request = chat({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "What do you hear and see?"},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
    ]}]})
    assert ask(modalities, request, "audio").detail == "audio in {audio, image, text}"
    assert ask(modalities, request, "video").detail == "video not in {audio, image, text}"
    assert ask(modalities, CanonicalRequest([]), "text").detail == "text not in {nothing}"
    assert modalities.condition_type == "input_modality"
    assert set(modalities.names()) == {"text", "image", "audio", "video"}


def test_input_modality_duplicate_names():
    _, errors = compiled(input_modality, InputModalityRule, "input_modality",
                         [{"name": "pic", "modality": "image"}, {"name": "pic", "modality": "video"}])
    assert errors.lines == [
        f"{P}.input_modality[pic].name: duplicate_name: input_modality rule 'pic' is declared more than once"]
