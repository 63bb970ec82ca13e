"""The static sentence embedding: a text is the normalised mean of its tokens' rows.

The table is model2vec-style (see ``build``): one 256-dimensional row per
WordPiece token of all-MiniLM-L6-v2, already SIF-weighted, so the plain mean of
a text's rows is its weighted average. Tokens are read without [CLS]/[SEP]
and [UNK] is dropped: neither carries meaning of its own. Only the first
``max_tokens`` tokens of the first ``CHARS_PER_TOKEN * max_tokens`` characters
are read, and the card says so.

ASCII text takes a Python path that gives the Rust tokenizer's ids exactly
(BERT's rules are simple there: drop control characters, lowercase, split on
whitespace and on every ASCII punctuation mark, WordPiece each word) with a
cache of words already pieced: on 2 KB of prose it costs ~100 µs against
~600 µs for ``Tokenizer.encode``, whose offsets and alignments we never read.
Anything else goes to the Rust tokenizer, whose Unicode rules are not ours to
re-derive. tests/test_vsr_static.py checks the two agree.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from tokenizers import Tokenizer

UNK_ID = 100
CHARS_PER_TOKEN = 16          # a 512-token read never needs more than 8 KB of text
WORD_CACHE = 100_000
MAX_WORD_CHARS = 100          # BERT's max_input_chars_per_word: a longer word is [UNK]
_CONTROLS = dict.fromkeys([*range(9), 11, 12, *range(14, 32), 127])   # removed by BERT's clean_text
_ASCII_WORD = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")
_SPECIAL = re.compile(r"\[(?:PAD|UNK|CLS|SEP|MASK)\]")   # the Rust tokenizer keeps these whole


class StaticEmbedding:
    def __init__(self, tokenizer: Tokenizer, table: np.ndarray, *, max_tokens: int) -> None:
        self.tokenizer = tokenizer
        self.table = table                  # (vocab, dim) float32, dequantised once at load
        self.max_tokens = max_tokens
        self.max_chars = CHARS_PER_TOKEN * max_tokens
        self.dim = table.shape[1]
        self.vocab = tokenizer.get_vocab()
        self._words: dict[str, list[int]] = {}

    def token_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        """The ids each text is read as: at most max_tokens, without [UNK]."""
        texts = [t[: self.max_chars] for t in texts]
        ids: list[list[int] | None] = [self._ascii_ids(t) if t.isascii() and not _SPECIAL.search(t) else None
                                          for t in texts]
        rest = [t for t, i in zip(texts, ids) if i is None]
        if rest:
            encs = iter(self.tokenizer.encode_batch_fast(rest, add_special_tokens=False))
            ids = [next(encs).ids if i is None else i for i in ids]
        out = []
        for i in ids:
            arr = np.asarray(i[: self.max_tokens], dtype=np.intp)
            out.append(arr[arr != UNK_ID])
        return out

    def _ascii_ids(self, text: str) -> list[int]:
        out: list[int] = []
        words = self._words
        for word in _ASCII_WORD.findall(text.translate(_CONTROLS).lower()):
            pieces = words.get(word)
            if pieces is None:
                pieces = self._wordpiece(word)
                if len(words) < WORD_CACHE:
                    words[word] = pieces
            out += pieces
            if len(out) >= self.max_tokens:
                break
        return out

    def _wordpiece(self, word: str) -> list[int]:
        """Greedy longest-match-first WordPiece, as BERT's; a word with an unknown piece is [UNK]."""
        if len(word) > MAX_WORD_CHARS:
            return [UNK_ID]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    pieces.append(self.vocab[piece])
                    start = end
                    break
            else:
                return [UNK_ID]
        return pieces

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length rows, one per text, in one gather; a text with no token gets a zero row."""
        return self.encode_counted(texts)[0]

    def encode_counted(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The rows of ``encode`` and how many tokens each text was read as (a length feature)."""
        vectors, counts, _ = self.encode_read(texts)
        return vectors, counts

    def encode_read(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """The rows of ``encode``, the token counts and the token ids read (for n-gram heads)."""
        if not texts:
            return np.zeros((0, self.dim), np.float32), np.zeros(0, np.float32), []
        out = np.zeros((len(texts), self.dim), np.float32)
        counts = np.zeros(len(texts), np.float32)
        read = self.token_ids(texts)
        for row, ids in enumerate(read):
            if len(ids):
                out[row] = self.table.take(ids, axis=0).sum(0)   # the mean's direction: no need to divide
                counts[row] = len(ids)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0), counts, read
