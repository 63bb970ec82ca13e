"""vsr-fast's C kernels (Cython, built from _ext/*.pyx by setup.py), like msgspec's _core.

- windows: UTF-8-safe scan windows and the routing view of a long input.
- bm25: BM25 index and scoring equal to rank_bm25's, and the BM25 tokenizer.
- keywords: literal keyword counts and density, trigram similarity, fuzzy words.
- jsonscan: how deeply raw JSON nests, before any decoder reads it.
- framing: the event journal's frames of a batch (events/journal.py's format).

Each module's contract is its .pyi stub. _reference holds pure-Python
equivalents for the parity tests and benchmarks only.
"""
