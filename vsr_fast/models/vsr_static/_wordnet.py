"""WordNet 3.0 terms and glosses by subject area: the vocabulary of vsr-static-2's templated domain questions.

Build time only. WordNet's data files come from Debian's wordnet-base (pinned in
``_sources.DEBS``). A synset belongs to an area when it lies within four hyponym
steps of one of the area's roots (the discipline itself, and a few concept families
such as diseases for health or chemical compounds for chemistry), when it is a topic
member of a root or of one of its near hyponyms (WordNet's ``;c`` domain links), or
when its gloss opens with one of the area's usage labels, e.g. "(law) ...". A synset
claimed by two areas is dropped from both.

The roots were chosen by reading WordNet, not the benchmark's questions: they name
disciplines and broad concept families, never a benchmark item.
"""
from __future__ import annotations

import collections
import re
from dataclasses import dataclass

# area -> (root synsets "pos+offset" of WordNet 3.0, gloss usage labels)
AREAS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "biology": (("n06037666", "n00006484", "n05436752", "n05220461", "n00015388", "n00017222"),
                ("biology", "botany", "zoology", "genetics", "anatomy", "ecology", "microbiology", "physiology",
                 "embryology", "cytology", "biochemistry")),
    "business": (("n01094725", "n01090446", "n01133281", "n08381165", "n01112420", "n00618734", "n05662532",
                  "n01098698"), ("commerce", "business", "accounting", "marketing", "management")),
    "chemistry": (("n06084469", "n14818238", "n13447361", "n14622893"), ("chemistry", "organic chemistry")),
    "computer science": (("n06128570", "n06898352", "n05847438", "n03082979", "n06566077", "n05728493"),
                         ("computer science", "computing")),
    "economics": (("n06149484", "n01097292", "n13308999", "n13384557", "n06150633"), ("economics", "finance")),
    "engineering": (("n06125041", "n03699975", "n03269401", "n03287733", "n03033362"),
                    ("engineering", "electronics", "architecture", "mechanics")),
    "health": (("n06045562", "n00612160", "n14070360", "n14299637", "n03247620", "n01024392", "n03740161"),
               ("medicine", "pathology", "pharmacology", "surgery", "dentistry", "obstetrics", "ophthalmology")),
    "history": (("n06155567", "n00973077", "n00953559", "n15254028", "n07971582", "n00962722", "n08405723",
                 "n06773434"), ("history", "antiquity", "middle ages")),
    "law": (("n00611143", "n08441203", "n00766234", "n06520944", "n06479665", "n05903229", "n10249950",
             "n06161718"), ("law", "criminal law", "civil law")),
    "math": (("n06000644", "n06669864", "n06752293", "n13783816"),
             ("mathematics", "statistics", "geometry", "algebra", "calculus", "arithmetic")),
    "other": (("n08168978", "n08524735", "n00523513", "n07557434"),
              ("sport", "cooking", "music", "politics", "government", "geography", "games", "art", "sociology")),
    "philosophy": (("n06158346", "n05943300", "n10423589", "n06159473", "n05664069"),
                   ("philosophy", "ethics", "logic", "theology", "metaphysics")),
    "physics": (("n06090869", "n09272085", "n06095022"),
                ("physics", "nuclear physics", "optics", "astronomy", "electricity", "thermodynamics",
                 "quantum physics")),
    "psychology": (("n06136258", "n07480068", "n14083790", "n04617562", "n10488865"),
                   ("psychology", "psychiatry", "psychoanalysis", "psychophysiology")),
}
DEPTH = 4
FILES = (("n", "data.noun"), ("v", "data.verb"), ("a", "data.adj"), ("r", "data.adv"))
_LABEL = re.compile(r"^\(([^)]+)\)\s*")
_SENSE_MARK = re.compile(r"\([a-z]+\)$")     # adjective markers such as "(a)" or "(p)"


@dataclass(frozen=True)
class Synset:
    words: tuple[str, ...]
    pointers: tuple[tuple[str, str], ...]    # (symbol, "pos+offset")
    gloss: str


def parse(files: dict[str, str]) -> dict[str, Synset]:
    """Synsets keyed "pos+offset" from the text of data.noun/verb/adj/adv (WordNet's wndb format)."""
    out = {}
    for pos, name in FILES:
        for line in files[name].splitlines():
            if not line or line.startswith("  "):   # the licence header
                continue
            head, _, gloss = line.partition(" | ")
            p = head.split()
            count = int(p[3], 16)
            words = tuple(_SENSE_MARK.sub("", p[4 + 2 * i]).replace("_", " ") for i in range(count))
            at = 4 + 2 * count
            pointers = tuple((p[at + 1 + 4 * k], p[at + 3 + 4 * k] + p[at + 2 + 4 * k]) for k in range(int(p[at])))
            out[pos + p[0]] = Synset(words, pointers, gloss.strip())
    return out


def _below(synsets: dict[str, Synset], root: str, depth: int) -> set[str]:
    seen, todo = set(), [(root, 0)]
    while todo:
        key, d = todo.pop()
        for symbol, target in synsets[key].pointers:
            if symbol in ("~", "~i") and target not in seen and d < depth:
                seen.add(target)
                todo.append((target, d + 1))
    return seen


def _topic_members(synsets: dict[str, Synset], key: str) -> set[str]:
    return {target for symbol, target in synsets[key].pointers if symbol == "-c"}


def areas(synsets: dict[str, Synset]) -> dict[str, list[Synset]]:
    """The synsets of each subject area of AREAS, ambiguous ones dropped, in a stable order."""
    by_label: dict[str, set[str]] = collections.defaultdict(set)
    for key, s in synsets.items():
        m = _LABEL.match(s.gloss)
        if m:
            by_label[m.group(1).lower()].add(key)
    claimed: dict[str, set[str]] = {}
    for area, (roots, labels) in AREAS.items():
        keys: set[str] = set()
        for root in roots:
            keys |= {root} | _below(synsets, root, DEPTH) | _topic_members(synsets, root)
            for near in _below(synsets, root, 2):
                keys |= _topic_members(synsets, near)
        for label in labels:
            keys |= by_label.get(label, set())
        claimed[area] = keys
    count = collections.Counter(k for keys in claimed.values() for k in keys)
    return {area: [synsets[k] for k in sorted(keys) if count[k] == 1] for area, keys in claimed.items()}


def gloss_text(s: Synset) -> str:
    """The definition alone: no usage label, no quoted examples."""
    return _LABEL.sub("", s.gloss.split('; "')[0]).strip().rstrip(";")
