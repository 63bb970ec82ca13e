"""Where a word of a text ends, across scripts: the pii rule's spans, the values masking replaces and the
placeholders unmasking restores agree on it.

A script that spaces its words ends a word where a word character (``re``'s Unicode ``\\w``) stops. Scripts
written without spaces between words (Thai, Lao, Myanmar, Khmer, Hangul, CJK, kana, bopomofo) have no such
end: each of their letters is a boundary, so "メールはyamada@example.jpまで" holds an address and "EMAIL_1まで" a
placeholder. ``re``'s ``\\w`` holds those letters, and a boundary check with it read them as one word.
"""
from __future__ import annotations

# Letters of scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, Hangul, CJK radicals,
# kana, bopomofo, CJK ideographs (and extensions), halfwidth katakana.
UNSPACED = ("\u0E00-\u0EFF\u1000-\u109F\u1100-\u11FF\u1780-\u17FF\u2E80-\u2FDF\u3040-\u30FF\u3100-\u31FF"
            "\u3400-\u4DBF\u4E00-\u9FFF\uA960-\uA97F\uAC00-\uD7FF\uF900-\uFAFF\uFF66-\uFF9F\U00020000-\U0003FFFF")
# One word character of a spaced script (a regex class): what a word may not start right after nor end right
# before.
WORD = f"[^\\W{UNSPACED}]"

__all__ = ["UNSPACED", "WORD"]
