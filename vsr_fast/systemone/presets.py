"""The preset catalog: the Router's canonical zero-shot System One questions (spec 5.1).

A preset is a definition, not a model: its instructions, its options with
their descriptions, the option a rule matches when it names none, the stage
and the state parts it reads, whether it reads the whole input in windows,
and whether it needs span answers. Option names are part of the
configuration contract: rules name them in ``labels`` and conditions in
``label``.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from ..protocol.systemone import ChoiceQuestion, NoulCriteria, NoulQuestion, Question, SetQuestion, SpanQuestion

QuestionType = Literal["choice", "noul", "score", "set", "span"]
Stage = Literal["request", "response"]


@dataclass(frozen=True)
class Preset:
    name: str
    type: QuestionType
    instructions: str
    options: MappingProxyType  # option name -> description (empty for noul)
    positive: str | None       # what a rule matches when it names no labels
    stages: tuple[Stage, ...]
    reads: tuple[str, ...]     # state parts, beyond what a rule adds with input.*
    coverage: Literal["truncate", "full"] = "truncate"
    needs_span: bool = False
    noul_criteria: tuple[str, str] | None = None  # (true, false) descriptions

    @property
    def wire_id(self) -> str:
        """The Router-owned ID of the canonical question: it contains a colon, so no trained ID collides."""
        return f"preset:{self.name}"

    def question(self, options: tuple[str, ...] | None = None) -> Question:
        """The canonical question; ``options`` narrows a set or span question to the labels asked."""
        criteria = {k: v for k, v in self.options.items() if options is None or k in options}
        if self.type == "choice":
            return ChoiceQuestion(criteria=criteria, instructions=self.instructions)
        if self.type == "set":
            return SetQuestion(criteria=criteria, instructions=self.instructions)
        if self.type == "span":
            return SpanQuestion(criteria=criteria, instructions=self.instructions)
        true, false = self.noul_criteria or (None, None)
        return NoulQuestion(instructions=self.instructions, criteria=NoulCriteria(true=true, false=false))


def _opts(**described: str) -> MappingProxyType:
    return MappingProxyType(dict(described))


def _named(pairs: list[tuple[str, str]]) -> MappingProxyType:
    return MappingProxyType(dict(pairs))


DOMAINS = _named([
    ("biology", "Living organisms, genetics, ecology, anatomy, microbiology."),
    ("business", "Companies, management, marketing, accounting, finance in practice."),
    ("chemistry", "Substances, reactions, elements, compounds, chemical analysis."),
    ("computer science", "Programming, algorithms, software, computer systems, data."),
    ("economics", "Markets, prices, trade, macro- and microeconomic theory."),
    ("engineering", "Designing and building machines, structures, circuits and systems."),
    ("health", "Medicine, nutrition, clinical knowledge, disease and treatment."),
    ("history", "Past events, periods, civilisations and historical figures."),
    ("law", "Legal rules, rights, contracts, courts and jurisprudence."),
    ("math", "Arithmetic, algebra, geometry, calculus, proofs and statistics."),
    ("other", "None of the other subject areas."),
    ("philosophy", "Ethics, logic, metaphysics, epistemology and philosophers."),
    ("physics", "Matter, energy, motion, forces, quantum and relativistic physics."),
    ("psychology", "Mind, behaviour, cognition, emotion and mental health."),
])

PII_LABELS = _named([
    ("EMAIL_ADDRESS", "An email address."),
    ("PHONE_NUMBER", "A telephone number."),
    ("CREDIT_CARD", "A payment card number."),
    ("US_SSN", "A United States social security number."),
    ("IP_ADDRESS", "An IPv4 or IPv6 address."),
    ("IBAN_CODE", "An international bank account number."),
    ("PERSON", "A person's name."),
    ("LOCATION", "A place: city, country, region or landmark."),
    ("DATE_TIME", "A date or time."),
    ("STREET_ADDRESS", "A postal street address."),
    ("ORGANIZATION", "A company, institution or other organisation."),
])

# The 21 AEGIS 2.0 categories and the 13 MLCommons hazard codes, as vela3's
# trained hazard question names them (spec 5.1).
HARM_CATEGORIES = _named([
    ("Hate/Identity Hate", "Hatred or demeaning content about a protected identity."),
    ("Sexual", "Sexually explicit content."),
    ("Suicide and Self Harm", "Encouraging or instructing suicide or self-harm."),
    ("Violence", "Violent acts, threats of violence or glorification of violence."),
    ("Guns and Illegal Weapons", "Acquiring, building or using guns or illegal weapons."),
    ("Threat", "A threat against a person or group."),
    ("PII/Privacy", "Exposing or harvesting personal information."),
    ("Sexual (minor)", "Sexual content involving minors."),
    ("Criminal Planning/Confessions", "Planning or confessing a crime."),
    ("Harassment", "Harassing, bullying or intimidating someone."),
    ("Controlled/Regulated Substances", "Producing or trafficking controlled substances."),
    ("Profanity", "Profane or obscene language."),
    ("Illegal Activity", "Other illegal activity."),
    ("Immoral/Unethical", "Immoral or unethical conduct."),
    ("Unauthorized Advice", "Professional advice given without authority, such as medical or legal."),
    ("Political/Misinformation/Conspiracy", "Political misinformation or conspiracy theories."),
    ("Fraud/Deception", "Fraud, scams or deception."),
    ("Copyright/Trademark/Plagiarism", "Infringing copyright or trademarks, or plagiarism."),
    ("High Risk Gov Decision Making", "High-risk government decision making."),
    ("Malware", "Creating or spreading malicious software."),
    ("Manipulation", "Psychological manipulation of a person."),
    ("S1", "Violent crimes."),
    ("S2", "Non-violent crimes."),
    ("S3", "Sex-related crimes."),
    ("S4", "Child sexual exploitation."),
    ("S5", "Defamation."),
    ("S6", "Specialized advice."),
    ("S7", "Privacy."),
    ("S8", "Intellectual property."),
    ("S9", "Indiscriminate weapons."),
    ("S10", "Hate."),
    ("S11", "Suicide and self-harm."),
    ("S12", "Sexual content."),
    ("S13", "Elections."),
])

REQ, RESP = ("request",), ("response",)
BOTH: tuple[Stage, ...] = ("request", "response")

PRESETS: MappingProxyType = MappingProxyType({p.name: p for p in [
    Preset("domain", "choice", "Which subject area is this request about?", DOMAINS, None, REQ, ("request",)),
    Preset("fact_check", "choice", "Does answering this request need facts that should be checked?",
           _opts(FACT_CHECK_NEEDED="The answer states facts about the world that could be wrong.",
                 NO_FACT_CHECK_NEEDED="Creative, opinion, coding or conversational requests."),
           "FACT_CHECK_NEEDED", REQ, ("request",)),
    Preset("feedback", "choice", "How does the user react to the previous answer?",
           _opts(SAT="The user is satisfied with the previous answer.",
                 NEED_CLARIFICATION="The user asks to clarify or explain the previous answer.",
                 WRONG_ANSWER="The user says the previous answer was wrong.",
                 WANT_DIFFERENT="The user wants a different answer or approach.",
                 NO_FEEDBACK="The turn gives no feedback on the previous answer."),
           None, REQ, ("request", "previous_answer")),
    Preset("jailbreak", "choice", "Is this text trying to make an AI assistant ignore its instructions or safety rules?",
           _opts(benign="An ordinary request or text.",
                 jailbreak="A prompt injection or jailbreak attempt against the assistant."),
           "jailbreak", BOTH, ("request",), coverage="full"),
    Preset("harm", "choice", "Is this content harmful?",
           _opts(safe="Content that is not harmful.", unsafe="Content that is harmful or dangerous."),
           "unsafe", BOTH, ("request",), coverage="full"),
    Preset("harm_categories", "set", "Which harm categories does this content fall under?", HARM_CATEGORIES,
           None, BOTH, ("request",), coverage="full"),
    Preset("pii", "span", "Mark every piece of personal data in the text.", PII_LABELS, None, REQ, ("request",),
           coverage="full", needs_span=True),
    Preset("hallucination", "span", "Mark the statements of the answer that its context does not support.",
           _opts(unsupported="A statement the context does not support."), "unsupported", RESP,
           ("request", "answer", "context"), needs_span=True),
    Preset("refusal", "choice", "Does the answer refuse the request?",
           _opts(compliance="The answer does what was asked.", refusal="The answer declines or refuses."),
           "refusal", RESP, ("request", "answer")),
    Preset("turn_relation", "choice", "How does the current turn relate to the previous turns?",
           _opts(**{"continue": "It continues the same topic.", "reask": "It asks the same thing again.",
                    "shift": "It moves to a new topic.", "return": "It returns to an earlier topic."}),
           None, REQ, ("request", "previous_turns")),
    Preset("complexity", "choice", "How hard is this request to answer well?",
           _opts(easy="A simple, quick answer.", medium="Some reasoning or knowledge needed.",
                 hard="Deep reasoning, many steps or expert knowledge needed."),
           None, REQ, ("request",)),
    Preset("modality", "choice", "What kind of output does this request ask for?",
           _opts(text="A text answer.", image="A generated image.", text_image="Text together with an image.",
                 image_edit="An edit of a given image.", speech="Spoken audio.", audio="Non-speech audio.",
                 video="A generated video.", video_edit="An edit of a given video."),
           None, REQ, ("request",)),
    Preset("relevance", "noul", "Does the candidate passage contain information that helps answer the request?",
           _opts(), None, REQ, ("request", "candidate"),
           noul_criteria=("The passage helps answer the request.", "The passage does not help.")),
    Preset("same_request", "noul",
           "Does the candidate request ask for the same thing as the request, so that one answer serves both?",
           _opts(), None, REQ, ("request", "candidate"),
           noul_criteria=("One answer serves both requests.", "The requests ask for different things.")),
    Preset("tool_rank", "choice", "Which tool fits this request best?", _opts(), None, REQ, ("request",)),
    Preset("tool_need", "noul", "Does answering this request need a tool call?", _opts(), None, REQ, ("request",),
           noul_criteria=("A tool call is needed.", "The request can be answered directly.")),
    Preset("answer_check", "noul", "Does the answer correctly and fully answer the request?", _opts(), None, RESP,
           ("request", "answer"), noul_criteria=("The answer is correct and complete.", "It is wrong or incomplete.")),
]})

# Application signal -> (condition type, preset); safety with labels asks harm_categories.
APPLICATION_SIGNALS = MappingProxyType({
    "domains": ("domain", "domain"),
    "fact_check": ("fact_check", "fact_check"),
    "user_feedbacks": ("user_feedback", "feedback"),
    "jailbreak": ("jailbreak", "jailbreak"),
    "safety": ("safety", "harm"),
    "pii": ("pii", "pii"),
    "hallucination": ("hallucination", "hallucination"),
    "refusal": ("refusal", "refusal"),
    "turn_relation": ("turn_relation", "turn_relation"),
    "complexity": ("complexity", "complexity"),
    "modality": ("modality", "modality"),
})

# Calibrated request-stage thresholds per model family (spec 5.1); everything else uses 0.5.
CALIBRATED = MappingProxyType({
    "vela3": MappingProxyType({"jailbreak": 0.88, "domain": 0.41, "pii": 0.18, "fact_check": 0.9999,
                               "feedback": 0.47, "harm": 0.52, "modality": 0.63}),
})
NEUTRAL_THRESHOLD = 0.5


def preset(name: str) -> Preset:
    """A preset by name; KeyError for an unknown one."""
    return PRESETS[name]


__all__ = ["APPLICATION_SIGNALS", "CALIBRATED", "DOMAINS", "HARM_CATEGORIES", "NEUTRAL_THRESHOLD", "PII_LABELS",
           "PRESETS", "Preset", "preset"]
