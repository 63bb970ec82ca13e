"""vsr-static-1 to -4: System One answers from a static embedding, two trained heads and PII validators.

The four models share this code and the embedding; they differ in their heads and
in the data those were trained on (``model.json`` says which). How each question
is answered (T, a and b come from model.json, fit at build time):

    preset:domain      trained logistic head over the 14 subject areas (-1: MMLU; -2 to -4: MMLU,
                       WordNet-templated questions, chatterbot files; -4 adds one weight per hashed
                       token unigram and bigram)
    preset:jailbreak   trained logistic head, benign / jailbreak (-1: S-Labs; -2 to -4: S-Labs
                       and the sources of ``_corpus``), over the embedding or, for -2 to -4,
                       the embedding, a log-length feature and their product; -3 adds one
                       weight per hashed token unigram and bigram (``_artifacts.ngram_buckets``);
                       -8's is one hidden ReLU layer over those inputs, then the logistic layer;
                       -9's is -5's, also read on its worst sentence window (``_windows``); -10's is
                       -9's, mixed with -8's on texts of at least the gate's tokens (``_Gate``)
    preset:pii         regexes + validators (``_pii``) for the structured labels; gazetteers and
                       rules (``_ner``) for PERSON, LOCATION, ORGANIZATION, DATE_TIME and
                       STREET_ADDRESS, run only when a span question asks for one of those
    other choice       softmax(cos(text, option description) / T)
    score              the same softmax over the level descriptions; score = expected level
    set                per label sigmoid(a * cos(text, description) + b)
    noul               true and false criteria: softmax over the two, P(true); one criterion
                       (or only instructions, read as the true one): the sigmoid above
    relevance,         the cosine of request and candidate, clipped to [0, 1]: no labelled
    same_request       pairs exist offline to calibrate it
    span               the PII labels of ``_pii`` (and ``_ner``) by name; anything else fails

Which text a question reads (kept simple on purpose):

- pii and other span questions: the state part the question names (``part``, default request);
  offsets index that one text, so the router asks each earlier turn a span rule reads as a
  state of its own (``systemone.states.part_shares``);
- relevance, same_request: request against candidate;
- presets of the response stage (refusal) and of both stages (jailbreak, harm,
  harm_categories), and every ``systemone:*`` question: the answer when the state has
  one, else the request (refusal needs an answer);
- everything else: the request. feedback reads the user's turn, not previous_answer,
  and turn_relation reads the current turn only: a mean of token rows cannot compare
  turns, and averaging them in would only blur the turn being judged.

When the question reads the request and the state carries earlier user turns (``history``)
or ``tool_results``, a yes/no, score or set question and a preset choice with a positive
option (jailbreak, harm, fact_check) are answered on each of those texts too, each embedded
on its own in the same encode call, and the worst wins: the highest P(yes), the highest
expected level, each label's highest probability, the turn with the highest P(positive).
"Ignore your instructions" two turns back is an attack whatever the current turn says. For jailbreak, an
older user turn (one before the previous) takes over only when the head is sure of it (P(jailbreak) >=
``HISTORY_SURE``): a benign turn flagged by mistake (support wording full of names scored 0.42-0.60 at a card
threshold of 0.383) blocks the turn that replies to it, not every later turn of the conversation, while an attack
followed by "go on" is read at the rule's own threshold (every turn was the latest once, and was judged so). A
choice with no positive option (domain, an operator's own choice) has no worst, and reads
the current turn only. The most recent ``HISTORY_TURNS`` of each part are read: a long agent
conversation costs at most that many texts, and each was embedded when it was the request,
so the read cache (``READ_CACHE`` texts) usually holds it. The card's ``reads`` says all this
for the load checks. The router sends each earlier turn through its routing view (2 KB for these models); a
longer one it also sends in windows, each the request of a state of its own in the same call, and applies the
rule above to their answers itself (``systemone.history_windows``): every new window of a request is read in
that call's one encode call.

Every text is read in NFKC (``_normalise``): full-width and other compatibility letters are the words they
stand for; span offsets are moved back to the client's characters.

Zero-shot choices ignore ``instructions``: the option descriptions carry the meaning.
Not answered: hallucination (a span label with no detector) and answer_check (a static
embedding cannot tell a right answer from a wrong one); they fail with
``question_failed``. A state whose text is empty but that carries images or videos
fails with ``invalid_input``: the model reads text only.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from tokenizers import Tokenizer

from ...protocol.systemone import (
    LIMITS,
    Answer,
    ChoiceAnswer,
    ChoiceQuestion,
    Entry,
    NoulAnswer,
    NoulQuestion,
    Question,
    QuestionError,
    ScoreAnswer,
    ScoreQuestion,
    SetAnswer,
    SetQuestion,
    Span,
    SpanAnswer,
    SpanQuestion,
    State,
)
from ...systemone.presets import PRESETS
from ...systemone.runtime import ModelCard
from ...systemone.states import HISTORY_SURE, HISTORY_TURNS
from . import _ner, _pii
from ._artifacts import PARTNER, ArtifactError, Artifacts, features, ngram_buckets, ngram_logits
from ._embedding import StaticEmbedding
from ._normalise import fold, nfkc
from ._windows import Vocabulary, WindowRule, WindowScorer

if TYPE_CHECKING:
    from ._contextual import MiniLM as Encoder

TRAINED = ("domain", "jailbreak")
PAIR_PRESETS = ("relevance", "same_request")
UNANSWERED = ("hallucination", "answer_check")
ANSWERED = tuple(sorted(set(PRESETS) - set(UNANSWERED)))
TEXT_PARTS = ("request", "answer", "candidate", "context", "previous_answer")
SPAN_LABELS = _pii.LABELS
DESCRIPTION_CACHE = 4096   # option descriptions kept embedded between calls
# Texts kept read between calls: a conversation's turns are read again each request. An entry holds its vector
# (1 KB), its ids (up to 1 KB) and its text (the router's view keeps a turn within 2 KB): at most ~16 MB.
READ_CACHE = 4096
FOLDED_PARTS = ("history", "tool_results")
# A hidden layer's weights smaller than this read as 0 (``_Head.__post_init__``): subnormal arithmetic is slow.
SUBNORMAL_FLUSH = 1e-20
# Preset choices whose worst turn is the one with the highest P(positive), at the request stage.
POSITIVE_CHOICES = tuple(f"preset:{n}" for n, p in PRESETS.items()
                         if p.type == "choice" and p.positive and "request" in p.stages)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _sigmoid(x: np.ndarray | float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


@dataclass
class _Plan:
    """One question's work: the texts to embed, then how to turn their vectors into an answer."""

    question: Question
    preset: str | None
    text: str = ""
    other: str = ""                                  # the candidate of a pair preset
    descriptions: list[str] = field(default_factory=list)
    turns: list[str] = field(default_factory=list)   # earlier turns answered too; the worst answer wins
    older: int = 0                                   # turns[:older]: user turns before the previous one


@dataclass(frozen=True)
class _Read:
    """One text as the model read it: its unit vector, its token count and its token ids."""

    vector: np.ndarray
    count: float
    ids: np.ndarray
    # The text as read (its first max_chars characters, the read cache's key): -11's gate asks its language.
    text: str = field(default="", compare=False, repr=False)
    # What a rule computed of this text, kept with the read, keyed by the rule: a window rule's worst window margin
    # (``_windows.WindowScorer.worst``), an ensemble's partner margin (``_Gate.partner_margins``).
    windows: dict = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True, eq=False)      # hashed by identity: a read keeps the partner's margin keyed by its gate
class _Gate:
    """vsr-static-10's length gate (model.json ``heads.jailbreak.ensemble``): a text of fewer than ``tokens`` tokens
    keeps the base head's margin (short turns answer as -5 did); a longer one reads ``weight * base + (1 - weight) *
    partner + shift``, the shift putting that mix's operating point at the base head's card threshold. A smooth gate
    (``softness`` > 0, in log-tokens) moves between the two by ``sigmoid(log(n / tokens) / softness)``. vsr-static-11's
    gate also keeps the base margin on a text the language kernel does not call English (``english``) and on one
    whose base margin is under ``floor`` (the base head sure it is benign): -8's head false-alarmed on other
    languages and on support wording, where -5 was right."""

    tokens: float
    weight: float
    shift: float
    softness: float = 0.0
    english: bool = False
    floor: float | None = None

    @classmethod
    def of(cls, meta: dict) -> _Gate:
        floor = meta.get("floor")
        return cls(float(meta["gate_tokens"]), float(meta["weight"]), float(meta["shift"]),
                   float(meta.get("softness", 0.0)), bool(meta.get("english", False)),
                   None if floor is None else float(floor))

    def share(self, counts: np.ndarray) -> np.ndarray:
        """How much of the mix each text reads (0: the base head alone, 1: the mix)."""
        n = np.asarray(counts, np.float64)
        if self.softness <= 0:
            return (n >= self.tokens).astype(np.float64)
        return _sigmoid((np.log(np.maximum(n, 1e-9)) - np.log(self.tokens)) / self.softness)

    def mix(self, base: np.ndarray, partner: _Head, reads: Sequence[_Read], counts: np.ndarray) -> np.ndarray:
        share = self.share(counts)
        if self.floor is not None:
            share = share * (base >= self.floor)
        if self.english:
            share = share * np.array([s > 0 and self.is_english(r) for s, r in zip(share, reads)])
        return base + share * ((1 - self.weight) * (self.partner_margins(partner, reads, counts, share) - base)
                               + self.shift)

    @staticmethod
    def is_english(read: _Read) -> bool:
        """Whether the language kernel (the ``language`` signal's) calls the text English; kept with the read."""
        from ...signals.language import detect    # py3langid's tables load on first use (~0.2 s): -11 only

        known = read.windows.get("english")
        if known is None:
            # Asked in NFKC, as the heads read it: full-width English is English to a reader and to the heads.
            known = read.windows["english"] = detect(nfkc(read.text)).code == "en"
        return known

    def partner_margins(self, partner: _Head, reads: Sequence[_Read], counts: np.ndarray,
                        share: np.ndarray) -> np.ndarray:
        """The partner head's margin on each text the gate lets through (0 elsewhere: unused), a text at a time and
        kept with its read. One row is a vector-matrix product (~11 µs for -8's 513 x 512 layer, its subnormal weights
        flushed: ``_Head.__post_init__``); several rows at once were measured at ~25 ms on a busy 2-core box, before
        that flush, with OpenBLAS's threads."""
        out = np.zeros(len(reads))
        for i in np.flatnonzero(share > 0):
            known = reads[i].windows.get(self)
            if known is None:
                z = partner._logits(reads[i].vector[None, :], counts[i:i + 1])
                known = reads[i].windows[self] = float(z[0, 1] - z[0, 0])
            out[i] = known
        return out


@dataclass(frozen=True)
class _Head:
    w: np.ndarray
    b: np.ndarray
    labels: tuple[str, ...]
    features: str      # see _artifacts.features
    ngrams: np.ndarray | None = None   # (buckets, labels): hashed token n-gram weights (-3 jailbreak, -4 domain)
    # (hidden, labels) and (labels,): an output layer over relu(x @ w + b) (-8 jailbreak); None: w, b give the logits
    w2: np.ndarray | None = None
    b2: np.ndarray | None = None
    # -9's jailbreak head: also the worst sentence window of each text (``_windows``); two labels, no n-grams
    windows: WindowScorer | None = None
    # -10's jailbreak head: a second head (-8's) and the length gate that mixes it in (``_Gate``)
    partner: _Head | None = None
    gate: _Gate | None = None

    def __post_init__(self) -> None:
        if self.w2 is not None:
            # -8's hidden layer holds ~26,000 subnormal weights (the L2 fit drove them to ~1e-39); x86 computes with
            # subnormals ~100x slower, so one row cost ~3.5 ms instead of ~11 µs. Those under 1e-20 add nothing a
            # float32 sum keeps: flushed, -8's margins on 28,078 validation texts were bit-identical.
            object.__setattr__(self, "w", np.where(np.abs(self.w) < SUBNORMAL_FLUSH, 0, self.w).astype(self.w.dtype))

    def _logits(self, vectors: np.ndarray, counts: np.ndarray) -> np.ndarray:
        logits = features(self.features, vectors, counts) @ self.w + self.b
        if self.w2 is not None:
            logits = np.maximum(logits, 0) @ self.w2 + self.b2
        return logits

    def probabilities(self, reads: Sequence[_Read]) -> np.ndarray:
        """(texts, labels): each text's probabilities, the texts in one matrix product (two for a hidden layer)."""
        counts = np.array([r.count for r in reads], np.float32)
        logits = self._logits(np.stack([r.vector for r in reads]), counts)
        if self.ngrams is not None:
            logits = logits + np.stack([ngram_logits(self.ngrams, ngram_buckets(r.ids, len(self.ngrams)))
                                        for r in reads])
        if self.windows is None and self.gate is None:
            return _softmax(logits)

        def margin(z: np.ndarray) -> np.ndarray:
            return (z[:, 1] - z[:, 0]).astype(np.float64)

        m = margin(logits)
        if self.gate is not None and self.partner is not None:
            m = self.gate.mix(m, self.partner, reads, counts)
        if self.windows is not None:     # the windows read the base head (-9's rule), whatever the gate did
            m = np.maximum(m, self.windows.worst(reads, lambda v, c: margin(self._logits(v, c))))
        p = _sigmoid(m)
        return np.stack([1.0 - p, p], axis=1)


class VsrStatic:
    """An embedded decision model (vsr-static-1 to -9, and vsr-minilm-1 on its contextual encoder); build one with
    ``vsr_fast.models.vsr_static.load`` (``load_minilm_1``)."""

    def __init__(self, artifacts: Artifacts, embedding: Encoder | None = None) -> None:
        meta = artifacts.meta
        self.meta = meta
        self.name = str(meta["name"])
        # vsr-minilm-1 passes its contextual encoder (``_contextual.MiniLM``); the others read their table.
        self.embedding = embedding or StaticEmbedding(Tokenizer.from_str(artifacts.tokenizer_json), artifacts.table,
                                                      max_tokens=int(meta["max_tokens"]))
        self.heads = {name: _Head(artifacts.heads[f"{name}_w"], artifacts.heads[f"{name}_b"],
                                  tuple(meta["heads"][name]["labels"]),
                                  meta["heads"][name].get("features", "embedding"),
                                  artifacts.heads.get(f"{name}_ngrams"), artifacts.heads.get(f"{name}_w2"),
                                  artifacts.heads.get(f"{name}_b2"), self._windows(name, artifacts),
                                  *self._ensemble(name, artifacts))
                      for name in TRAINED}
        zs = meta["zero_shot"]
        self.temperature = float(zs["temperature"])
        self.cos_a, self.cos_b = (float(v) for v in zs["cosine_logit"])
        self._descriptions: dict[str, np.ndarray] = {}
        self._reads: OrderedDict[str, _Read] = OrderedDict()     # keyed by the text as read
        # int16 holds every id of a 30,522-token vocabulary: a cached text's ids take at most a vector's size.
        vocabulary = self.embedding.tokenizer.get_vocab_size()
        self._ids_dtype = np.int16 if vocabulary <= np.iinfo(np.int16).max else np.int32
        self._lock = threading.Lock()
        # The named-entity stage; its gazetteer is read at prepare(), so a configuration that asks no such
        # label pays nothing.
        self.ner = _ner.Ner()
        self.span_labels = SPAN_LABELS + _ner.LABELS
        self.card = ModelCard(
            name=self.name,
            family=str(meta.get("family", "vsr-static")),
            question_types=["choice", "noul", "score", "set", "span"],
            modalities=["text"],
            presets=list(ANSWERED),
            trained=list(TRAINED),
            # Only what was measured: jailbreak's cut, chosen on validation data (-1: the best
            # accuracy on S-Labs; -2 to -4: at most 1 % false alarms on short benign texts).
            calibrated={"jailbreak": float(meta["heads"]["jailbreak"]["threshold"])},
            span_heads=[],
            span_labels=list(self.span_labels),
            validated_input_tokens=int(meta["max_tokens"]),
            reads={"request": {part: ["noul", "score", "set", *POSITIVE_CHOICES] for part in FOLDED_PARTS}},
        )
        # Warm the description cache with every preset option, so the first request pays nothing.
        self._embed_descriptions([self._describe(k, v) for p in PRESETS.values() for k, v in p.options.items()]
                                 + [c for p in PRESETS.values() for c in (p.noul_criteria or ())])

    def _windows(self, head: str, artifacts: Artifacts) -> WindowScorer | None:
        """The head's sentence-window rule, when model.json gives one (-9's jailbreak head)."""
        rule = self.meta["heads"][head].get("windows")
        if rule is None:
            return None
        labels = tuple(self.meta["heads"][head]["labels"])
        if labels[1:] != ("jailbreak",) or f"{head}_ngrams" in artifacts.heads or not len(artifacts.table):
            raise ArtifactError(f"{self.name}: a window rule needs a benign / jailbreak head on the static table "
                                "without n-grams")
        return WindowScorer(WindowRule.of(rule), Vocabulary.of(self.embedding.tokenizer), artifacts.table)

    def _ensemble(self, head: str, artifacts: Artifacts) -> tuple[_Head | None, _Gate | None]:
        """The head's second head and length gate, when model.json gives them (-10's jailbreak head)."""
        meta = self.meta["heads"][head].get("ensemble")
        if meta is None:
            return None, None
        if head != "jailbreak" or f"{PARTNER}w" not in artifacts.heads:
            raise ArtifactError(f"{self.name}: an ensemble is read on the jailbreak head, from its pinned heads file")
        h = artifacts.heads
        partner = _Head(h[f"{PARTNER}w"], h[f"{PARTNER}b"], tuple(self.meta["heads"][head]["labels"]),
                        str(meta["features"]), h.get(f"{PARTNER}ngrams"), h.get(f"{PARTNER}w2"), h.get(f"{PARTNER}b2"))
        if partner.ngrams is not None:
            raise ArtifactError(f"{self.name}: the ensemble's second head reads no n-grams")
        gate = _Gate.of(meta)
        if gate.english:     # load the language kernel now, not on the first request
            gate.is_english(_Read(np.zeros(0, np.float32), 0.0, np.zeros(0, np.intp), "warm the language kernel"))
        return partner, gate

    # --- the DecisionModel interface -----------------------------------------------------------

    def prepare(self, questions: Sequence[Question]) -> None:
        """Load what ``questions`` will need before the first request: the phone number plans of the common
        locales for any span question (~30 ms), the named-entity gazetteer when one asks for one of its labels
        (~0.1 s). Blocking: call it at configuration load."""
        spans = [q for q in questions if isinstance(q, SpanQuestion)]
        if spans:
            _pii.prepare()
        if any(set(q.criteria) & set(_ner.LABELS) for q in spans):
            self.ner.load()

    def answer(self, entries: Sequence[Entry]) -> list[dict[str, Answer]]:
        """Answers for every entry, keyed like its questions; every text is embedded in one call."""
        plans = [{qid: self._plan(qid, q, e.state) for qid, q in e.questions.items()} for e in entries]
        live = [plan for p in plans for plan in p.values() if isinstance(plan, _Plan)]
        texts = {t for plan in live if not isinstance(plan.question, SpanQuestion)
                 for t in (plan.text, plan.other, *plan.turns) if t}
        vectors = self._read(list(texts))
        descs = self._embed_descriptions([d for plan in live for d in plan.descriptions])
        return [{qid: plan if isinstance(plan, QuestionError) else self._finish(plan, vectors, descs)
                 for qid, plan in p.items()} for p in plans]

    # --- planning: which text, which options ---------------------------------------------------

    def _plan(self, qid: str, q: Question, state: State) -> _Plan | QuestionError:
        # An unknown preset:* name is treated like an operator's own question: zero-shot on its text.
        name = qid.removeprefix("preset:") if qid.startswith("preset:") else None
        preset = name if name in PRESETS else None
        if preset in UNANSWERED:
            return QuestionError("question_failed", f"{self.name} does not answer preset:{preset}")
        kind = q.__struct_config__.tag
        if kind in LIMITS and not LIMITS[kind][0] <= len(q.criteria) <= LIMITS[kind][1]:
            low, high = LIMITS[kind]
            return QuestionError("question_failed", f"a {kind} question takes {low} to {high} options, "
                                 f"not {len(q.criteria)}")
        if isinstance(q, SpanQuestion):
            return self._plan_span(q, state)
        if preset in PAIR_PRESETS:
            if not state.candidate:
                return QuestionError("invalid_input", f"preset:{preset} compares request and candidate; no candidate")
            return _Plan(q, preset, text=state.request, other=state.candidate)
        part = self._subject(preset, state)
        if part is None:
            return QuestionError("invalid_input", "preset:refusal reads the answer; the state has none")
        text = getattr(state, part)
        if not text.strip() and (state.images or state.videos):
            return QuestionError("invalid_input", f"{self.name} reads text only; this state's text is empty")
        plan = _Plan(q, preset, text=text)
        if part == "request" and self._folds(preset, q):
            history = [t for t in state.history[-HISTORY_TURNS:] if t.strip()]
            plan.turns = history + [t for t in state.tool_results[-HISTORY_TURNS:] if t.strip()]
            plan.older = max(len(history) - 1, 0) if preset == "jailbreak" else 0
        if isinstance(q, (ChoiceQuestion, SetQuestion)):
            plan.descriptions = [self._describe(k, v) for k, v in q.criteria.items()]
        elif isinstance(q, ScoreQuestion):
            plan.descriptions = list(q.criteria)
        elif isinstance(q, NoulQuestion):
            statements = self._noul_statements(q)
            if statements is None:
                return QuestionError("question_failed", "a yes/no question needs instructions or criteria")
            plan.descriptions = [s for s in statements if s]
        return plan

    @staticmethod
    def _subject(preset: str | None, state: State) -> str | None:
        """The state part a question reads: the answer, the request, or None when it needs an answer."""
        if preset is None or "response" in PRESETS[preset].stages:
            if state.answer is not None:
                return "answer"
            if preset is not None and PRESETS[preset].stages == ("response",):
                return None
        return "request"

    @staticmethod
    def _folds(preset: str | None, q: Question) -> bool:
        """Whether the worst of several turns is an answer to ``q`` (see the module's docstring)."""
        if isinstance(q, (NoulQuestion, ScoreQuestion, SetQuestion)):
            return True
        return (isinstance(q, ChoiceQuestion) and f"preset:{preset}" in POSITIVE_CHOICES
                and PRESETS[preset].positive in q.criteria)

    @staticmethod
    def _describe(name: str, description: str) -> str:
        return description or name

    @staticmethod
    def _noul_statements(q: NoulQuestion) -> tuple[str | None, str | None] | None:
        true = q.criteria.true if q.criteria else None
        false = q.criteria.false if q.criteria else None
        if not true and not false:
            true = q.instructions
        return (true, false) if true or false else None

    def _plan_span(self, q: SpanQuestion, state: State) -> _Plan | QuestionError:
        if q.head is not None:
            return QuestionError("question_failed", f"{self.name} has no span head {q.head!r}")
        if not set(q.criteria) & set(self.span_labels):
            return QuestionError("question_failed", f"no span detector for {sorted(q.criteria)}; "
                                 f"{self.name} marks {list(self.span_labels)}")
        if q.part not in TEXT_PARTS:
            return QuestionError("question_failed", f"span offsets index a text part, not {q.part!r}")
        text = getattr(state, q.part) or ""
        if not text and q.part == "request" and (state.images or state.videos):
            return QuestionError("invalid_input", f"{self.name} reads text only; this state's text is empty")
        return _Plan(q, None, text=text)

    # --- reading texts, cached ------------------------------------------------------------------

    def _read(self, texts: list[str]) -> dict[str, _Read]:
        """What the model read of each text: from the read cache, the rest in one encode call."""
        if not texts:
            return {}
        # Only the first max_chars characters are ever read, so they are the key: the text itself, not a
        # digest (blake2b cost ~7 µs a 2 KB turn, more than the rest of a cached turn's answer).
        keys = {t: t[: self.embedding.max_chars] for t in texts}
        found: dict[str, _Read] = {}
        with self._lock:
            for t, k in keys.items():
                hit = self._reads.get(k)
                if hit is not None:
                    self._reads.move_to_end(k)
                    found[t] = hit
        missing = [t for t in texts if t not in found]
        if missing:
            # Read in NFKC (``_normalise``): full-width or ligature letters are the words they stand for.
            encoded, counts, ids = self.embedding.encode_read([nfkc(keys[t]) for t in missing])
            fresh = {t: _Read(v.copy(), float(c), i.astype(self._ids_dtype), keys[t])
                     for t, v, c, i in zip(missing, encoded, counts, ids)}
            found.update(fresh)
            with self._lock:
                for t, r in fresh.items():
                    self._reads[keys[t]] = r
                while len(self._reads) > READ_CACHE:
                    self._reads.popitem(last=False)
        return found

    # --- embedding option descriptions, cached -------------------------------------------------

    def _embed_descriptions(self, descriptions: list[str]) -> dict[str, np.ndarray]:
        """Vectors for ``descriptions``, from the cache or from one encode call; never raises KeyError."""
        with self._lock:
            found = {d: self._descriptions[d] for d in descriptions if d in self._descriptions}
        missing = list(dict.fromkeys(d for d in descriptions if d not in found))
        if missing:
            fresh = dict(zip(missing, self.embedding.encode(missing)))
            found.update(fresh)
            with self._lock:
                if len(self._descriptions) + len(fresh) > DESCRIPTION_CACHE:
                    self._descriptions.clear()   # operators' own options churn rarely: start afresh
                self._descriptions.update(fresh)
        return found

    # --- answers -------------------------------------------------------------------------------

    def _finish(self, plan: _Plan, vectors: dict[str, _Read], descs: dict[str, np.ndarray]) -> Answer:
        if not plan.turns:
            return self._answer(plan, plan.text, vectors, descs)
        texts = [plan.text, *plan.turns]
        q = plan.question
        if isinstance(q, SetQuestion):       # each label takes its own worst turn
            answers = [self._answer(plan, t, vectors, descs) for t in texts]
            return SetAnswer({k: max(a.probabilities[k] for a in answers)    # type: ignore[union-attr]
                              for k in q.criteria})
        # Ranked in one matrix product (a turn at a time cost ~90 µs of numpy calls each), then the worst
        # turn answered as on its own; argmax keeps the current turn on a tie.
        severity = self._severity(plan, [self._of(vectors, t) for t in texts], descs)
        older = severity[1:1 + plan.older]
        severity[1:1 + plan.older] = np.where(older >= HISTORY_SURE, older, -np.inf)
        worst = int(np.argmax(severity))
        return self._answer(plan, texts[worst], vectors, descs)

    def _severity(self, plan: _Plan, reads: list[_Read], descs: dict[str, np.ndarray]) -> np.ndarray:
        """How bad each text's answer is: P(yes), the expected level, or P(positive) of a preset choice."""
        q = plan.question
        vs = np.stack([r.vector for r in reads])
        cos = (vs @ np.stack([descs[d] for d in plan.descriptions]).T if plan.descriptions
               else np.zeros((len(reads), 0)))
        if isinstance(q, ScoreQuestion):
            return _softmax(cos / self.temperature) @ np.arange(cos.shape[1])
        if isinstance(q, NoulQuestion):
            return self._noul(q, cos)
        options = list(q.criteria)     # a preset choice with a positive option (_folds)
        return self._choice_probabilities(plan, options, reads, cos)[:, options.index(PRESETS[plan.preset].positive)]

    def _of(self, vectors: dict[str, _Read], text: str) -> _Read:
        """What was read of ``text``; an empty text reads as no token."""
        return vectors.get(text) or _Read(np.zeros(self.embedding.dim, np.float32), 0.0, np.zeros(0, np.intp))

    def _answer(self, plan: _Plan, text: str, vectors: dict[str, _Read], descs: dict[str, np.ndarray]) -> Answer:
        """``plan``'s question answered on one of its texts."""
        q = plan.question
        if isinstance(q, SpanQuestion):
            asked = frozenset(q.criteria)
            # Found in the NFKC text, offsets moved back to the client's characters (masking replaces those).
            folded = fold(text)
            try:
                named = self.ner.find(folded.text) if text and asked & set(_ner.LABELS) else ()
            except ArtifactError as exc:      # the gazetteer differs from its pin: this question fails, not the batch
                return QuestionError("question_failed", str(exc))
            spans = [(label, *folded.span(start, end), probability)
                     for label, start, end, probability in _pii.find(folded.text, asked, named)]
            return SpanAnswer([Span(label, start, end, probability, text[start:end])
                               for label, start, end, probability in spans])
        read = self._of(vectors, text)
        v = read.vector
        if plan.preset in PAIR_PRESETS:
            other = vectors.get(plan.other)
            cos = float(v @ other.vector) if other is not None else 0.0
            return NoulAnswer(float(np.clip(cos, 0.0, 1.0)))
        cos = np.array([v @ descs[d] for d in plan.descriptions]) if plan.descriptions else np.zeros(0)
        if isinstance(q, ChoiceQuestion):
            return self._choice(plan, q, read, cos)
        if isinstance(q, ScoreQuestion):
            p = _softmax(cos / self.temperature)
            keys = [str(i) for i in range(len(q.criteria))]
            return ScoreAnswer(score=float(np.arange(len(p)) @ p), confidence=float(p.max()),
                               probabilities=dict(zip(keys, p.round(6).tolist())), legend=dict(zip(keys, q.criteria)))
        if isinstance(q, SetQuestion):
            return SetAnswer(dict(zip(q.criteria, _sigmoid(self.cos_a * cos + self.cos_b).round(6).tolist())))
        return NoulAnswer(float(self._noul(q, cos[None, :])[0]))

    def _choice(self, plan: _Plan, q: ChoiceQuestion, read: _Read, cos: np.ndarray) -> ChoiceAnswer:
        options = list(q.criteria)
        p = self._choice_probabilities(plan, options, [read], cos[None, :])[0]
        best = int(p.argmax())
        return ChoiceAnswer(choice=options[best], confidence=float(p[best]),
                            probabilities=dict(zip(options, p.round(6).tolist())))

    def _choice_probabilities(self, plan: _Plan, options: list[str], reads: list[_Read],
                              cos: np.ndarray) -> np.ndarray:
        """(texts, options): the trained head's probabilities where it covers the options, else zero-shot."""
        head = self.heads.get(plan.preset) if plan.preset in TRAINED else None
        if head is not None and len(options) >= 2 and set(options) <= set(head.labels):
            p = head.probabilities(reads)[:, [head.labels.index(o) for o in options]]
            return p / p.sum(-1, keepdims=True)   # a narrowed question: the head's probabilities over what was asked
        return _softmax(cos / self.temperature)

    def _noul(self, q: NoulQuestion, cos: np.ndarray) -> np.ndarray:
        """(texts,): P(yes) from each row of cosines with the question's statements."""
        true, false = self._noul_statements(q) or (None, None)
        if true and false:
            return _softmax(cos / self.temperature)[:, 0]
        p = _sigmoid(self.cos_a * cos[:, 0] + self.cos_b)
        return p if true else 1.0 - p


VsrStatic1 = VsrStatic   # the name this class had when vsr-static-1 was the only model
