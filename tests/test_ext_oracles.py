"""Independent oracles for the keyword kernels: tables computed by hand from the contract.

The parity tests (test_ext_keywords.py) check the C kernels against the pure-Python
reference; a rule both got wrong in the same way would pass there. Here every expected
value was worked out by hand from the contract in ``keywords.pyi`` (and the Unicode
blocks for the CJK ranges), and both the kernel and the reference must give it.
"""
from __future__ import annotations

import pytest

from vsr_fast._ext import _reference as ref
from vsr_fast._ext import bm25
from vsr_fast._ext import keywords as kw

# --- which code points are CJK ------------------------------------------------------------------
#
# CJK here means: a script written without spaces between words, where each character stands
# alone as a word. Hangul, kana, bopomofo and the ideographs are in; CJK punctuation, symbols,
# radicals, strokes, enclosed forms, fullwidth Latin, Yi, Tangut and Nushu are out.

CJK_CODE_POINTS = [
    (0x10FF, False, "Georgian, before Hangul Jamo"),
    (0x1100, True, "Hangul Jamo: first"),
    (0x11FF, True, "Hangul Jamo: last"),
    (0x1200, False, "Ethiopic"),
    (0x3000, False, "ideographic space"),
    (0x3001, False, "ideographic comma"),
    (0x3004, False, "Japanese Industrial Standard symbol"),
    (0x3005, True, "ideographic iteration mark 々"),
    (0x3006, True, "ideographic closing mark 〆"),
    (0x3007, True, "ideographic number zero 〇"),
    (0x3008, False, "left angle bracket 〈"),
    (0x3021, False, "Hangzhou numeral one 〡 (alphanumeric, not CJK)"),
    (0x303F, False, "ideographic half fill space"),
    (0x3041, True, "hiragana small a ぁ"),
    (0x3099, True, "combining kana voiced mark: inside the Hiragana block"),
    (0x30A2, True, "katakana a ア"),
    (0x30FB, True, "katakana middle dot ・: punctuation inside the Katakana block"),
    (0x30FC, True, "prolonged sound mark ー"),
    (0x30FF, True, "katakana digraph koto: last of Katakana"),
    (0x3105, True, "bopomofo b ㄅ"),
    (0x3131, True, "Hangul compatibility jamo ㄱ"),
    (0x318F, True, "Hangul compatibility jamo: last"),
    (0x3190, False, "Kanbun ㆐"),
    (0x3192, False, "Kanbun numeral ㆒ (alphanumeric, not CJK)"),
    (0x31A0, True, "Bopomofo Extended: first"),
    (0x31C0, False, "CJK strokes"),
    (0x31F0, True, "katakana phonetic extension ㇰ"),
    (0x31FF, True, "katakana phonetic extension: last"),
    (0x3200, False, "Enclosed CJK letters"),
    (0x3251, False, "circled number 21 ㉑ (alphanumeric, not CJK)"),
    (0x33FF, False, "CJK Compatibility: last"),
    (0x3400, True, "CJK Extension A: first 㐀"),
    (0x4DBF, True, "CJK Extension A: last"),
    (0x4DC0, False, "Yijing hexagram"),
    (0x4E00, True, "一: first unified ideograph"),
    (0x5317, True, "北"),
    (0x9FFF, True, "last of the unified ideographs block"),
    (0xA000, False, "Yi syllable"),
    (0xA960, True, "Hangul Jamo Extended-A: first"),
    (0xA97F, True, "Hangul Jamo Extended-A: last"),
    (0xA980, False, "Javanese"),
    (0xAC00, True, "Hangul syllable 가"),
    (0xD7A3, True, "Hangul syllable 힣: the last"),
    (0xD7FF, True, "Hangul Jamo Extended-B: last"),
    (0xE000, False, "private use"),
    (0xF900, True, "CJK compatibility ideograph 豈"),
    (0xFAFF, True, "CJK Compatibility Ideographs: last"),
    (0xFB00, False, "Latin ligature ﬀ"),
    (0xFE0F, False, "variation selector 16"),
    (0xFF21, False, "fullwidth Latin Ａ"),
    (0xFF65, False, "halfwidth katakana middle dot ･"),
    (0xFF66, True, "halfwidth katakana wo ｦ"),
    (0xFF70, True, "halfwidth prolonged sound mark ｰ"),
    (0xFF9F, True, "halfwidth semi-voiced mark"),
    (0xFFA0, True, "halfwidth Hangul filler"),
    (0xFFDC, True, "halfwidth Hangul eu: last"),
    (0xFFDD, False, "unassigned, past halfwidth Hangul"),
    (0x1AFFF, False, "before the Kana Supplement"),
    (0x1B000, True, "Kana Supplement: first"),
    (0x1B16F, True, "Small Kana Extension: last"),
    (0x1B170, False, "Nushu"),
    (0x1F600, False, "emoji 😀"),
    (0x20000, True, "CJK Extension B: first 𠀀"),
    (0x2A6DF, True, "CJK Extension B: last"),
    (0x2EBF0, True, "CJK Extension I"),
    (0x2F800, True, "CJK Compatibility Ideographs Supplement"),
    (0x30000, True, "CJK Extension G: first"),
    (0x323AF, True, "CJK Extension H: last"),
    (0x323B0, False, "past Extension H"),
    (0xE0100, False, "variation selector 17"),
]


def in_ranges(ranges, cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in ranges)


@pytest.mark.parametrize("cp, cjk, what", CJK_CODE_POINTS, ids=[f"U+{cp:04X}" for cp, _, _ in CJK_CODE_POINTS])
def test_cjk_ranges_against_the_unicode_blocks(cp, cjk, what):
    assert in_ranges(kw.CJK_RANGES, cp) is cjk, what
    assert in_ranges(bm25.CJK_RANGES, cp) is cjk, what
    assert ref.is_cjk(chr(cp)) is cjk, what


ALNUM_EDGES = [(cp, cjk, what) for cp, cjk, what in CJK_CODE_POINTS if chr(cp).isalnum()]


@pytest.mark.parametrize("cp, cjk, what", ALNUM_EDGES, ids=[f"U+{cp:04X}" for cp, _, _ in ALNUM_EDGES])
def test_an_alphanumeric_edge_character_blocks_a_boundary_unless_it_is_cjk(cp, cjk, what):
    ch = chr(cp)
    # "ab" right before the character: a word character that is not CJK joins them into one word.
    expected = [1] if cjk else [0]
    assert kw.KeywordMatcher(["ab"]).counts("ab" + ch)[0].tolist() == expected, what
    assert ref.count_keywords("ab" + ch, ["ab"])[0] == expected, what
    # Doubled, a CJK character is two words (one matches the keyword exactly); any other is one word
    # of two characters, one edit from the keyword.
    distance = [0] if cjk else [1]
    assert kw.FuzzyMatcher([ch], 1).distances(ch + ch).tolist() == distance, what
    assert ref.fuzzy_distances(ch + ch, [ch], 1) == distance, what


# --- trigram similarity -------------------------------------------------------------------------
#
# Each expected value is |A & B| / |A | B| over the sets of character trigrams, worked by hand;
# the comment lists the grams. A span shorter than 3 characters is its own single gram.

NGRAM_CASES = [
    # (text, keyword, case_sensitive, expected, how)
    ("hallo", "hello", False, 1 / 5, "hel ell llo | hal all llo: {llo} of 5"),
    ("nacht", "night", False, 0.0, "nig igh ght | nac ach cht: none"),
    ("ab", "ab", False, 1.0, "short: {ab} | {ab}"),
    ("abc", "ab", False, 0.0, "{ab} | {abc}"),
    ("I love new yrok city", "new york", False, 1 / 3,
     "two-word spans; 'new yrok': new, 'ew ', 'w y' shared of 9"),
    ("send an e mail", "e-mail", False, 1 / 3, "'e-mail' is two words; 'e mail': mai ail shared of 6"),
    ("a cat.", "--cat!!", False, 1.0, "a keyword's non-word ends are ignored: 'cat'"),
    ("Straße", "STRASSE", False, 2 / 7, "ß folds to itself: str tra ras ass sse | str tra raß aße"),
    ("ΣΟΦΙΑΣ", "σοφιας", False, 1.0, "Σ and final ς both fold to σ"),
    ("我在北京大字读书", "北京大学", False, 1 / 3, "CJK: one word a character; '北京大字': 北京大 of 3"),
    ("ok!", "😀", False, 0.0, "an emoji is no word: the keyword has none"),
    ("ok!", "ok😀", False, 1.0, "the keyword's words: 'ok'"),
    ("nai\u0308ve", "naive", False, 1 / 3, "a combining mark splits 'nai' from 've': {nai} | nai aiv ive"),
    ("nai\u0308ve", "na\u00efve", False, 0.0, "precomposed ï: naï aïv ïve share nothing with 'nai' or 've'"),
    ("nai\u0308ve", "nai ve", False, 1 / 7, "two words, span 'nai\u0308ve' (the mark inside): only 'nai' shared"),
    ("서울에서", "서울", False, 1.0, "Hangul: each syllable a word; the span '서울' exactly"),
    ("ＡＢＣ", "abc", False, 0.0, "fullwidth Latin is not CJK and folds to fullwidth: 'ａｂｃ' | 'abc'"),
    ("ab", "AB", True, 0.0, "case-sensitive"),
    ("aaa", "aaaa", False, 1.0, "sets, not counts: {aaa} | {aaa}"),
    ("baba", "abab", False, 1.0, "aba bab | bab aba"),
]


@pytest.mark.parametrize("text, keyword, case_sensitive, expected, how", NGRAM_CASES,
                         ids=[f"{c[1]}~{c[0]}" for c in NGRAM_CASES])
def test_trigram_similarity_table(text, keyword, case_sensitive, expected, how):
    assert kw.NgramMatcher([keyword], 0.5, case_sensitive=case_sensitive).best(text).tolist() == [expected], how
    assert kw.NgramMatcher([keyword], 0.5, case_sensitive=case_sensitive).best(text.encode()).tolist() == [expected]
    assert ref.ngram_best(text, [keyword], case_sensitive) == [expected], how


# --- fuzzy words --------------------------------------------------------------------------------
#
# Levenshtein distance in code points, worked by hand against each span of as many words.

FUZZY_CASES = [
    # (text, keyword, max_distance, case_sensitive, expected, how)
    ("plese", "please", 2, False, 1, "insert a"),
    ("reciept", "receipt", 2, False, 2, "a swap is two edits"),
    ("sitting", "kitten", 3, False, 3, "k->s, e->i, insert g"),
    ("sitting", "kitten", 2, False, -1, "over the limit"),
    ("New Yrok", "new york", 2, False, 2, "folded; 'yrok' -> 'york' is two substitutions"),
    ("nai\u0308ve", "na\u00efve", 3, False, 3, "spans 'nai' and 've' (the mark splits): three edits either way"),
    ("nai\u0308ve", "na\u00efve", 2, False, -1, "so not within two"),
    ("naive", "na\u00efve", 1, False, 1, "ï is one code point: one substitution, not two bytes"),
    ("北京大字", "北京大学", 1, False, 1, "four CJK words, one substitution"),
    ("o😀k", "😀", 3, False, -1, "an emoji keyword has no words"),
    ("o😀k", "ok", 1, False, 1, "the emoji splits 'o' from 'k': one word of one letter, one insert"),
    ("hello", "HELLO", 5, True, 5, "case-sensitive: five substitutions"),
    ("\U00020000\U00020002", "\U00020000\U00020001", 1, False, 1, "astral CJK: code points, not surrogates"),
    ("\u212aELVIN", "kelvin", 0, False, 0, "the Kelvin sign folds to k"),
    ("a-b", "ab", 1, False, 1, "'a' and 'b' are words: 'ab' is one insert from either"),
    ("a-b", "a b", 1, False, 1, "two words: span 'a-b' vs 'a b', one substitution"),
    ("straße", "strasse", 2, False, 2, "ß stays ß: 'sse' -> 'ße' is a substitution and a deletion"),
]


@pytest.mark.parametrize("text, keyword, max_distance, case_sensitive, expected, how", FUZZY_CASES,
                         ids=[f"{c[1]}~{c[0]}/{c[2]}" for c in FUZZY_CASES])
def test_fuzzy_distance_table(text, keyword, max_distance, case_sensitive, expected, how):
    matcher = kw.FuzzyMatcher([keyword], max_distance, case_sensitive=case_sensitive)
    assert matcher.distances(text).tolist() == [expected], how
    assert matcher.distances(text.encode()).tolist() == [expected], how
    assert ref.fuzzy_distances(text, [keyword], max_distance, case_sensitive) == [expected], how
