"""Pure-Python references for the C kernels in vsr_fast._ext.

Used only by the parity tests (tests/test_ext_*.py) and by bench/kernels.py;
the router never imports this module. Each function is the plain, obviously
correct version of a kernel with the same contract, written as the best honest
pure-Python code for the job (regex and str methods where they are fastest,
rank_bm25 itself for BM25), so the benchmark's ratios compare like with like.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from rank_bm25 import BM25Okapi

# ------------------------------------------------------------------ shared Unicode rules

CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x1100, 0x11FF),
    (0x3005, 0x3007),
    (0x3040, 0x30FF),
    (0x3100, 0x312F),
    (0x3130, 0x318F),
    (0x31A0, 0x31BF),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xA960, 0xA97F),
    (0xAC00, 0xD7FF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFFDC),
    (0x1B000, 0x1B16F),
    (0x20000, 0x323AF),
)
_CJK_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in CJK_RANGES)


def is_cjk(ch: str) -> bool:
    """ch lies in one of CJK_RANGES."""
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def fold_char(ch: str) -> str:
    """The fold of one character: casefold() if one character, else lower() if one, else ch."""
    folded = ch.casefold()
    if len(folded) == 1:
        return folded
    lowered = ch.lower()
    return lowered if len(lowered) == 1 else ch


@functools.cache
def _fold_tables() -> tuple[dict[int, str], re.Pattern[str]]:
    """The fold of every character it changes, and a regex for the characters on
    which str.lower() disagrees with it (plus Σ, which lower() reads in context)."""
    table: dict[int, str] = {}
    special = ["\u03a3"]
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        if ch.lower() == ch and ch.casefold() == ch:
            continue
        folded = fold_char(ch)
        if folded != ch:
            table[cp] = folded
        if folded != ch.lower():
            special.append(ch)
    return table, re.compile("[" + "".join(re.escape(ch) for ch in special) + "]")


def fold_case(text: str) -> str:
    """fold_char over the text; str.lower() when that gives the same, as it mostly does."""
    if text.isascii():
        return text.lower()
    table, special = _fold_tables()
    if special.search(text) is None:
        return text.lower()
    return text.translate(table)


# ------------------------------------------------------------------ windows

def _cont(data: bytes, i: int) -> bool:
    return data[i] & 0xC0 == 0x80


def byte_windows(data: bytes, size: int, overlap: int) -> list[tuple[int, int]]:
    """[start, end) windows of at most `size` bytes cut at code-point boundaries."""
    if size < 1 or not 0 <= overlap < size:
        raise ValueError("need size >= 1 and 0 <= overlap < size")
    n = len(data)
    windows: list[tuple[int, int]] = []
    start = 0
    while n:
        if n - start <= size:
            end = n
        else:
            end = start + size
            while end > start and _cont(data, end):
                end -= 1
            if end == start:  # one code point longer than size: a window of its own
                end = start + 1
                while end < n and _cont(data, end):
                    end += 1
        windows.append((start, end))
        if end == n:
            break
        nxt = end - overlap
        while nxt > start and _cont(data, nxt):
            nxt -= 1
        char_end = end + 1
        while char_end < n and _cont(data, char_end):
            char_end += 1
        if nxt < char_end - size:  # the next window must hold the character at `end`
            nxt = min(char_end - size, end)
            while nxt < end and _cont(data, nxt):
                nxt += 1
        if nxt <= start:
            nxt = start + 1
            while nxt < end and _cont(data, nxt):
                nxt += 1
        start = nxt
    return windows


def _marker(tokens: int) -> bytes:
    return b"[... %d tokens omitted ...]" % tokens


def routing_view_offsets(data: bytes, budget_bytes: int, head_share: float = 0.25) -> tuple[int, int, int]:
    """(head_end, tail_start, omitted_tokens) of the routing view."""
    if budget_bytes < 64 or not 0.0 <= head_share <= 1.0:
        raise ValueError("need budget_bytes >= 64 and 0 <= head_share <= 1")
    n = len(data)
    if n <= budget_bytes:
        return n, n, 0
    avail = budget_bytes - len(_marker(-(-n // 4)))
    head = int(avail * head_share)
    tail = n - (avail - head)
    while head > 0 and _cont(data, head):
        head -= 1
    while tail < n and _cont(data, tail):
        tail += 1
    return head, tail, -(-(tail - head) // 4)


def routing_view(data: bytes, budget_bytes: int, head_share: float = 0.25) -> bytes:
    """Head and tail of data around the omission marker, within budget_bytes."""
    head, tail, omitted = routing_view_offsets(data, budget_bytes, head_share)
    if not omitted:
        return data
    return b"".join((data[:head], _marker(omitted), data[tail:]))


# ------------------------------------------------------------------ BM25

def tokenize(text: str) -> list[str]:
    """Lowercase; runs of alphanumerics; each alphanumeric CJK character alone."""
    tokens: list[str] = []
    run: list[str] = []
    for ch in text.lower():
        if ch.isalnum() and not is_cjk(ch):
            run.append(ch)
            continue
        if run:
            tokens.append("".join(run))
            run = []
        if ch.isalnum():
            tokens.append(ch)
    if run:
        tokens.append("".join(run))
    return tokens


class BM25Reference:
    """rank_bm25.BM25Okapi behind the kernel's interface."""

    def __init__(self, corpus: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75,
                 epsilon: float = 0.25) -> None:
        self.okapi = BM25Okapi([list(doc) for doc in corpus], k1=k1, b=b, epsilon=epsilon)

    def scores(self, query_tokens: Sequence[str]):
        return self.okapi.get_scores(query_tokens)

    def scores_text(self, text: str):
        """rank_bm25 on the text's tokens, tokenized by the fastest pure-Python way
        (the regex of bm25.tokenize, equal to tokenize() above)."""
        return self.okapi.get_scores(_WORD.findall(text.lower()))

    def top_k(self, query_tokens: Sequence[str], k: int) -> list[tuple[int, float]]:
        scores = self.scores(query_tokens)
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]
        return [(i, float(scores[i])) for i in order]


# ------------------------------------------------------------------ keywords

_WORD_CHAR = re.compile(rf"[^\W{_CJK_CLASS}]")


@functools.cache
def _keyword_regex(keyword: str) -> re.Pattern[str]:
    """keyword, not next to a word character (\\w, a CJK character excepted) at
    those of its edges that are word characters themselves: "c++" is checked
    before its "c" only, and "!" matches wherever it occurs.

    The literal comes first and the look-behind after it, "(?<!W kw)", not
    "(?<!W)kw": a pattern that starts with a literal lets re search for it
    directly, over ten times faster on 32 KB.
    """
    literal = re.escape(keyword)
    word = _WORD_CHAR.pattern
    left = rf"(?<!{word}{literal})" if _WORD_CHAR.match(keyword[0]) else ""
    right = rf"(?!{word})" if _WORD_CHAR.match(keyword[-1]) else ""
    return re.compile(rf"{literal}{left}{right}")


def count_keywords(text: str, keywords: Sequence[str], case_sensitive: bool = False) -> tuple[list[int], int]:
    """Per-keyword counts of non-overlapping matches, bounded at word-character edges, and the total."""
    folded = text if case_sensitive else fold_case(text)
    counts = []
    for keyword in keywords:
        if not keyword:
            raise ValueError("keywords must be non-empty")
        pattern = keyword if case_sensitive else fold_case(keyword)
        if pattern not in folded:  # the cheap test first: most keywords are absent
            counts.append(0)
            continue
        if any(is_cjk(ch) for ch in keyword):  # no boundary check: str.count's own rule
            counts.append(folded.count(pattern))
        else:
            counts.append(len(_keyword_regex(pattern).findall(folded)))
    return counts, sum(counts)


def density(total_matches: int, text_len_chars: int) -> float:
    """Matches per 1,000 characters; 0.0 for empty text."""
    if total_matches < 0 or text_len_chars < 0:
        raise ValueError("counts must be >= 0")
    return total_matches * 1000.0 / text_len_chars if text_len_chars else 0.0


_WORD = re.compile(f"(?:(?=[{_CJK_CLASS}])[^\\W_])|[^\\W_{_CJK_CLASS}]+")


def word_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of each word: a run of alphanumerics, or one alphanumeric CJK character."""
    return [m.span() for m in _WORD.finditer(text)]


def _keyword_span(keyword: str) -> tuple[str, int]:
    """A keyword's text from its first word's start to its last word's end, and its word count."""
    spans = word_spans(keyword)
    if not spans:
        return "", 0
    return keyword[spans[0][0]:spans[-1][1]], len(spans)


def _text_spans(text: str, spans: list[tuple[int, int]], words: int) -> list[str]:
    return [text[spans[i][0]:spans[i + words - 1][1]] for i in range(len(spans) - words + 1)]


def trigrams(s: str) -> set[str]:
    """The character trigrams of s; a string shorter than 3 is its own single gram."""
    if len(s) < 3:
        return {s} if s else set()
    return {s[i:i + 3] for i in range(len(s) - 2)}


def ngram_best(text: str, keywords: Sequence[str], case_sensitive: bool = False) -> list[float]:
    """Each keyword's best Jaccard trigram similarity with a span of as many words."""
    fold = (lambda s: s) if case_sensitive else fold_case
    folded = fold(text)
    spans = word_spans(folded)
    span_grams: dict[int, list[set[str]]] = {}
    best = []
    for keyword in keywords:
        kspan, words = _keyword_span(fold(keyword))
        if words == 0:
            best.append(0.0)
            continue
        if words not in span_grams:
            span_grams[words] = [trigrams(s) for s in _text_spans(folded, spans, words)]
        kgrams = trigrams(kspan)
        best.append(max((len(kgrams & g) / len(kgrams | g) for g in span_grams[words]), default=0.0))
    return best


def ngram_match(text: str, keywords: Sequence[str], threshold: float,
                case_sensitive: bool = False) -> list[tuple[int, float]]:
    """[(keyword_index, similarity)] of keywords whose best similarity >= threshold."""
    best = ngram_best(text, keywords, case_sensitive)
    return [(k, s) for k, s in enumerate(best) if s >= threshold]


def levenshtein(a: str, b: str) -> int:
    """Edit distance in code points (insert, delete, substitute: cost 1 each)."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def fuzzy_distances(text: str, keywords: Sequence[str], max_distance: int,
                    case_sensitive: bool = False) -> list[int]:
    """Each keyword's least distance to a span of as many words if <= max_distance, else -1."""
    fold = (lambda s: s) if case_sensitive else fold_case
    folded = fold(text)
    spans = word_spans(folded)
    result = []
    for keyword in keywords:
        kspan, words = _keyword_span(fold(keyword))
        best = -1
        if words:
            for span in _text_spans(folded, spans, words):
                if abs(len(span) - len(kspan)) > max_distance:
                    continue  # the distance is at least the difference in length
                d = levenshtein(span, kspan)
                if d <= max_distance and (best < 0 or d < best):
                    best = d
                    if d == 0:
                        break
        result.append(best)
    return result


def fuzzy_match(text: str, keywords: Sequence[str], max_distance: int,
                case_sensitive: bool = False) -> list[tuple[int, int]]:
    """[(keyword_index, distance)] of keywords within max_distance of some span."""
    distances = fuzzy_distances(text, keywords, max_distance, case_sensitive)
    return [(k, d) for k, d in enumerate(distances) if d >= 0]


# ------------------------------------------------------------------ JSON nesting

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*("|$)', re.S)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


def nesting_depth(data: bytes, limit: int) -> int:
    """Deepest nesting of arrays and objects outside strings; limit + 1 once past limit."""
    brackets = _JSON_STRING.sub(b"", bytes(data)).translate(None, _NOT_BRACKET)
    depth = deepest = 0
    for b in brackets:
        depth += 1 if b in b"[{" else -1
        deepest = max(deepest, depth)
        if deepest > limit:
            return limit + 1
    return deepest


_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|$)|[\[\]{},]', re.S)
_HEX = frozenset(b"0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = {ord("n"): 10, ord("t"): 9, ord("r"): 13, ord("b"): 8, ord("f"): 12, ord('"'): 34,
                   ord("\\"): 92, ord("/"): 47}


def _hex4(s: bytes, i: int) -> int:
    digits = s[i:i + 4]
    return int(digits, 16) if len(digits) == 4 and all(b in _HEX for b in digits) else -1


def unescape_key(s: bytes) -> bytes:
    """A JSON string's content as UTF-8: a lone surrogate escape as its three bytes, a malformed escape as sent."""
    out = bytearray()
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c != 92 or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = s[i + 1]
        if e == ord("u"):
            cp = _hex4(s, i + 2) if i + 6 <= n else -1
            if cp < 0:
                out.append(c)
                i += 1
                continue
            i += 6
            if 0xD800 <= cp < 0xDC00 and i + 6 <= n and s[i] == 92 and s[i + 1] == ord("u"):
                low = _hex4(s, i + 2)
                if 0xDC00 <= low < 0xE000:
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
            out += chr(cp).encode("utf-8", "surrogatepass")
        elif e in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[e])
            i += 2
        else:
            out.append(c)
            i += 1
    return bytes(out)


def json_shape(data: bytes, depth_limit: int, items_limit: int) -> tuple[int, int, int, int]:
    """(deepest, items, key, repeated): nesting, arrays + objects + commas outside strings, the opening quote of
    the top-level member being read when the scan stopped, and that of the first key its object already has
    (unescaped text compared); it stops once either count passes its limit, or at that key."""
    depth = deepest = items = 0
    key, repeated, expect_key, expect_member = -1, -1, False, False
    levels: dict[int, set[bytes] | None] = {}       # by depth: the open object's keys, None for an array
    data = bytes(data)
    for m in _JSON_TOKEN.finditer(data):
        t = m.group()
        if t in (b"[", b"{"):
            depth += 1
            items += 1
            expect_key = depth == 1 and t == b"{"
            expect_member = t == b"{"
            deepest = max(deepest, depth)
            if deepest > depth_limit or items > items_limit:
                break
            if depth > 0:
                levels[depth] = set() if t == b"{" else None
        elif t in (b"]", b"}"):
            depth -= 1
            expect_member = False
        elif t == b",":
            items += 1
            expect_key = depth == 1
            expect_member = depth > 0 and levels[depth] is not None
            if items > items_limit:
                break
        else:
            if expect_key:
                key, expect_key = m.start(), False
            if expect_member:
                expect_member = False
                if depth > 0 and _closed(t):
                    name = unescape_key(t[1:-1])
                    if name in levels[depth]:
                        repeated = m.start()
                        break
                    levels[depth].add(name)
    return deepest, items, key, repeated


def _closed(token: bytes) -> bool:
    """Whether a string token ends with its closing quote (not an escaped one, nor the end of the text)."""
    if not token.endswith(b'"'):
        return False
    k = len(token) - 1
    while k > 0 and token[k - 1] == 92:
        k -= 1
    return len(token) >= 2 and (len(token) - 1 - k) % 2 == 0


def json_path(data: bytes, offset: int) -> list[int | tuple[int]]:
    """For each array or object ``offset`` is inside, outermost first: the element's index, or (the opening quote
    of the member's key,), -1 before any; a key at ``offset`` is its own member."""
    stack: list[list] = []                 # [is an object, index or key offset]
    expect_key = False
    for m in _JSON_TOKEN.finditer(bytes(data)):
        if m.start() > offset:
            break
        t = m.group()
        if t in (b"[", b"{"):
            stack.append([t == b"{", -1 if t == b"{" else 0])
            expect_key = t == b"{"
        elif t in (b"]", b"}"):
            if stack:
                stack.pop()
            expect_key = False
        elif t == b",":
            if stack:
                expect_key = stack[-1][0]
                if not stack[-1][0]:
                    stack[-1][1] += 1
        else:
            if expect_key and stack:
                stack[-1][1] = m.start()
            expect_key = False
    return [(at,) if obj else at for obj, at in stack]
