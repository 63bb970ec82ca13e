"""Build vsr-static-6's heads on vsr-static-1's committed embedding; run through ``build --model vsr-static-6``.

vsr-static-6 is vsr-static-5 with a jailbreak head that has read a coding agent's user turn.
Claude Code sends its own instruction blocks inside the user's turn (the CLAUDE.md wrapper:
"IMPORTANT: These instructions OVERRIDE any default behavior and you MUST follow them exactly
as written.", <system-reminder> notes), and developers tell an agent to "ignore the previous
test output": -5's head, which had never seen either, scored them as attacks (0.78 to 0.99
against its 0.383 cut), so the quickstart sent every Claude Code turn to its guarded model.

1. jailbreak: -3's head kind (the embedding, the log-length feature and their product, plus
   one weight per hashed token unigram and bigram, ``_build3``; dense L2 0.01, n-gram L2
   1e-3, the stronger of -3's grid: -3's own 3e-4 missed the 1 % operating point on unseen
   chit-chat) on -5's rows plus the written coding-agent texts (``_corpus.agent_rows``:
   benign turns, project files and harness blocks, attacks in an agent's turn, each turn
   and attack also sent inside harness blocks; a turn and its wrapped forms share a split).
   -2's linear head on the same rows (agent rows x10) still flagged the recorded CLAUDE.md
   turn (0.403 at 0.393); the bigrams tell "ignore the previous test output" from "ignore
   the previous instructions" better, at a cost on unseen chit-chat and in-the-wild
   jailbreaks that keeps -6 opt-in (artifacts-6/CARD.md).
   The written rows' loss weight, 30, was chosen from 10, 30 and 100 (fitted in memory with
   this code, n-gram L2 1e-3) on validation data and the quickstart's recorded Claude Code
   turns: at 10 the recorded CLAUDE.md turn still crossed the threshold (0.372 at 0.370)
   and 16 of 71 written benign validation texts were flagged; at 100, 6 of 71, but the
   validation attacks caught fell from 0.865 to 0.820. The build fits 30 only (one fit of
   this head took 6 to 25 minutes on the shared 2-core box).
2. domain: -5's head, read from artifacts-5 (checked against its SHA256SUMS) and written
   unchanged, with its model.json entry.
3. Zero-shot calibration as -1 to -5 (the embedding is the same).
4. Write artifacts-6/: heads.npz (jailbreak_ngrams and domain_ngrams, float16), model.json,
   NOTICE and SHA256SUMS, which also pins the shared embedding and tokenizer.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import _build2, _build3, _build5, _corpus
from ._artifacts import ARTIFACTS_5, FILES_5, FILES_6, read
from ._embedding import StaticEmbedding
from ._fit import auc, fit_logistic_ngrams, softmax

NAME = "vsr-static-6"
AGENT = "agent-written"
NGRAM_L2 = 1e-3
AGENT_WEIGHT = 30.0            # the loss weight of a written agent row (every other row: 1)
FALSE_ALARMS = _build2.FALSE_ALARMS


def train_jailbreak(emb: StaticEmbedding, rows: list[_corpus.Row], log) -> tuple[dict[str, np.ndarray], dict]:
    train = [r for r in rows if r.split == "train"]
    val = [r for r in rows if r.split == "validation"]
    (xt, gt), (xv, gv) = _build3._read(emb, train), _build3._read(emb, val)
    yt = np.array([r.label == "jailbreak" for r in train], dtype=int)
    yv = np.array([r.label == "jailbreak" for r in val])
    sources = np.array([r.source for r in val], dtype=object)
    short = ~yv & np.array([len(r.text) <= _corpus.SHORT_CHARS for r in val])
    slabs, agent = sources == "s-labs", sources == AGENT
    weights = np.array([AGENT_WEIGHT if r.source == AGENT else 1.0 for r in train])
    w, b, table = fit_logistic_ngrams(xt, gt, yt, 2, _build3.L2, NGRAM_L2, weights=weights)
    table = table.astype(np.float16)            # as shipped: the threshold is set on what runs
    p = softmax(xv @ w + b + gv.dot(table.astype(np.float32)))[:, 1]
    threshold = float(np.quantile(p[short], 1 - FALSE_ALARMS))
    tpr = float((p[yv] >= threshold).mean())
    agent_fa = float((p[agent & ~yv] >= threshold).mean())
    by_source = {s: round(float((p[yv & (sources == s)] >= threshold).mean()), 4) for s in sorted(set(sources[yv]))}
    slabs_auc, fpr = auc(p[slabs], yv[slabs]), float((p[short] >= threshold).mean())
    log(f"jailbreak: agent weight {AGENT_WEIGHT:g}, threshold {threshold:.3f}: validation attacks caught {tpr:.4f} "
        f"{by_source}, written agent benign flagged {agent_fa:.4f}, S-Labs validation AUC {slabs_auc:.4f}")
    heads = {"jailbreak_w": w, "jailbreak_b": b, "jailbreak_ngrams": table}
    return heads, {"labels": list(_build2.LABELS), "l2": _build3.L2, "ngram_l2": NGRAM_L2,
                   "features": _build3.JAILBREAK_FEATURES,
                   "ngrams": {"buckets": _build3.NGRAM_BUCKETS, "of": "token-id unigrams and bigrams",
                              "weights": "float16, summed over the text's distinct buckets / sqrt(count)"},
                   "agent_written_weight": AGENT_WEIGHT,
                   "threshold": round(threshold, 3),
                   "operating_point": f"at most {FALSE_ALARMS:.0%} false alarms on benign validation texts "
                                      f"of at most {_corpus.SHORT_CHARS} characters",
                   "validation_short_benign_false_alarms": round(fpr, 4),
                   "validation_attacks_caught": round(tpr, 4), "validation_attacks_caught_by_source": by_source,
                   "validation_agent_written_benign_flagged": round(agent_fa, 4),
                   "validation_slabs_auc": round(slabs_auc, 4), "train": len(train), "validation": len(val)}


def notice_on_5(name: str, folder: str, written: str) -> str:
    """-5's NOTICE for a model that keeps -5's domain head and trains its jailbreak head also on ``written`` (the
    NOTICE's item for the new source)."""
    return _build5.NOTICE.replace(
        "vsr-static-5 (vsr_fast/models/vsr_static/artifacts-5)", f"{name} (vsr_fast/models/vsr_static/{folder})"
    ).replace(
        "written for this build by an LLM session\n  (vsr_fast/models/vsr_static/corpus/natural_questions.tsv",
        "written for vsr-static-5 by an LLM session\n  (vsr_fast/models/vsr_static/corpus/natural_questions.tsv").replace(
        "  domain head only.\n", "  domain head only (vsr-static-5's, unchanged);\n" + written)


NOTICE = notice_on_5(NAME, "artifacts-6", (
    "- coding-agent turns, project instruction files, harness blocks and attacks set in an\n"
    "  agent's turn, written for this build by an LLM session, the harness blocks paraphrased\n"
    "  or quoted from what Claude Code and Codex send (vsr_fast/models/vsr_static/corpus/\n"
    "  agent_turns.tsv, Apache-2.0; not traffic), jailbreak head only.\n")).replace(
    "(the domain\nhead also on hashed token n-grams)", "(the domain and\njailbreak heads also on hashed token n-grams)")


def build_on_5(work: Path, out: Path, log, *, name: str, source: str, written: dict, train_jailbreak,
               synthetic: str, notice: str, files: tuple[str, ...]) -> None:
    """A model with -5's domain head, unchanged, and a jailbreak head ``train_jailbreak`` fits on -5's rows plus
    the written rows of ``source`` (``written``: the ``_corpus.corpora`` flag that adds them)."""
    s = _build2.start(work, log, natural=True)
    jailbreak, domain, report = _corpus.corpora(s.packages, natural=True, **written)
    assert jailbreak[:len(s.jailbreak)] == s.jailbreak and domain == s.domain, "-5's rows, unchanged, come first"
    log(f"written rows ({source}): {json.dumps(report['jailbreak'][source])}; dropped as near-duplicates of "
        f"benchmark texts: {report['dropped_as_benchmark_duplicates']['jailbreak'].get(source, 0)}")
    s = _build2.Start(s.base_meta, s.emb, s.packages, jailbreak, domain, report)
    jheads, jmeta = train_jailbreak(s.emb, s.jailbreak, log)
    five = read(ARTIFACTS_5, FILES_5)
    log("domain: -5's head, unchanged")
    meta = _build2.model_meta(name, s, {"domain": five.meta["heads"]["domain"], "jailbreak": jmeta})
    meta["synthetic"] = five.meta["synthetic"] + synthetic
    domain_heads = {k: v for k, v in five.heads.items() if k.startswith("domain_")}
    _build2.write(out, {**jheads, **domain_heads}, meta, log, notice=notice, files=files)


def build(work: Path, out: Path, log) -> None:
    build_on_5(work, out, log, name=NAME, source=AGENT, written={"agent": True}, train_jailbreak=train_jailbreak,
               synthetic="; rows from 'agent-written' are coding-agent texts written for this build by an LLM session "
                         "(corpus/agent_turns.tsv; the harness blocks paraphrased or quoted from what Claude Code and "
                         "Codex send), not traffic; jailbreak head only",
               notice=NOTICE, files=FILES_6)
