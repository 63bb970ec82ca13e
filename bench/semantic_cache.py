"""The semantic response cache: hit precision and recall on a paraphrase set, and lookup cost at 100,000 entries.

    .venv/bin/python -m bench.semantic_cache

Quality: ``bench/data/paraphrase_pairs.tsv``, pairs that ask the same thing
(``same``) and near pairs that do not (``near``: negations and antonyms,
different numbers, different entities, reversals: the same words with their
roles swapped, London to Paris for Paris to London);
``bench/data/reversal_heldout.tsv``, reported apart: reversals and paraphrases
that reorder or keep a direction, written after the order check
(``events.semantic_index.reordered``) was chosen and never tuned on. Each
cached request is stored, then each new request looked up with the default match block exactly as the router
runs it: embedding recall (top_k 3, cosine >= 0.8), the polarity check, then
the embedded decision model's ``same_request`` judge (min_score 0.8), each
pair in its own partition. Precision = same pairs among the hits; recall = hits
among the same pairs.

Tool calls: ``bench/data/tool_pairs.tsv``, requests offering a shell tool whose
answer is a tool call (the outside trial's three pairs among them). Measured
with the matcher alone (what the router served before) and with the rule it
follows now: an answer that calls a tool is served only to the same request
(``events.cache_store.calls_tool``), so no near pair is served, and no
paraphrase either.

Cost: 100,000 entries of one partition (the worst case: every entry a
candidate) in the memory backend's index; one lookup = embed the request + the
cosine over the matrix + top_k. Median and p99 of 2,000 lookups.
"""
from __future__ import annotations

import os

# One BLAS thread, as a lookup on the trio thread runs: on a loaded 2-core machine the spinning threads of a
# threaded matvec cost more than the product itself (0.1 ms vs 20 ms measured here).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import statistics
import time
from pathlib import Path

import numpy as np

from vsr_fast.events.semantic_index import SemanticIndex, differs, projection
from vsr_fast.models import vsr_static
from vsr_fast.plugins.match import FEATURES, keep
from vsr_fast.plugins.response_cache import SEMANTIC
from vsr_fast.protocol import systemone as wire
from vsr_fast.systemone.presets import PRESETS

DATA = Path(__file__).parent / "data" / "paraphrase_pairs.tsv"
HELD_OUT = Path(__file__).parent / "data" / "reversal_heldout.tsv"
TOOL_DATA = Path(__file__).parent / "data" / "tool_pairs.tsv"


def pairs(path: Path = DATA) -> list[tuple[str, str, str]]:
    out = []
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            label, a, b = line.split("\t")
            out.append((label, a, b))
    return out


def quality(path: Path = DATA, tool_calls: bool = False) -> dict:
    """Hit precision and recall of the default match on ``path``'s pairs; ``tool_calls``: each cached answer
    calls a tool, which the router serves only to the same request (none of a pair's new requests is)."""
    model = vsr_static.load()
    match = FEATURES[SEMANTIC].default
    assert match.recall is not None and match.judge is not None
    question = PRESETS["same_request"]
    qid = question.wire_id
    index = SemanticIndex(model.embedding.dim, 10_000)
    hits = {"same": 0, "near": 0}
    totals = {"same": 0, "near": 0}
    for n, (label, cached, new) in enumerate(pairs(path)):
        totals[label] += 1
        if tool_calls and new != cached:
            continue
        index.add(str(n), "k", cached, model.embedding.encode([cached])[0], 3600)
        found = index.search(str(n), model.embedding.encode([new])[0], match.recall.top_k or 3,
                             match.recall.min_similarity)
        found = [f for f in found if not differs(new, f[2])]
        if not found:
            continue
        answers = model.answer([wire.Entry(state=wire.State(request=new, candidate=f[2]),
                                           questions={qid: question.question()}) for f in found])
        scored = [(a[qid].noul, i) for i, a in enumerate(answers)]
        if keep(scored, match.judge):
            hits[label] += 1
    served = hits["same"] + hits["near"]
    return {"precision": hits["same"] / served if served else 1.0, "recall": hits["same"] / totals["same"],
            "same": totals["same"], "near": totals["near"], "false_hits": hits["near"]}


def fillers(n: int) -> list[str]:
    """``n`` request-like texts: random runs of the words of bench/data/domain_questions.tsv."""
    text = (Path(__file__).parent / "data" / "domain_questions.tsv").read_text()
    vocab = [w for line in text.splitlines() if not line.startswith("#") for w in line.split("\t")[-1].split()]
    rng = np.random.default_rng(7)
    return [" ".join(rng.choice(vocab, size=int(rng.integers(6, 16)))) for _ in range(n)]


def lookup_cost(entries: int = 100_000, lookups: int = 2_000) -> dict:
    """Lookups over ``entries`` in one partition: the paraphrase set's cached requests among fillers. Checks
    that the two-stage search finds what the exact scan finds, for every new request of the set."""
    emb = vsr_static.load().embedding
    cached = [(a, b) for _, a, b in pairs()]
    texts = fillers(entries - len(cached)) + [a for a, _ in cached]
    vectors = np.concatenate([emb.encode(texts[i:i + 4096]) for i in range(0, len(texts), 4096)])
    fast = SemanticIndex(emb.dim, entries, axes=projection(emb.dim))
    exact = SemanticIndex(emb.dim, entries)
    for i, (text, v) in enumerate(zip(texts, vectors)):
        fast.add("p", f"k{i}", text, v, 3600)
        exact.add("p", f"k{i}", text, v, 3600)
    same = 0
    for _, new in cached:
        v = emb.encode([new])[0]
        same += [h[1] for h in fast.search("p", v, 3, 0.8)] == [h[1] for h in exact.search("p", v, 3, 0.8)]
    queries = [new for _, new in cached] * (lookups // len(cached) + 1)
    times, exact_times = [], []
    for text in queries[:lookups]:
        t = time.perf_counter()
        fast.search("p", emb.encode([text])[0], 3, 0.8)
        times.append(time.perf_counter() - t)
    for text in queries[:200]:
        t = time.perf_counter()
        exact.search("p", emb.encode([text])[0], 3, 0.8)
        exact_times.append(time.perf_counter() - t)
    times.sort()
    return {"entries": entries, "p50_ms": statistics.median(times) * 1000,
            "p99_ms": times[int(0.99 * len(times))] * 1000, "exact_p50_ms": statistics.median(exact_times) * 1000,
            "agree": same, "queries": len(cached)}


def main() -> None:
    q = quality()
    print(f"paraphrase set: {q['same']} same pairs, {q['near']} near pairs")
    print(f"hit precision {q['precision']:.3f}  hit recall {q['recall']:.3f}  false hits {q['false_hits']}")
    h = quality(HELD_OUT)
    print(f"held-out reversal set ({h['same']} same, {h['near']} near pairs): hit precision {h['precision']:.3f}  "
          f"hit recall {h['recall']:.3f}  false hits {h['false_hits']}")
    for label, calls in (("matcher alone", False), ("served: tool calls exact only", True)):
        t = quality(TOOL_DATA, calls)
        print(f"tool-call set ({t['same']} same, {t['near']} near pairs), {label}: hit precision "
              f"{t['precision']:.3f}  hit recall {t['recall']:.3f}  false hits {t['false_hits']}")
    small = lookup_cost(1_000, 1_000)
    print(f"lookup (embed + search) over 1,000 entries: p50 {small['p50_ms'] * 1000:.0f} µs, "
          f"p99 {small['p99_ms'] * 1000:.0f} µs")
    c = lookup_cost()
    print(f"lookup (embed + search) over {c['entries']:,} entries of one partition: p50 {c['p50_ms']:.3f} ms, "
          f"p99 {c['p99_ms']:.3f} ms; the exact scan alone p50 {c['exact_p50_ms']:.3f} ms; two-stage hits equal "
          f"the exact scan's for {c['agree']}/{c['queries']} requests")


if __name__ == "__main__":
    main()
