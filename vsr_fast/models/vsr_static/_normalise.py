"""Compatibility normalisation (NFKC) of the text the model reads, with offsets back to the client's text.

Full-width Latin letters (U+FF01-FF5E), ligatures, circled and mathematical letters and other compatibility
forms read, to the tokenizer, as words it has never seen: "Ｉｇｎｏｒｅ ａｌｌ ｐｒｅｖｉｏｕｓ ｉｎｓｔｒｕｃｔｉｏｎｓ" in
full-width letters scored 0.003 on vsr-static-5 (0.999 once NFKC-folded), and a full-width e-mail address or
SSN matched no PII pattern. The tokenizer already drops zero-width and other format characters (BERT's
``clean_text``); NFKC is the step before it, for every text the model reads: the heads' (jailbreak, domain,
zero-shot) and the span detectors'.

ASCII text, and text already in NFKC (most non-English prose), is returned as is: ``str.isascii`` and
``unicodedata.is_normalized`` are C scans. Only the non-ASCII runs that change are folded piece by piece,
each character with the combining marks after it (so "e" + U+0301 stays one piece); a span found in the
folded text is moved back to whole pieces of the original (``Folded.span``): the ligature "ﬁ" folds to two
characters, and a span starting at its "i" starts at the ligature. Cyrillic and Greek look-alikes are no
compatibility forms and are left alone (a confusables map is another question: it would fold real Russian).
"""
from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass

_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
# Characters that print as nothing: a soft hyphen, zero-width spaces and joiners, the word joiner, a BOM. Inside
# an address they hide it from every pattern ("maria\u00ad.gonzalez@example.com" left "maria" in clear); folded
# away with the character before them, as a combining mark is folded with its letter.
INVISIBLE = "\u00ad\u180e\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff"
_INVISIBLE = re.compile(f"[{INVISIBLE}]")


def _attached(ch: str) -> bool:
    """Whether ``ch`` belongs to the piece of the character before it."""
    return bool(unicodedata.combining(ch)) or ch in INVISIBLE


def _nfkc(piece: str) -> str:
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", piece))


def nfkc(text: str) -> str:
    """``text`` as the model reads it; the same object when nothing changes."""
    if text.isascii():
        return text
    # One C call (it returns ``text`` itself when already normal). ``fold`` may differ where a combining mark
    # follows a changed piece (it does not compose across pieces); the tokenizer strips accents either way.
    return unicodedata.normalize("NFKC", text)


@dataclass(frozen=True, slots=True)
class Folded:
    """A text folded piece by piece, and where each piece came from.

    ``norm[i]`` and ``orig[i]`` are the starts of piece i in the folded and the original text (a last entry
    holds both lengths); between two entries the text is unchanged when ``atomic[i]`` is false (offsets move
    one for one), else it is one folded piece, mapped whole."""

    text: str
    norm: tuple[int, ...] = ()
    orig: tuple[int, ...] = ()
    atomic: tuple[bool, ...] = ()

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original characters of the folded text's ``[start, end)``."""
        if not self.norm:
            return start, end
        i = bisect.bisect_right(self.norm, start) - 1
        s = self.orig[i] if self.atomic[i] else self.orig[i] + start - self.norm[i]
        j = max(bisect.bisect_left(self.norm, end) - 1, 0)    # the piece holding end - 1
        e = self.orig[j + 1] if self.atomic[j] else self.orig[j] + end - self.norm[j]
        return s, max(e, s)


def fold(text: str) -> Folded:
    """``text`` in NFKC piece by piece, with the map back (``Folded``)."""
    if text.isascii() or (unicodedata.is_normalized("NFKC", text) and _INVISIBLE.search(text) is None):
        return Folded(text)
    out: list[str] = []
    norm: list[int] = []
    orig: list[int] = []
    atomic: list[bool] = []
    n = o = 0          # the folded and original length so far

    def plain(upto: int) -> None:     # original text copied as is up to ``upto``
        nonlocal n, o
        if upto > o:
            norm.append(n), orig.append(o), atomic.append(False)
            out.append(text[o:upto])
            n += upto - o
            o = upto

    for m in _NON_ASCII.finditer(text):
        start, end = m.span()
        # A combining mark after an ASCII letter belongs to that letter's piece.
        if start and _attached(text[start]):
            start -= 1
        start = max(start, o)
        run = text[start:end]
        folded = _nfkc(run)
        if folded == run:
            continue                 # left in the plain text around it
        plain(start)
        # No character decomposes shorter, so an NFKD as long as the run maps each character to one, and an
        # NFKC as long again composed nothing: one character for one (full-width letters), offsets move one
        # for one in a single entry for the run (two C calls; a piece at a time cost ~1.4 ms on 2 KB of
        # full-width text). Canonical reordering may swap adjacent combining marks: no span ends between two.
        if len(folded) == len(run) == len(unicodedata.normalize("NFKD", run)):
            norm.append(n), orig.append(o), atomic.append(False)
            out.append(folded)
            n += end - start
            o = end
            continue
        i = start
        while i < end:
            j = i + 1
            while j < end and _attached(text[j]):
                j += 1
            piece = text[i:j]
            folded = _nfkc(piece)
            if folded == piece or not folded:
                plain(j)
            else:
                norm.append(n), orig.append(o), atomic.append(True)
                out.append(folded)
                n += len(folded)
                o = j
            i = j
    plain(len(text))
    norm.append(n), orig.append(o), atomic.append(False)
    return Folded("".join(out), tuple(norm), tuple(orig), tuple(atomic))
