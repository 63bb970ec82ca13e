"""vsr-static-1: the embedded default decision model of the ``primary`` deployment.

A static embedding distilled from all-MiniLM-L6-v2 (int8, 30522 x 256), logistic
heads for ``domain`` and ``jailbreak``, calibrated zero-shot scoring for the other
presets and validators for structured PII spans. numpy + ``tokenizers`` +
``phonenumbers`` at run time; no GPU, no download. The artifacts are committed
under ``artifacts/`` and rebuilt by ``python -m vsr_fast.models.vsr_static.build``.

    model = load()                       # cached; checks artifacts/SHA256SUMS first
    model.card                           # what it answers, honestly
    model.answer([Entry(state, questions), ...])
    count_tokens(["some text", ...])     # its WordPiece tokenizer's count (count_tokens estimates)
"""
from __future__ import annotations

import functools
from pathlib import Path

from tokenizers import Tokenizer

from ._artifacts import ARTIFACTS, ArtifactError, read, verify
from ._model import SPAN_LABELS, VsrStatic1


@functools.cache
def _default() -> VsrStatic1:
    return VsrStatic1(read(ARTIFACTS))


def load(directory: Path | None = None) -> VsrStatic1:
    """The model from the committed artifacts (loaded once), or a fresh one from ``directory``.

    Raises ArtifactError when a file is missing or differs from SHA256SUMS.
    """
    return _default() if directory is None else VsrStatic1(read(Path(directory)))


@functools.cache
def _tokenizer() -> Tokenizer:
    verify(ARTIFACTS)
    return Tokenizer.from_file(str(ARTIFACTS / "tokenizer.json"))


def count_tokens(texts: list[str]) -> int:
    """The number of WordPiece tokens the model's tokenizer makes of ``texts``, special tokens left
    out. CPU-bound (the first call also loads the tokenizer): call it from a worker thread."""
    if not texts:
        return 0
    return sum(len(e.ids) for e in _tokenizer().encode_batch_fast(texts, add_special_tokens=False))


__all__ = ["SPAN_LABELS", "ArtifactError", "VsrStatic1", "count_tokens", "load"]
