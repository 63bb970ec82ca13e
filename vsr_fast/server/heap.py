"""What Python's cyclic collector scans in a serving process.

A router's heap is mostly what it loaded before serving (imports, the configuration, the embedded model's
vocabularies) and never frees. Each full collection walks all of it: at concurrency 64, where each request's
objects outlive several young collections and push the old generation along, that was a ~70 ms pause about
once a thousand requests and ~130 µs of collector time a request, the whole of what concurrency 64 cost over
concurrency 1 (bench/RESULTS.md, issue 14). Frozen, the start-up heap is never scanned again; a larger young
generation lets a request's garbage die by reference count before any scan sees it.
"""
from __future__ import annotations

import gc

# Container allocations (net of frees) before a young collection; CPython's default is 700. At 10,000 a
# router at concurrency 64 ran ~0.2 young collections per thousand requests instead of ~145, holding at most
# ~10,000 more objects (a few MB) between scans.
YOUNG_THRESHOLD = 10_000


def freeze_loaded() -> None:
    """Freeze what the imports and the configuration left alive, without a collection first.

    A full collection there walked all of it (~180,000 tracked objects) for ~90 ms of a ~0.7 s start, to free
    ~4,500 objects (~1.3 MB, mostly the classes attrs and enum replace while building theirs): that garbage now
    stays, frozen. settle() then scans only what the start made after this. Only for the router's own process.
    """
    gc.freeze()


def settle() -> None:
    """Collect once, freeze everything alive now, and raise the young generation's threshold.

    Only for a process that is the router's own (``vsr-fast serve``): frozen objects are never collected. After
    freeze_loaded() the collection walks only what was made since (a few thousand objects).
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    gc.enable()         # `vsr-fast serve` starts with the collector off (cli.main)


def prometheus_lines() -> list[str]:
    """The collector's series under prometheus_client's names, plus the frozen heap's size."""
    stats = gc.get_stats()
    lines: list[str] = []
    for name, key, doc in (("python_gc_collections_total", "collections", "Collections of each generation."),
                           ("python_gc_objects_collected_total", "collected",
                            "Objects the collector found unreachable and freed.")):
        lines += [f"# HELP {name} {doc}", f"# TYPE {name} counter"]
        lines += [f'{name}{{generation="{g}"}} {s[key]}' for g, s in enumerate(stats)]
    lines += ["# HELP vsr_gc_frozen_objects Objects frozen at start: never scanned by the collector.",
              "# TYPE vsr_gc_frozen_objects gauge", f"vsr_gc_frozen_objects {gc.get_freeze_count()}"]
    return lines
