"""vsr_fast._ext.keywords: counts, density, trigram and fuzzy matches equal the
pure-Python reference's, on text with CJK, emoji, combining marks and mixed case."""


import pytest

from .stubs import assert_surface_is_the_stub
from hypothesis import given, settings
from hypothesis import strategies as st

from vsr_fast._ext import _reference as ref
from vsr_fast._ext import keywords as kw

MODULE = kw

POOL = [
    "urgent", "ASAP", "new york", "York", "c++", "-flag", "a", "aa", "e-mail", "naïve",
    "北京", "哈哈", "天安门", "서울", "東京タワー", "😀", "ok😀", "straße", "STRASSE", "σοφια",
    "ΣΟΦΙΑΣ", "kelvin", "stop", "İstanbul", "ﬁle", "snake_case", "x2", "Ꮳꮳ",
]
PIECES = st.one_of(
    st.sampled_from(POOL),
    st.sampled_from([" ", "  ", ", ", "-", "_", "\n", "。", "的", "1", "x", "é", "\u0301", "😀", "K", "ſ", "Σ", "ς"]),
    st.text(st.characters(codec="utf-8"), max_size=4),
)
CASE = st.sampled_from([str, str.upper, str.lower, str.title, str.swapcase])
TEXT = st.lists(st.tuples(PIECES, CASE), max_size=40).map(lambda parts: "".join(f(p) for p, f in parts))
KEYWORDS = st.lists(st.one_of(st.sampled_from(POOL), st.text(st.characters(codec="utf-8"), min_size=1, max_size=4)),
                    max_size=12)


@st.composite
def text_and_keywords(draw):
    """Keywords, and a text made largely of them (in any case) and of separators."""
    keywords = draw(KEYWORDS)
    pieces = PIECES if not keywords else st.one_of(PIECES, st.sampled_from(keywords), st.sampled_from(keywords))
    parts = draw(st.lists(st.tuples(pieces, CASE), max_size=40))
    return "".join(f(p) for p, f in parts), keywords


# ------------------------------------------------------------------ case folding

def test_fold_case_matches_reference_on_every_code_point():
    everything = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    expected = "".join(ref.fold_char(ch) for ch in everything)
    assert kw.fold_case(everything) == expected  # one code point to one, everywhere
    assert ref.fold_case(everything) == expected


@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_fold_case_matches_reference(text):
    assert kw.fold_case(text) == ref.fold_case(text) == "".join(map(ref.fold_char, text))


def test_fold_case_table():
    assert kw.fold_case("HeLLo ΣΟΦΙΑΣ ς ß ẞ İ \u212a ſ Ꮳ ꮳ ǅ") == "hello σοφιασ σ ß ß İ k s Ꮳ Ꮳ ǆ"


# ------------------------------------------------------------------ literal keywords

@settings(max_examples=400, deadline=None)
@given(text_and_keywords(), st.booleans())
def test_counts_match_reference(text_keywords, case_sensitive):
    text, keywords = text_keywords
    counts, total = kw.KeywordMatcher(keywords, case_sensitive=case_sensitive).counts(text)
    expected, expected_total = ref.count_keywords(text, keywords, case_sensitive)
    assert counts.tolist() == expected and total == expected_total
    # UTF-8 bytes in, the same answer.
    assert kw.count_keywords(text.encode(), keywords, case_sensitive=case_sensitive)[0].tolist() == expected
    matcher = kw.KeywordMatcher(keywords, case_sensitive=case_sensitive)
    assert matcher.density(text) == ref.density(expected_total, len(text)) == matcher.density(text.encode())


@pytest.mark.parametrize(
    ("text", "keywords", "case_sensitive", "counts"),
    [
        ("", ["a"], False, [0]),
        ("anything", [], False, []),
        # Word boundaries: not inside words, '_' is a word character, punctuation is not.
        ("Hello world, HELLO-world! helloworld hello_x", ["hello", "world"], False, [2, 2]),
        ("Hello hello", ["hello"], True, [1]),
        ("NEW YORK, new  york, New York", ["new york", "york"], False, [2, 3]),
        # Non-overlapping, leftmost first, per keyword (as str.count).
        ("哈哈哈哈哈", ["哈哈", "哈"], False, [2, 5]),
        ("aa aa aaa", ["aa"], False, [2]),
        # CJK keywords have no boundary check; CJK never blocks a Latin one.
        ("我爱北京天安门。北京的", ["北京", "天安门"], False, [2, 1]),
        ("我用Python写代码", ["python"], False, [1]),
        ("서울에서 서울", ["서울"], False, [2]),
        # Boundaries only at a keyword's edges that are word characters: punctuation,
        # symbols and emoji at an edge cut no word, so they match wherever they occur.
        ("What a day!!! Really!", ["!"], False, [4]),
        ("What a day!!! Really!", ["!!"], False, [1]),
        ("why? ok?? ?", ["?"], False, [4]),
        ("ok😀 ok😀ok 😀😀", ["ok😀", "😀"], False, [2, 4]),
        ("🙂🙂 ok🙂", ["🙂"], False, [3]),
        # "c" is checked before, "++" after is not: abc++ no, c++11 yes.
        ("use c++, not c+++ abc++ c++11", ["c++"], False, [3]),
        ("C# and c#, AC# c#sharp", ["C#"], False, [3]),
        ("C# c#", ["C#"], True, [1]),
        # "." is not checked before, "T" is after: ASP.NET yes, .NETwork no.
        ("ASP.NET .net .NETwork", [".NET"], False, [2]),
        ("a-flag b -flag -flags", ["-flag"], False, [2]),
        # Folding beyond ASCII: final sigma, Kelvin sign and long s shift byte lengths.
        ("ΣΟΦΙΑΣ σοφιας ΣΟΦΙΑς", ["σοφιας"], False, [3]),
        ("\u212aELVIN kelvin \u017ftop STOP", ["kelvin", "stop"], False, [2, 2]),
        ("naïve NAÏVE nai\u0308ve", ["naïve"], False, [2]),
    ],
)
def test_counts_table(text, keywords, case_sensitive, counts):
    got, total = kw.KeywordMatcher(keywords, case_sensitive=case_sensitive).counts(text)
    assert got.tolist() == counts and total == sum(counts)
    assert ref.count_keywords(text, keywords, case_sensitive) == (counts, sum(counts))


def test_counts_one_megabyte_text():
    unit = "Urgent: ship the router ASAP! 北京 new York 😀 naïve e-mail urgently "
    text = (unit * (2**20 // len(unit.encode()) + 1))[: 2**20]
    keywords = ["urgent", "asap", "北京", "new york", "e-mail", "router", "naïve", "absent"]
    got, total = kw.KeywordMatcher(keywords).counts(text)
    expected, expected_total = ref.count_keywords(text, keywords)
    assert got.tolist() == expected and total == expected_total
    assert expected[0] > 10_000 and expected[-1] == 0


def test_duplicate_keywords_count_separately():
    got, total = kw.KeywordMatcher(["ok", "OK", "ok"]).counts("ok OK")
    assert got.tolist() == [2, 2, 2] and total == 6


def test_invalid_utf8_bytes_do_not_break_the_scan():
    junk = b"\xff urgent \x80\x80 urgent\xe4\xb8 \xf0\x9f urgent"
    got, total = kw.KeywordMatcher(["urgent"]).counts(junk)
    assert got.tolist() == [3]


def test_rejects_bad_keywords_and_text():
    with pytest.raises(ValueError):
        kw.KeywordMatcher(["ok", ""])
    with pytest.raises(TypeError):
        kw.KeywordMatcher([b"bytes"])
    with pytest.raises(TypeError):
        kw.NgramMatcher([b"bytes"], 0.5)
    with pytest.raises(TypeError):
        kw.KeywordMatcher(["ok"]).counts(42)


def test_density_is_matches_per_thousand_characters():
    assert kw.density(3, 1500) == 2.0
    assert kw.density(0, 0) == 0.0 and kw.density(5, 0) == 0.0
    text = "urgent " + "中" * 993  # 1,000 characters, far more bytes
    assert kw.KeywordMatcher(["urgent"]).density(text) == 1.0
    assert kw.KeywordMatcher(["urgent"]).density(text.encode()) == 1.0
    with pytest.raises(ValueError):
        kw.density(-1, 10)


# ------------------------------------------------------------------ trigram similarity

@settings(max_examples=200, deadline=None)
@given(text_and_keywords(), st.floats(0.05, 1.0), st.booleans())
def test_ngram_matches_reference(text_keywords, threshold, case_sensitive):
    text, keywords = text_keywords
    matcher = kw.NgramMatcher(keywords, threshold, case_sensitive=case_sensitive)
    expected = ref.ngram_best(text, keywords, case_sensitive)
    assert matcher.best(text).tolist() == expected  # the same float divisions: exact
    assert matcher.match(text) == ref.ngram_match(text, keywords, threshold, case_sensitive)
    assert kw.ngram_match(text.encode(), keywords, threshold, case_sensitive=case_sensitive) == matcher.match(text)


# A tiny alphabet: spans repeat trigrams within themselves ("aaaa", "abab a"),
# keywords share trigrams with each other, and spans of 1 or 2 characters (one
# gram of their own) sit among longer ones, which is what the sliding window's
# counts must get right.
SMALL_TEXT = st.text(st.sampled_from(list("aaabbA -_.北京")), max_size=120)
SMALL_KEYWORDS = st.lists(st.text(st.sampled_from(list("aabB -北")), min_size=1, max_size=12), max_size=10)


@settings(max_examples=400, deadline=None)
@given(SMALL_TEXT, SMALL_KEYWORDS, st.booleans())
def test_ngram_repeated_trigrams_match_reference(text, keywords, case_sensitive):
    matcher = kw.NgramMatcher(keywords, 0.5, case_sensitive=case_sensitive)
    assert matcher.best(text).tolist() == ref.ngram_best(text, keywords, case_sensitive)
    assert matcher.best(text.encode()).tolist() == ref.ngram_best(text, keywords, case_sensitive)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["ab", "aab", "abab", "ba", "b", "a", "北", "baab"]), min_size=1, max_size=300),
       SMALL_KEYWORDS)
def test_ngram_long_repetitive_text_matches_reference(words, keywords):
    text = " ".join(words)
    assert kw.NgramMatcher(keywords, 0.5).best(text).tolist() == ref.ngram_best(text, keywords)


def test_ngram_table():
    text = "I love Machine Learnin, deep lerning and 北京大学! Cats."
    matcher = kw.NgramMatcher(["machine learning", "deep learning", "北京大学", "cat", "--", "dog"], 0.5)
    best = matcher.best(text)
    # "machine learnin" holds 13 of the 14 trigrams of "machine learning".
    assert best[0] == 13 / 14
    assert best[1] == pytest.approx(ref.ngram_best(text, ["deep learning"])[0])
    assert best[2] == 1.0  # four one-character CJK words, compared as one span
    assert best[3] == 0.5  # "cat" vs "cats": {cat} / {cat, ats}
    assert best[4] == 0.0 and best[5] == 0.0  # no words; no similar word
    assert [k for k, _ in matcher.match(text)] == [0, 1, 2, 3]
    assert kw.NgramMatcher(["AB"], 1.0).best("ab").tolist() == [1.0]  # short: one whole gram
    assert kw.NgramMatcher(["AB"], 1.0, case_sensitive=True).best("ab").tolist() == [0.0]
    assert kw.NgramMatcher([], 0.5).best("text").shape == (0,)


@pytest.mark.parametrize("threshold", [0.0, -0.5, 1.01, float("nan")])
def test_ngram_rejects_bad_threshold(threshold):
    with pytest.raises(ValueError):
        kw.NgramMatcher(["x"], threshold)


# ------------------------------------------------------------------ fuzzy words

@settings(max_examples=200, deadline=None)
@given(text_and_keywords(), st.integers(0, 3), st.booleans())
def test_fuzzy_matches_reference(text_keywords, max_distance, case_sensitive):
    text, keywords = text_keywords
    matcher = kw.FuzzyMatcher(keywords, max_distance, case_sensitive=case_sensitive)
    expected = ref.fuzzy_distances(text, keywords, max_distance, case_sensitive)
    assert matcher.distances(text).tolist() == expected
    assert matcher.match(text) == ref.fuzzy_match(text, keywords, max_distance, case_sensitive)
    assert kw.fuzzy_match(text.encode(), keywords, max_distance, case_sensitive=case_sensitive) == matcher.match(text)


def test_fuzzy_table():
    text = "Plese send the reciept to New Yrok, naive 北京大字 😀"
    keywords = ["please", "receipt", "new york", "naïve", "北京大学", "invoice", "😀"]
    assert kw.FuzzyMatcher(keywords, 2).distances(text).tolist() == [1, 2, 2, 1, 1, -1, -1]
    assert kw.FuzzyMatcher(keywords, 1).match(text) == [(0, 1), (3, 1), (4, 1)]
    # Distances count code points: "naïve" is one substitution from "naive", not two bytes.
    assert kw.FuzzyMatcher(["naïve"], 1).distances("naive").tolist() == [1]
    assert kw.FuzzyMatcher(["HELLO"], 0).distances("hello").tolist() == [0]
    assert kw.FuzzyMatcher(["HELLO"], 4, case_sensitive=True).distances("hello").tolist() == [-1]
    assert kw.FuzzyMatcher([], 1).distances("x").shape == (0,)


def test_fuzzy_rejects_negative_distance():
    with pytest.raises(ValueError):
        kw.FuzzyMatcher(["x"], -1)


def test_ngram_and_fuzzy_on_a_long_text():
    words = ["routing", "latency", "budget", "tokens", "北京", "naïve", "e-mail", "😀"]
    text = " ".join(words[i * 7 % len(words)] for i in range(40_000))  # ~330 KB
    keywords = ["routng", "latncy budget", "e mail", "absent word"]
    assert kw.NgramMatcher(keywords, 0.3).best(text).tolist() == ref.ngram_best(text, keywords)
    assert kw.FuzzyMatcher(keywords, 1).distances(text).tolist() == ref.fuzzy_distances(text, keywords, 1)


def test_public_surface_is_the_stub():
    assert_surface_is_the_stub(MODULE)
