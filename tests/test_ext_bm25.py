"""vsr_fast._ext.bm25: scores equal rank_bm25.BM25Okapi's, and the tokenizer's rules."""

import math
import random

import numpy as np
import pytest

from .stubs import assert_surface_is_the_stub
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from vsr_fast._ext import _reference as ref
from vsr_fast._ext import bm25

MODULE = bm25

# A small vocabulary, so tokens repeat across documents and some reach more than
# half of them: the negative-idf epsilon floor is exercised often.
VOCAB = ["the", "a", "router", "model", "路", "由", "😀", "Émile", "x1", "k8s", "ß", "σ"]
DOC = st.lists(st.sampled_from(VOCAB), max_size=12)
CORPUS = st.lists(DOC, min_size=1, max_size=40).filter(lambda c: any(c))
QUERY = st.lists(st.sampled_from(VOCAB + ["unknown", "ROUTER"]), max_size=70)


def assert_scores_equal(corpus, query, **params):
    expected = BM25Okapi(corpus, **params).get_scores(query)
    got = bm25.BM25Index(corpus, **params).scores(query)
    assert got.dtype == np.float64 and got.shape == (len(corpus),)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)


@settings(max_examples=300, deadline=None)
@given(CORPUS, QUERY, st.floats(0.05, 3.0), st.floats(0.0, 0.99), st.floats(0.0, 1.0))
def test_scores_equal_rank_bm25(corpus, query, k1, b, epsilon):
    assert_scores_equal(corpus, query, k1=k1, b=b, epsilon=epsilon)


@settings(max_examples=200, deadline=None)
@given(CORPUS, QUERY, st.integers(0, 50))
def test_top_k_matches_reference(corpus, query, k):
    index = bm25.BM25Index(corpus)
    expected = ref.BM25Reference(corpus).top_k(query, k)
    got = index.top_k(query, k)
    assert [doc for doc, _ in got] == [doc for doc, _ in expected]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], rtol=0, atol=1e-9)


def test_negative_idf_takes_the_epsilon_floor():
    # "common" is in 3 of 4 documents: log(1.5) - log(3.5) < 0, floored at eps * average idf.
    corpus = [["common", "rare"], ["common"], ["common", "other"], ["alone"]]
    index = bm25.BM25Index(corpus, epsilon=0.5)
    okapi = BM25Okapi(corpus, epsilon=0.5)
    assert okapi.idf["common"] == pytest.approx(0.5 * okapi.average_idf)
    assert index.average_idf == okapi.average_idf
    assert_scores_equal(corpus, ["common"], epsilon=0.5)
    assert_scores_equal(corpus, ["common", "rare", "common", "nowhere"], epsilon=0.5)


def test_a_thousand_documents_and_a_long_query():
    rng = random.Random(7)
    words = [f"w{i}" for i in range(2000)]
    weights = [1 / (i + 1) for i in range(2000)]  # Zipf-like, as in prose
    corpus = [rng.choices(words, weights, k=rng.randint(5, 40)) for _ in range(1000)]
    query = rng.choices(words, weights, k=100)  # > 64 tokens: the heap-allocated path
    assert_scores_equal(corpus, query)
    index = bm25.BM25Index(corpus)
    assert index.n_docs == 1000 and index.n_terms == len({t for d in corpus for t in d})
    assert index.avgdl == BM25Okapi(corpus).avgdl
    best = index.top_k(query, 10)
    scores = index.scores(query)
    assert [d for d, _ in best] == sorted(range(1000), key=lambda i: (-scores[i], i))[:10]


def test_empty_corpus_documents_and_queries():
    assert bm25.BM25Index([]).scores(["x"]).shape == (0,)
    assert bm25.BM25Index([]).top_k(["x"], 3) == []
    assert bm25.BM25Index([[], []]).scores(["x"]).tolist() == [0.0, 0.0]
    index = bm25.BM25Index([["a"], [], ["b", "a"]])
    assert index.scores([]).tolist() == [0.0, 0.0, 0.0]
    assert index.top_k(["a"], 0) == []
    assert len(index.top_k(["a"], 99)) == 3
    assert_scores_equal([["a"], [], ["b", "a"]], ["a", "b"])


def test_ties_rank_by_lower_index():
    index = bm25.BM25Index([["x"], ["y"], ["x"], ["z"], ["w"], ["v"]])
    assert [d for d, _ in index.top_k(["x"], 3)] == [0, 2, 1]
    # "x" in 3 of 4 documents: its idf floors at 0.25 * an average idf of 0.
    assert bm25.BM25Index([["x"], ["y"], ["x"], ["x"]]).top_k(["x"], 2) == [(0, 0.0), (1, 0.0)]


@pytest.mark.parametrize("params", [{"k1": -0.1}, {"b": -0.01}, {"b": 1.01}, {"epsilon": math.inf}, {"k1": math.nan}])
def test_rejects_bad_parameters(params):
    with pytest.raises(ValueError):
        bm25.BM25Index([["a"]], **params)


def test_top_k_rejects_negative_k():
    with pytest.raises(ValueError):
        bm25.BM25Index([["a"]]).top_k(["a"], -1)


# ------------------------------------------------------------------ tokenizer

@settings(max_examples=300, deadline=None)
@given(st.text(st.one_of(st.characters(codec="utf-8"), st.sampled_from(list("aZ9_ 中文한국어カナ😀é\u0301İΣ-.,")))))
def test_tokenize_matches_reference(text):
    assert bm25.tokenize(text) == ref.tokenize(text)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", []),
        ("Hello, World!", ["hello", "world"]),
        ("snake_case and kebab-case", ["snake", "case", "and", "kebab", "case"]),
        ("x2 = 3.14", ["x2", "3", "14"]),
        ("北京大学 in 2024", ["北", "京", "大", "学", "in", "2024"]),
        ("我用Python写代码", ["我", "用", "python", "写", "代", "码"]),
        ("한국어 カタカナ", ["한", "국", "어", "カ", "タ", "カ", "ナ"]),
        ("😀👍 ・、。", []),
        ("ÉCOLE naïve", ["école", "naïve"]),
    ],
)
def test_tokenize_table(text, tokens):
    assert bm25.tokenize(text) == tokens
    assert ref.tokenize(text) == tokens


# ------------------------------------------------------------------ scores_text: tokenizing in C

# Text pieces that stress str.lower() and str.isalnum(): CJK, kana, Hangul, digits
# of other scripts, final and non-final sigma (lower() reads Σ in context), İ
# (lowercases to two code points, the second a combining mark), titlecase
# digraphs, Kelvin sign, combining marks, emoji, '_', fullwidth forms, a lone surrogate.
TEXT_PIECES = st.one_of(
    st.sampled_from(VOCAB + ["ROUTER", "Router", "unknown", "MODEL.", "x1_k8s", "ΣΟΦΙΑΣ", "σοφιας", "ΑΣ",
                             "Σ", "İstanbul", "ǅemal", "\u212aelvin", "e\u0301", "ａｂｃ１２", "٣٤", "Ⅻ", "½",
                             "北京大学", "カタカナ", "한국어", "\ud800", "😀👍"]),
    st.sampled_from(list(" \n\t,.;:!?-_()[]'\"/\\。、・")),
    st.text(st.characters(codec="utf-8"), max_size=6),
    st.text(st.characters(min_codepoint=0x370, max_codepoint=0x3FF), max_size=6),  # Greek
    st.text(st.characters(min_codepoint=0x4E00, max_codepoint=0x4E40), max_size=4),
    st.text(st.characters(), max_size=4),  # anything, surrogates included
)
MIXED_CASE = st.sampled_from([str, str.upper, str.lower, str.title, str.swapcase])
TEXT = st.lists(st.tuples(TEXT_PIECES, MIXED_CASE), max_size=30).map(lambda parts: "".join(f(p) for p, f in parts))


# 200 and 200 examples (were 500 and 400, the suite's most): the tokenizer meets every code point in
# test_c_tokenizer_on_every_code_point; these look for the mixes of pieces.
@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_c_tokenizer_matches_tokenize(text):
    assert bm25._c_tokens(text) == bm25.tokenize(text) == ref.tokenize(text)


def test_c_tokenizer_on_every_code_point():
    """Every code point (surrogates too) through lower() and isalnum(): alone, inside
    one long run, and on both sides of a capital sigma, whose lowercase depends on
    whether its neighbours are cased or case-ignorable."""
    everything = [chr(cp) for cp in range(0x110000)]
    for text in (
        " ".join(everything),
        "".join(everything),
        "".join(f"a\u03a3{ch} " for ch in everything),  # Σ after a cased letter: final unless ch is cased
        "".join(f" {ch}\u03a3 " for ch in everything),  # Σ after ch: final only if ch is cased
        "".join(f"a{ch}\u03a3{ch}b " for ch in everything),  # both sides, skipping ch if case-ignorable
    ):
        assert bm25._c_tokens(text) == bm25.tokenize(text)


def assert_scores_text_exact(index, text):
    got = index.scores_text(text)
    expected = index.scores(bm25.tokenize(text))
    assert got.dtype == np.float64 and got.shape == (index.n_docs,)
    assert got.tobytes() == expected.tobytes()  # the same sums in the same order: bit for bit


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=12), TEXT, st.floats(0.05, 3.0), st.floats(0.0, 1.0))
def test_scores_text_equals_scores_of_tokenize(keywords, text, k1, b):
    # As the keyword signal builds it: each keyword's tokens are a document.
    index = bm25.BM25Index([bm25.tokenize(k) for k in keywords], k1=k1, b=b)
    assert_scores_text_exact(index, text)
    # Text made of the keywords themselves, in another case, so most tokens are known.
    assert_scores_text_exact(index, " ".join(k.upper() for k in keywords) + text + "".join(keywords))


@settings(max_examples=200, deadline=None)
@given(CORPUS, st.lists(st.sampled_from(VOCAB + ["ROUTER", "unknown", "Σ", " ", ",", "_", "İ", "ÉMILE"]), max_size=40))
def test_scores_text_on_raw_token_corpora(corpus, pieces):
    # Documents that are not tokenize() output ("Émile" keeps its capital) can
    # only be found by scores() when a query token equals them: never, here too.
    index = bm25.BM25Index(corpus)
    assert_scores_text_exact(index, "".join(pieces))
    assert_scores_text_exact(index, " ".join(pieces))


def test_scores_text_table():
    index = bm25.BM25Index([bm25.tokenize(k) for k in ["machine learning", "北京", "ΣΟΦΙΑΣ", "İ", "x" * 200]])
    for text in ["", "   ", "Machine LEARNING in 北京!", "σοφιας ΣΟΦΙΑΣ ΣΟΦΙΑΣ.", "İ i\u0307 I", "x" * 199,
                 "x" * 200, "X" * 200 + " " + "x" * 201, "machine" * 50, "\ud800learning\udfff"]:
        assert_scores_text_exact(index, text)
    assert index.scores_text("Machine LEARNING").tolist() == index.scores(["machine", "learning"]).tolist()
    # The document is "σοφιας": Σ lowercases to ς only where it ends a word, and
    # '.' (case-ignorable) does not end one where ',' does.
    assert index.scores_text("ΣΟΦΙΑΣ")[2] > 0 and index.scores_text("ΣΟΦΙΑΣ, Α")[2] > 0
    assert index.scores_text("ΣΟΦΙΑΣ.Α")[2] == 0.0 and bm25.tokenize("ΣΟΦΙΑΣ.Α") == ["σοφιασ", "α"]
    assert bm25.BM25Index([]).scores_text("anything").shape == (0,)
    assert bm25.BM25Index([[], []]).scores_text("anything").tolist() == [0.0, 0.0]
    with pytest.raises(TypeError):
        index.scores_text(b"bytes")


def test_scores_text_with_a_large_vocabulary():
    rng = random.Random(11)
    words = [f"w{i}" for i in range(3000)] + ["北", "京", "naïve", "σοφιας", "k8s"]
    corpus = [rng.choices(words, k=rng.randint(1, 8)) for _ in range(500)]
    index = bm25.BM25Index(corpus)
    text = " ".join(rng.choices(words + ["W17", "NAÏVE", "absent", "w", "w3000"], k=2000))
    assert_scores_text_exact(index, text)
    assert_scores_text_exact(index, text.replace(" ", ""))


def test_cjk_ranges_agree_everywhere():
    from vsr_fast._ext import keywords

    assert bm25.CJK_RANGES == keywords.CJK_RANGES == ref.CJK_RANGES


def test_public_surface_is_the_stub():
    assert_surface_is_the_stub(MODULE)
