"""Build vsr-static-10: -9's rule on -5's heads, with -8's jailbreak head mixed in on texts past a length gate.

-5 meets the short-turn false-alarm goal and misses S-Labs AUC; a -5/-8 logit mean (``bench.jailbreak_ensemble``,
the tenth round) met S-Labs AUC and flagged too many short turns. -10 keeps -5's margin on texts under a token-count
gate (so a greeting answers as on -5) and reads the mix past it, ``w * m5 + (1 - w) * m8 + shift``, then -9's
sentence windows on -5's head on top (max). No array is written: SHA256SUMS pins ../artifacts-5/heads.npz and
../artifacts-8/heads.npz, read where they are committed (``_artifacts.FILES_10``). The threshold is -5's 0.383:
``shift`` moves the mix's operating point onto it. What the build chooses, on validation splits of the training
sources only (-8's validation pool: -5's jailbreak validation split and the written rows' validation split, plus
``_build9.padded``'s padded validation attacks; no head trained on any of it, no benchmark text is read):

1. For each gate of ``GATES`` (hard, or smooth in log-tokens) and weight of ``WEIGHTS``, the shift: the largest of
   ``SHIFTS`` at which the gated score, windows included, flags at -5's threshold at most ``SHORT_MARGIN`` more of
   the short (<= ``_corpus.SHORT_CHARS`` characters) and of the non-ASCII benign validation texts than -5 does, and
   at most ``SOURCE_MARGIN`` more of the long benign texts and of each benign source of >= ``SOURCE_MIN`` texts;
   no such shift: not eligible.
2. Of the eligible, the highest S-Labs validation AUC of the gated score; within ``TIE`` of it, the most validation
   attacks caught (padded included), then the larger gate, the larger weight on -5, a hard gate before a smooth one.

The rule was written before the held-out run (bench/RESULTS.md, "eleventh round"). model.json is -9's with the name
and the ensemble; NOTICE is -8's (its data include -5's) with the name.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import _build2, _build9, _corpus
from ._artifacts import ARTIFACTS_8, ARTIFACTS_9, FILES_9, FILES_10, SUMS, read, sha256_lines
from ._fit import auc

NAME = "vsr-static-10"
PARTNER_HEADS = "../artifacts-8/heads.npz"
GATES = tuple(("hard", g, 0.0) for g in (2, 4, 6, 8, 10, 12, 16, 24, 32, 48, 64, 96, 128)) + tuple(
    ("smooth", g, t) for g in (2, 4, 6, 8, 10, 12, 16, 24, 32, 48, 64, 96, 128) for t in (0.25, 0.5))
WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))
SHIFTS = tuple(round(-3 + 0.05 * i, 2) for i in range(121))     # -3 to 3 in logit units
SHORT_MARGIN, SOURCE_MARGIN, SOURCE_MIN, TIE = 0.001, 0.005, 200, 0.001
GRID_KEPT = 20    # model.json keeps the eligible candidates with the highest S-Labs validation AUC
RULE = (f"shift: the largest of -3..3 (step 0.05) at which the gated score with -9's windows flags at -5's threshold "
        f"at most {SHORT_MARGIN:.1%} more of the short and of the non-ASCII benign validation texts than -5, and at most "
        f"{SOURCE_MARGIN:.1%} more of the long ones and of each benign validation source of >= {SOURCE_MIN} texts; "
        f"chosen: the highest S-Labs validation AUC, within {TIE} the most validation attacks caught (padded "
        "included), then the larger gate, the larger weight on -5, hard before smooth")


def share(kind: str, tokens: float, softness: float, n: np.ndarray) -> np.ndarray:
    """As ``_model._Gate.share``: the part of the mix each text reads."""
    if kind == "hard":
        return (n >= tokens).astype(np.float64)
    return 1.0 / (1.0 + np.exp(-(np.log(np.maximum(n, 1e-9)) - np.log(tokens)) / softness))


def validation(work: Path, log) -> dict[str, np.ndarray]:
    """-5's and -8's margins, -9's worst window and what the rule groups by, on the validation pool."""
    s = _build2.start(work, log, natural=True)
    rows, _, _ = _corpus.corpora(s.packages, natural=True, written=True)
    val = [r for r in rows if r.split == "validation"]
    pad = _build9.padded(val)
    texts = [r.text for r in val] + pad
    return read_pool(texts) | {"y": np.array([r.label == "jailbreak" for r in val] + [True] * len(pad)),
                               "source": np.array([r.source for r in val] + ["padded"] * len(pad))}


def read_pool(texts: list[str]) -> dict[str, np.ndarray]:
    """-5's and -8's margins, -9's worst window, token and character counts of ``texts``, as the models read them."""
    from . import load_5, load_8, load_9
    from ._model import _Read

    five, eight, nine = load_5(), load_8(), load_9()
    vectors, counts, ids = five.embedding.encode_read(texts)

    def margin(head, v, c):
        z = head._logits(v, c)
        return (z[:, 1] - z[:, 0]).astype(np.float64)

    head9 = nine.heads["jailbreak"]
    reads = [_Read(vectors[i], float(counts[i]), ids[i]) for i in range(len(texts))]
    return {"m5": margin(five.heads["jailbreak"], vectors, counts), "m8": margin(eight.heads["jailbreak"], vectors, counts),
            "windows": head9.windows.worst(reads, lambda v, c: margin(head9, v, c)),
            "tokens": counts.astype(np.float64), "chars": np.array([len(t) for t in texts]),
            "ascii": np.array([t.isascii() for t in texts]), "texts": np.array(texts, dtype=object)}


def choose(v: dict[str, np.ndarray], threshold: float, log) -> dict:
    """The gate, weight and shift (see the module's docstring) and every candidate's validation figures."""
    cut = float(np.log(threshold / (1 - threshold)))
    y, source, m5, m8 = v["y"], v["source"], v["m5"], v["m8"]
    benign = ~y
    groups = {"short": (benign & (v["chars"] <= _corpus.SHORT_CHARS), SHORT_MARGIN),
              "long": (benign & (v["chars"] > _corpus.SHORT_CHARS), SOURCE_MARGIN),
              "non-ASCII": (benign & ~v["ascii"], SHORT_MARGIN)}
    groups.update({s: (benign & (source == s), SOURCE_MARGIN) for s in sorted(set(source[benign]))
                   if (benign & (source == s)).sum() >= SOURCE_MIN})
    five = m5 >= cut
    slabs = source == "s-labs"
    log(f"-5 at {threshold}: S-Labs validation AUC {auc(m5[slabs], y[slabs]):.4f}, attacks caught {five[y].mean():.4f}, "
        "false alarms " + ", ".join(f"{k} {five[g].mean():.4f}" for k, (g, _) in groups.items()))
    tried = []
    for kind, tokens, softness in GATES:
        a = share(kind, tokens, softness, v["tokens"])
        for w in WEIGHTS:
            mixed = (1 - w) * (m8 - m5)
            for shift in reversed(SHIFTS):
                score = np.maximum(m5 + a * (mixed + shift), v["windows"])
                flags = score >= cut
                if all(flags[g].mean() <= five[g].mean() + margin + 1e-12 for g, margin in groups.values()):
                    tried.append({"kind": kind, "gate_tokens": tokens, "softness": softness, "weight": w,
                                  "shift": shift, "slabs_auc": round(auc(score[slabs], y[slabs]), 4),
                                  "attacks_caught": round(float(flags[y].mean()), 4),
                                  "false_alarms": {k: round(float(flags[g].mean()), 4) for k, (g, _) in groups.items()}})
                    break
    best = max(t["slabs_auc"] for t in tried)
    chosen = max((t for t in tried if t["slabs_auc"] >= best - TIE),
                 key=lambda t: (t["attacks_caught"], t["gate_tokens"], t["weight"], t["kind"] == "hard"))
    log(f"{len(tried)} eligible; chosen: {json.dumps(chosen)}")
    top = sorted(tried, key=lambda t: (-t["slabs_auc"], -t["attacks_caught"]))[:GRID_KEPT]
    return {"chosen": chosen, "grid_best": top, "candidates": len(GATES) * len(WEIGHTS), "eligible": len(tried),
            "choice": RULE,
            "minus_5": {"slabs_auc": round(auc(m5[slabs], y[slabs]), 4), "attacks_caught": round(float(five[y].mean()), 4),
                        "false_alarms": {k: round(float(five[g].mean()), 4) for k, (g, _) in groups.items()}},
            "texts": {k: int(g.sum()) for k, (g, _) in groups.items()} | {"attacks": int(y.sum()),
                                                                          "slabs": int(slabs.sum())}}


def build(work: Path, out: Path, log) -> None:
    nine = read(ARTIFACTS_9, FILES_9)
    jmeta = nine.meta["heads"]["jailbreak"]
    choice = choose(validation(work, log), float(jmeta["threshold"]), log)
    c = choice["chosen"]
    eight = json.loads((ARTIFACTS_8 / "model.json").read_text())
    meta = json.loads(json.dumps(nine.meta))
    meta["name"] = NAME
    meta["heads"]["jailbreak"]["ensemble"] = {
        "with": "vsr-static-8", "heads": PARTNER_HEADS, "features": eight["heads"]["jailbreak"]["features"],
        "kind": c["kind"], "gate_tokens": c["gate_tokens"], "softness": c["softness"], "weight": c["weight"],
        "shift": c["shift"]}
    meta["heads"]["jailbreak"]["ensemble_choice"] = {k: v for k, v in choice.items() if k != "chosen"} | {
        "chosen_validation": c}
    meta["built_on"] = ("vsr-static-9 (-5's heads and the sentence-window rule), with vsr-static-8's jailbreak head "
                        "mixed in past a token-count gate; both heads read from their committed files")
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    (out / "NOTICE").write_text((ARTIFACTS_8 / "NOTICE").read_text().replace(
        "vsr-static-8 (vsr_fast/models/vsr_static/artifacts-8)",
        f"{NAME} (vsr_fast/models/vsr_static/artifacts-10; vsr-static-5's and -8's heads and data)", 1))
    (out / SUMS).write_text(sha256_lines(out, FILES_10))
    for name in ("model.json", "NOTICE", SUMS):
        log(f"wrote {out / name} ({(out / name).stat().st_size:,} bytes)")
