"""vsr_fast._ext.langid: the same answers as py3langid 0.4's LanguageIdentifier(norm_probs=True).

Two comparisons. The kernel evaluates py3langid's formula in double, so it must
equal that formula evaluated in float64 on py3langid's own features (its
visit_counts) almost exactly. py3langid itself computes in float32, so its
probabilities differ from both by its rounding; against py3langid's classify
the tolerance is that rounding, bounded from the size of the sums.
"""

import math
import unicodedata
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from .stubs import assert_surface_is_the_stub
from hypothesis import given, settings
from hypothesis import strategies as st
from py3langid import langid

from vsr_fast._ext import langid as kernel_module
from vsr_fast._ext.langid import LangId
from vsr_fast.signals import language

MODULE = kernel_module

SENTENCES = {
    "en": "The weather was lovely this morning, so we walked to the market and bought fresh bread.",
    "fr": "Le temps était magnifique ce matin, alors nous sommes allés au marché acheter du pain frais.",
    "de": "Das Wetter war heute Morgen herrlich, also sind wir zum Markt gegangen und haben frisches Brot gekauft.",
    "es": "El tiempo era estupendo esta mañana, así que fuimos al mercado y compramos pan recién hecho.",
    "it": "Stamattina il tempo era bellissimo, così siamo andati al mercato a comprare il pane fresco.",
    "pt": "O tempo estava ótimo esta manhã, então fomos ao mercado e compramos pão fresco.",
    "nl": "Het weer was vanochtend heerlijk, dus we liepen naar de markt en kochten vers brood.",
    "sv": "Vädret var underbart i morse, så vi gick till torget och köpte färskt bröd.",
    "pl": "Dziś rano pogoda była piękna, więc poszliśmy na targ i kupiliśmy świeży chleb.",
    "tr": "Bu sabah hava çok güzeldi, bu yüzden pazara yürüdük ve taze ekmek aldık.",
    "vi": "Sáng nay thời tiết rất đẹp, vì vậy chúng tôi đi bộ ra chợ và mua bánh mì tươi.",
    "ru": "Сегодня утром была прекрасная погода, поэтому мы пошли на рынок и купили свежий хлеб.",
    "uk": "Сьогодні вранці була чудова погода, тому ми пішли на ринок і купили свіжий хліб.",
    "el": "Ο καιρός ήταν υπέροχος σήμερα το πρωί, οπότε περπατήσαμε μέχρι την αγορά και αγοράσαμε φρέσκο ψωμί.",
    "ar": "كان الطقس جميلاً هذا الصباح، لذلك مشينا إلى السوق واشترينا خبزاً طازجاً.",
    "he": "מזג האוויר היה נפלא הבוקר, אז הלכנו לשוק וקנינו לחם טרי.",
    "hi": "आज सुबह मौसम बहुत अच्छा था, इसलिए हम बाज़ार गए और ताज़ी रोटी खरीदी।",
    "zh": "今天早上天气很好，所以我们走到市场买了新鲜的面包。",
    "ja": "今朝は天気がとても良かったので、市場まで歩いて焼きたてのパンを買いました。",
    "ko": "오늘 아침 날씨가 정말 좋아서 우리는 시장에 걸어가서 신선한 빵을 샀습니다.",
}

# Code points from the scripts the router sees, with emoji, combining marks (which
# NFC composes) and separators; hypothesis's own characters() for the rest.
RANGES = [
    (0x20, 0x7E), (0xC0, 0x17F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF),
    (0x600, 0x6FF), (0x900, 0x97F), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
    (0x1F300, 0x1F6FF),
]
CHAR = st.one_of(
    *[st.characters(min_codepoint=lo, max_codepoint=hi) for lo, hi in RANGES],
    st.characters(),
    st.sampled_from(list(" \n.,!?-'0123456789")),
)
RANDOM_TEXT = st.text(CHAR, max_size=400)
# Words of real sentences, shuffled and mixed across languages.
WORDS = st.lists(st.sampled_from(" ".join(SENTENCES.values()).split()), max_size=150).map(" ".join)
TEXT = st.one_of(RANDOM_TEXT, RANDOM_TEXT.map(str.upper), WORDS, WORDS.map(str.upper))

F32_EPS = float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module")
def ident():
    return language._identifier()


@pytest.fixture(scope="module")
def kernel(ident):
    return LangId(ident)


def float64_scores(ident, text):
    """py3langid's _decide (norm_probs=True) in float64, on py3langid's own features.

    Also returns the size of the float32 sums py3langid rounds: the largest
    class's sum of |terms|, over the softmax temperature.
    """
    data = ident._encode(text)
    visits = langid.visit_counts(ident.tk_nextmove, ident._rowbase, ident.tk_output, data)
    temperature = math.sqrt(len(data) or 1)
    n = len(ident.nb_classes)
    if visits:
        idx = np.fromiter(visits.keys(), dtype=np.intp)
        weights = np.log1p(np.fromiter(visits.values(), dtype=np.float64))
        # As the kernel reads them: float32 (exact for py3langid's float16 table).
        table = np.asarray(ident.nb_ptc[idx], dtype=np.float32).astype(np.float64)
        pc = np.asarray(ident.nb_pc, dtype=np.float32).astype(np.float64)
        raw = weights @ table + pc
        magnitude = float((weights @ np.abs(table) + np.abs(pc)).max()) / temperature
    else:
        raw, magnitude = np.zeros(n), 0.0
    scores = np.exp((raw - raw.max()) / temperature)
    scores /= scores.sum()
    for i, j in ident._alias_pairs:
        scores[i] += scores[j]
        scores[j] = 0.0
    return scores, magnitude


def assert_matches_py3langid(ident, kernel, text):
    """Scores equal the float64 formula; classify equals py3langid's up to its float32 rounding."""
    exact, magnitude = float64_scores(ident, text)
    got = kernel.scores(text)
    assert got.dtype == np.float64 and got.shape == (len(ident.nb_classes),)
    np.testing.assert_allclose(got, exact, rtol=1e-9, atol=1e-12)

    want_label, want_p = ident.classify(text)
    got_label, got_p = kernel.classify(text)
    # py3langid's logits carry float32 rounding of sums as large as `magnitude`;
    # seen up to ~4 eps * magnitude, allowed 32, and log p moves by at most twice that.
    tol = 64 * F32_EPS * magnitude + 1e-6
    assert abs(math.log(got_p) - math.log(want_p)) <= tol, (text, want_p, got_p)
    if got_label != want_label:
        # Only a near tie may order differently, and then within the same rounding.
        ranked = dict(ident.rank(text))
        assert abs(math.log(ranked[got_label]) - math.log(ranked[want_label])) <= tol, (text, ranked)
    if kernel.min_confidence is None or got_p >= kernel.min_confidence:
        assert got_label == kernel.classes[int(np.argmax(got))]


# --------------------------------------------------------------------------- parity


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_random_text_matches_py3langid(ident, kernel, text):
    assert_matches_py3langid(ident, kernel, text)


@settings(max_examples=100, deadline=None)
@given(st.one_of(TEXT, st.lists(st.sampled_from(list(SENTENCES.values())), max_size=20).map(" ".join)))
def test_portable_loop_matches_py3langid(ident, kernel, text):
    # The loop for CPUs without AVX2/F16C (on this one, only when forced).
    previous = kernel_module._use_f16c(False)
    try:
        assert_matches_py3langid(ident, kernel, text)
    finally:
        kernel_module._use_f16c(previous)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=600))
def test_random_bytes_match_py3langid(ident, kernel, data):
    # py3langid decodes bytes (trimming a cut tail) and walks undecodable ones raw.
    assert_matches_py3langid(ident, kernel, data)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(list(SENTENCES.values())), min_size=1, max_size=60), st.integers(64, 4096))
def test_long_text_matches_py3langid(ident, kernel, sentences, limit):
    # Long enough for the walk to run as several chains (see _walk in langid.pyx).
    text = language.head(" ".join(sentences), limit)
    assert_matches_py3langid(ident, kernel, text)


@pytest.mark.parametrize("code", sorted(SENTENCES))
def test_sentences(ident, kernel, code):
    text = SENTENCES[code]
    for variant in (text, text.lower(), text.upper(), language.head((text + " ") * 100)):
        assert_matches_py3langid(ident, kernel, variant)
        label, p = kernel.classify(variant)
        want_label, want_p = ident.classify(variant)
        assert label == want_label == code
        assert p == pytest.approx(want_p, rel=1e-5)


def test_empty_text_is_uniform_as_in_py3langid(ident, kernel):
    n = len(ident.nb_classes)
    for empty in ("", b""):
        assert_matches_py3langid(ident, kernel, empty)
        label, p = kernel.classify(empty)
        # Every class scores alike, and a label with two columns (sr, uz) sums both:
        # the first of those wins, as in py3langid.
        assert label == ident.classify(empty)[0] == "sr"
        assert p == pytest.approx(2 / n, rel=1e-12)
        scores = kernel.scores(empty)
        expected = np.full(n, 1 / n)
        for i, j in ident._alias_pairs:
            expected[i], expected[j] = 2 / n, 0.0
        np.testing.assert_allclose(scores, expected, rtol=1e-12)


def test_preprocessing_is_py3langid_s(ident, kernel):
    # ALL-CAPS is lowered, mixed case is not; NFC composes; lone surrogates pass.
    pairs = [
        ("BONJOUR TOUT LE MONDE, COMMENT ALLEZ-VOUS ?", "bonjour tout le monde, comment allez-vous ?"),
        ("Cafe\u0301 cre\u0300me brûle\u0301e", unicodedata.normalize("NFC", "Cafe\u0301 cre\u0300me brûle\u0301e")),
    ]
    for text, same in pairs:
        assert kernel.classify(text) == kernel.classify(same)
        assert_matches_py3langid(ident, kernel, text)
    assert kernel.classify("BONJOUR tout") != kernel.classify("bonjour tout")
    for text in ("abc\ud800def", "\udfff", "x" * 100 + "\ud83d" + "y" * 100):
        assert_matches_py3langid(ident, kernel, text)
    french = SENTENCES["fr"].encode()
    assert kernel.classify(french) == kernel.classify(SENTENCES["fr"])
    for data in (french[:-1], french[:-1] + b"\xc3", b"\xff\xfe" + french, french + b"\x80" * 5):
        assert_matches_py3langid(ident, kernel, data)


def test_rejects_what_py3langid_would_not_read(ident, kernel):
    for bad in (None, 42, bytearray(b"abc"), ["a"]):
        with pytest.raises(TypeError):
            kernel.classify(bad)
        with pytest.raises(TypeError):
            kernel.scores(bad)
    raw = langid.LanguageIdentifier(ident.nb_ptc, ident.nb_pc, ident.nb_classes, ident.tk_nextmove,
                                    ident.tk_output, norm_probs=False, tk_row=ident.tk_row)
    with pytest.raises(ValueError, match="norm_probs"):
        LangId(raw)


def test_restricted_languages_and_min_confidence(ident, kernel):
    # A separate identifier over the same arrays, so the shared one stays whole.
    other = langid.LanguageIdentifier(ident.nb_ptc, ident.nb_pc, ident.nb_classes, ident.tk_nextmove,
                                      ident.tk_output, norm_probs=True, min_confidence=0.9,
                                      tk_row=ident.tk_row)
    before = LangId(other)
    other.set_languages(["en", "fr", "de", "sr"])
    restricted = LangId(other)
    assert restricted.classes == tuple(other.nb_classes) and restricted.min_confidence == 0.9
    assert before.classes == tuple(ident.nb_classes)  # built earlier: the full model
    for text in [*SENTENCES.values(), "", "Hallo, wie geht's?", "ok"]:
        assert_matches_py3langid(other, restricted, text)
        assert restricted.classify(text)[0] == other.classify(text)[0]  # "und" below 0.9 included
    assert restricted.classify(SENTENCES["fr"])[0] == "fr"
    assert restricted.classify("") == ("und", pytest.approx(2 / 5))  # en fr de sr sr, alike


def test_threads_share_one_kernel(kernel):
    texts = [language.head((s + " ") * 40) for s in SENTENCES.values()] * 8
    expected = [kernel.classify(t) for t in texts]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(kernel.classify, texts)) == expected


# --------------------------------------------------------------------------- a made-up model


def tiny_identifier(ptc_dtype=np.float16, classes=("aa", "bb", "cc", "aa"), zero_weight=False, **kwargs):
    """A 7-state model whose first byte decides its mode for good.

    Byte "x" first leads to mode A, any other byte to mode B; then byte b leads
    to state (mode, b % 3), which emits feature b % 3 (A) or 3 + b % 3 (B). Not
    an Aho-Corasick automaton: a walk started mid-text from state 0 picks the
    mode from the wrong byte, so the kernel's chained walk must walk again.
    """
    row0 = [4 + b % 3 for b in range(256)]
    row0[ord("x")] = 1 + ord("x") % 3
    row_a = [1 + b % 3 for b in range(256)]
    row_b = [4 + b % 3 for b in range(256)]
    from array import array

    nextmove = array("I", row0 + row_a + row_b)
    tk_row = array("H", [0, 1, 1, 1, 2, 2, 2])
    output = [-1, 0, 1, 2, 3, 4, 5]
    rng = np.random.default_rng(7)
    ptc = np.log(rng.dirichlet(np.ones(6), size=len(classes)).T).astype(ptc_dtype)
    if zero_weight:
        ptc[2, 1] = 0.0  # not a normal float16: the kernel reads this table as float32
    pc = np.log(np.full(len(classes), 1 / len(classes))).astype(np.float32)
    return langid.LanguageIdentifier(ptc, pc, list(classes), nextmove, output, norm_probs=True,
                                     tk_row=tk_row, **kwargs)


TINY_TEXT = st.text(st.sampled_from("xyzab\u00e9"), max_size=1500)


@pytest.mark.parametrize(
    "options", [{}, {"zero_weight": True}, {"ptc_dtype": np.float32}, {"ptc_dtype": np.float64}],
    ids=["float16", "float16-with-zero", "float32", "float64"],
)
@settings(max_examples=60, deadline=None)
@given(text=TINY_TEXT)
def test_made_up_model_matches_py3langid(options, text):
    ident = tiny_identifier(**options)
    assert_matches_py3langid(ident, LangId(ident), text)


def test_made_up_model_walks_chunks_again():
    ident = tiny_identifier()
    kernel = LangId(ident)
    # Every chunk after the first starts in the wrong mode, at every chain count.
    for n in (63, 64, 128, 255, 256, 1000, 4096):
        for text in ("x" + "y" * n, "y" * n, ("xyzab" * n)[:n], "x" + "ab" * n):
            assert_matches_py3langid(ident, kernel, text)
    assert kernel.classify("")[0] == "aa"  # alias columns 0 and 3 sum


def test_inconsistent_model_is_refused():
    good = tiny_identifier()
    cases = {
        "tk_row": dict(tk_row=[0, 1, 1, 1, 2, 2, 3]),
        "tk_nextmove": dict(tk_nextmove=list(good.tk_nextmove[:-1]) + [7]),
        "tk_output": dict(tk_output=[-1, 0, 1, 2, 3, 4, 6]),
        "nb_ptc": dict(nb_ptc=good.nb_ptc[:, :3]),
    }
    for what, change in cases.items():
        fields = dict(nb_ptc=good.nb_ptc, nb_pc=good.nb_pc, nb_classes=good.nb_classes,
                      tk_nextmove=good.tk_nextmove, tk_output=good.tk_output, tk_row=good.tk_row)
        fields.update(change)
        bad = langid.LanguageIdentifier(norm_probs=True, **fields)
        with pytest.raises(ValueError):
            LangId(bad)


# --------------------------------------------------------------------------- the signal


@pytest.mark.parametrize("code", sorted(SENTENCES))
def test_language_signal_answers_as_py3langid(ident, code):
    text = SENTENCES[code] + " " + SENTENCES[code].upper()
    found = language.detect(text)
    want_code, want_p = ident.classify(text.lower())
    assert found.code == want_code == code
    assert found.p == pytest.approx(want_p, rel=1e-5)


def test_public_surface_is_the_stub():
    assert_surface_is_the_stub(MODULE)
