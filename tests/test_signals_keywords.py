"""The keyword signal: every method, operator and predicate, over the texts that break naive matchers."""
from __future__ import annotations

import msgspec
import pytest

from vsr_fast.config.signals import KeywordRule
from vsr_fast.protocol.chat import Message
from vsr_fast.signals import keywords
from vsr_fast.signals.base import CanonicalRequest, CompileErrors

PATH = "recipes[r].signals.keywords"


def rule(**fields) -> KeywordRule:
    return msgspec.convert({"name": "k", **fields}, KeywordRule)


def outcome(r: KeywordRule, *turns: str):
    errors = CompileErrors()
    family = keywords.compile([r], PATH, errors)
    assert errors.lines == []
    messages = []
    for i, t in enumerate(turns):
        messages.append(Message(role="user", content=t))
        if i < len(turns) - 1:
            messages.append(Message(role="assistant", content="ok"))
    return family.evaluate(CanonicalRequest(messages), ["k"])["k"]


MEGABYTE = ("lorem ipsum dolor sit amet " * 40_000)[:1_000_000]

CASES = [
    # (id, rule fields, text, matched, value)
    ("exact-or-hit", {"keywords": ["urgent", "asap"]}, "Please, ASAP!", True, 1.0),
    ("exact-or-miss", {"keywords": ["urgent", "asap"]}, "whenever you can", False, 0.0),
    ("exact-word-boundary", {"keywords": ["cat"]}, "concatenate the category", False, 0.0),
    ("exact-and-all", {"operator": "AND", "keywords": ["red", "blue"]}, "red and blue", True, 2.0),
    ("exact-and-one-missing", {"operator": "AND", "keywords": ["red", "blue"]}, "only red", False, 1.0),
    ("exact-nor-none", {"operator": "NOR", "keywords": ["spam", "scam"]}, "a normal message", True, 0.0),
    ("exact-nor-one", {"operator": "NOR", "keywords": ["spam", "scam"]}, "this is spam", False, 1.0),
    ("case-insensitive-default", {"keywords": ["Python"]}, "i write PYTHON", True, 1.0),
    ("case-sensitive", {"keywords": ["Python"], "case_sensitive": True}, "i write PYTHON", False, 0.0),
    ("cjk-no-boundary", {"keywords": ["数据库"]}, "我的数据库很慢", True, 1.0),
    ("cjk-mixed", {"keywords": ["python"]}, "我用Python写代码", True, 1.0),
    ("emoji-text", {"keywords": ["deploy"]}, "🚀 deploy now 🚀", True, 1.0),
    ("emoji-keyword", {"keywords": ["🚀"]}, "launch 🚀🚀", True, 2.0),
    ("empty-text", {"keywords": ["x"]}, "", False, 0.0),
    ("empty-text-nor", {"operator": "NOR", "keywords": ["x"]}, "", True, 0.0),
    ("megabyte", {"keywords": ["dolor"]}, MEGABYTE, True, float(MEGABYTE.count("dolor"))),
    ("count-gte", {"keywords": [r"\?"], "method": "regex", "count": {"gte": 3}}, "a? b? c?", True, 3.0),
    ("count-short", {"keywords": [r"\?"], "method": "regex", "count": {"gte": 3}}, "a? b?", False, 2.0),
    ("count-literal", {"keywords": ["step"], "count": {"eq": 2}}, "step one, step two", True, 2.0),
    # A punctuation keyword has no word edge to check: every "!" counts (issue 10).
    ("count-punctuation", {"keywords": ["!"], "count": {"gte": 3}}, "What a day!!! Really!", True, 4.0),
    ("density-gt", {"keywords": ["json"], "density": {"gt": 50}}, "json json", True, 1000 * 2 / 9),
    ("density-low", {"keywords": ["json"], "density": {"gt": 50}}, "json " + "x" * 995, False, 1.0),
    ("regex-or", {"method": "regex", "keywords": [r"\d+\s*\+\s*\d+", "integral"]}, "what is 2 + 3", True, 1.0),
    ("regex-case-insensitive", {"method": "regex", "keywords": ["hello"]}, "HELLO", True, 1.0),
    ("regex-and", {"method": "regex", "operator": "AND", "keywords": [r"\bfoo\b", r"\bbar\b"]}, "foo bar", True, 2.0),
    ("regex-nor", {"method": "regex", "operator": "NOR", "keywords": [r"\bfoo\b"]}, "food", True, 0.0),
    # BM25 over the rule's keywords as documents: with rank-bm25's idf a term in half of
    # them or more weighs nothing, so a bm25 rule wants three keywords or more.
    ("bm25-hit", {"method": "bm25", "keywords": ["sql query", "join tables", "database index"], "bm25_threshold": 0.1},
     "how do I speed up this sql query", True, None),
    ("bm25-miss", {"method": "bm25", "keywords": ["sql query", "join tables", "database index"], "bm25_threshold": 0.1},
     "write a poem", False, 0.0),
    ("ngram-typo", {"method": "ngram", "keywords": ["emergency"], "ngram_threshold": 0.4}, "this is an emergancy", True, None),
    ("ngram-far", {"method": "ngram", "keywords": ["emergency"], "ngram_threshold": 0.4}, "quiet afternoon", False, None),
    ("fuzzy-within", {"method": "fuzzy", "keywords": ["kubernetes"], "fuzzy_threshold": 2}, "my kubernets cluster", True, 1.0),
    ("fuzzy-beyond", {"method": "fuzzy", "keywords": ["kubernetes"], "fuzzy_threshold": 1}, "my kubrnets cluster", False, 0.0),
    ("fuzzy-multiword", {"method": "fuzzy", "keywords": ["stack trace"], "fuzzy_threshold": 1}, "here is a stak trace", True, 1.0),
]


@pytest.mark.parametrize("fields, text, matched, value", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_methods_operators_and_predicates(fields, text, matched, value):
    out = outcome(rule(**fields), text)
    assert out.matched is matched
    if value is not None:
        assert out.value == pytest.approx(value)
    assert out.detail


def test_include_history_reads_earlier_user_turns():
    r = rule(keywords=["invoice"])
    assert outcome(r, "about my invoice", "and the date?").matched is False
    with_history = rule(keywords=["invoice"], include_history=True)
    assert outcome(with_history, "about my invoice", "and the date?").matched is True


def test_ngram_and_bm25_confidences_are_graded():
    close = outcome(rule(method="ngram", keywords=["emergency"], ngram_threshold=0.3), "emergancy")
    far = outcome(rule(method="ngram", keywords=["emergency"], ngram_threshold=0.3), "energy")
    assert 0 < far.confidence < close.confidence <= 1
    bm = outcome(rule(method="bm25", keywords=["sql query", "join tables", "database index"], bm25_threshold=0.0),
                 "sql query sql query")
    assert 0 < bm.confidence < 1


@pytest.mark.parametrize("fields, line", [
    ({"method": "regex", "keywords": ["ok", "(bad"]},
     f"{PATH}[k].keywords[1]: invalid_value: invalid regex '(bad': missing ), unterminated subpattern at position 0"),
    ({"keywords": ["a"], "count": {"gte": 1}, "density": {"gt": 1}}, f"{PATH}[k]: invalid_value: set count or density, not both"),
    ({"method": "bm25", "keywords": ["a"], "count": {"gte": 1}},
     f"{PATH}[k]: invalid_value: count and density need operator: OR over literal or regex keywords"),
    ({"method": "ngram", "keywords": ["a"], "ngram_arity": 4},
     f"{PATH}[k].ngram_arity: invalid_value: only character trigrams (3) are served"),
    ({"keywords": [""]}, f"{PATH}[k].keywords[0]: invalid_value: an empty keyword matches nothing"),
])
def test_load_errors_name_the_rule(fields, line):
    errors = CompileErrors()
    keywords.compile([rule(**fields)], PATH, errors)
    assert errors.lines == [line]
