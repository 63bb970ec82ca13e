"""A refusal written as text: the answer opens by declining what was asked (English phrasing only).

Read by escalate's ``accept: {refusal: false}`` (``selection.accept``) and by the response stage's ``refusal``
rules (``routing.guard``), where a text refusal matches without asking the decision model.

A refusal leads: only the answer's opening is read (``OPENING`` characters), so a long answer that quotes or
discusses a refusal further down is not one. Within the opening, a refusal is the first person declining an act
of answering ("I can't help with", "I won't provide", "I'm not able to assist", "I must decline", "As an AI, I
cannot ...") or citing its own rules ("against my guidelines"). An apology or a "can't" alone is ordinary speech
("Sorry for the confusion, here is the fixed code", "You can't divide by zero", "I can't reproduce the bug, but
try ..."): the verb must be one of declining to answer, and a clause that asks for what is missing ("I can't help
without the stack trace") is a question, not a refusal. An opening that declines part of the ask and offers
something else ("I can't provide medical advice, but ...") is a refusal of what was asked. A phrase inside
double quotes is an example being written, not the answer's own voice.

bench/refusal.py measures it on refusals and ordinary answers from sources that did not write these phrases.
"""
from __future__ import annotations

import re

OPENING = 300

# Contractions and their long forms read alike, curly quotes as straight ones: one pass over the opening.
_QUOTES = {"\u2018": "'", "\u2019": "'", "\u02bc": "'", "`": "'", "\u201c": '"', "\u201d": '"'}
_LONG = {"i will not": "i won't", "i would not": "i wouldn't", "i am": "i'm", "i would": "i'd", "i will": "i'll",
         "i have": "i've", "cannot": "can't", "can not": "can't", "will not": "won't", "do not": "don't",
         "is not": "isn't", "it is": "it's", "that is": "that's", "should not": "shouldn't",
         "would not": "wouldn't", "does not": "doesn't"}     # "i will not" before "i will": the longer first
_SPELLINGS = {**_QUOTES, **_LONG}
_SPELLING = re.compile("[" + "".join(_QUOTES) + r"]|\b(?:" + "|".join(_LONG) + r")\b")
_SPACE = re.compile(r"\s+")
# Every pattern below needs one of these: most answers have none and are not read further.
_CUE = re.compile(r"can\W?no|n[o'\u2019]t\b|unable|declin|refus|against|violat|contrary|breach|conflict|outside|"
                  r"guidelines|programming|as an?\b|appropriate|comfortable|rather|prefer")

# Acts of answering: declining one of these is declining the request. Verbs of perceiving or finding ("see",
# "find", "reproduce", "access") state a limit and go on answering, so they are not here.
_ACT = (r"(?:help|assist|aid|provide|give|offer|share|supply|create|generate|produce|write|compose|draft|"
        r"do (?:that|this|so|what)|"
        r"fulfil|fulfill|comply|complete|perform|carry out|engage|participate|support|facilitate|condone|"
        r"encourage|promote|endorse|answer|respond|reply|discuss|talk about|accommodate|continue|proceed|honou?r|"
        r"grant|teach|guide|walk you through|show you how|explain how|tell you how|disclose|reveal|"
        r"be of (?:help|assistance|service)|be involved|take part|go along)\b")
# Idioms: "I can't help but notice", "I won't give up", "I can't tell you how much ...".
_IDIOM = (r"(?!(?<=help) (?:but|feeling|thinking|wondering|noticing|laughing|smiling|myself|it)\b)"
          r"(?!(?<=give) up\b)(?!(?<=how) (?:many|much|often|long|glad|happy|grateful|excited|sorry)\b)")
# "I don't" declines only the acts an assistant declines by policy: "I don't write it down" is no refusal.
_DONT = r"don't (?:provide|assist|engage|condone|promote|facilitate|generate|help (?:with|you|create|write))\b"
_NOT = (r"(?:can't|won't|shouldn't|refuse to|must not|(?:can't|won't|'m not going to) be able to|"
        r"'m (?:not |un)able to|'m not (?:going|allowed|permitted|in a position|willing|about) to|"
        r"'d (?:rather|prefer) not|prefer not to)"
        r"(?: and (?:can't|won't|shouldn't))?")
_FILLER = r"(?: (?:really|possibly|in good conscience|ethically|legally|responsibly|personally|directly|" \
          r"actually|simply|just|further|fully|safely|willingly|knowingly))*"
_PATTERNS = [
    # I can't help with that / I won't provide / I'm not able to assist / I'd rather not discuss
    re.compile(rf"\bi ?(?:{_NOT}{_FILLER} {_ACT}{_IDIOM}|{_DONT})(?P<rest>[^.!?;]*)"),
    # I'm not comfortable providing / I don't feel comfortable writing
    re.compile(r"\bi(?:'m not| don't feel| do not feel) comfortable (?:with )?(?:help|assist|provid|giv|shar|"
               r"creat|generat|writ|produc|engag|participat|discuss|answer)ing\b"),
    # I'm sorry, but I can't. / I can't do that.
    re.compile(r"\bi (?:can't|won't)(?: do (?:that|this|so)| comply)?(?: for you)?\s*[.!]"),
    # I must decline / I have to refuse / I'll have to pass / I respectfully decline
    re.compile(r"\bi(?: must|'ll have to|'ve to| have to|'m going to have to| need to| will have to)?"
               r"(?: respectfully| politely)? (?:decline|refuse)\b(?! to (?:believe|accept|think|let|give up))"),
    # That's not something I can help with / not something I'm able to do
    re.compile(r"\bnot something i(?: can|'m able to|'ll| will|'m going to|'m comfortable|'m willing to)\b"),
    # against my guidelines / violates my programming / my guidelines don't allow
    re.compile(r"\b(?:against|violates?|contrary to|outside of|breach of|conflicts? with) "
               r"(?:my (?:(?:ethical|content|usage|safety|core) )?(?:guidelines|policies|policy|programming|"
               r"principles|rules|values)|(?:the|openai's|our) (?:ethical|content|usage|safety) "
               r"(?:guidelines|policies|policy))\b"),
    re.compile(r"\bmy (?:guidelines|programming|policies|principles|rules) (?:don't|doesn't|won't|prevent|"
               r"prohibit|forbid|do not allow|restrict)"),
    # As an AI (language model), I can't ... : the disclaimer and an inability in one sentence
    re.compile(r"\bas an? (?:ai|artificial intelligence|language model|large language model|digital assistant|"
               r"ai language model|ai assistant)\b[^.!?]{0,60}?\bi ?(?:can't|won't|'m (?:not |un)able|don't have "
               r"the ability)\b"),
    # It's not appropriate for me to / it would not be appropriate for me
    re.compile(r"\b(?:it's|it isn't|it wouldn't be|it would be in)(?: not)? (?:appropriate|ethical|responsible) "
               r"for me to\b"),
]
# A clause that names what is missing asks for it ("I can't help without the stack trace", "I can't say
# which unless you paste it"): the condition follows the act within a few words, before any comma.
_ASKS = re.compile(r"^(?: [^ ,]+){0,5} (?:without|unless|until)\b")


def _normal(text: str) -> str:
    return _SPELLING.sub(lambda m: _SPELLINGS[m.group(0)], _SPACE.sub(" ", text.lower()))


def refusal_text(text: str | None) -> str | None:
    """The refusal phrasing the answer opens with (lower case, for a trace), or None when it does not refuse."""
    if not text:
        return None
    opening = text.lstrip(" \t\r\n#*>_-")[:OPENING]
    if not _CUE.search(opening.lower()):
        return None
    opening = _normal(opening)
    for pattern in _PATTERNS:
        for found in pattern.finditer(opening):
            if opening.count('"', 0, found.start()) % 2:
                continue        # quoted: the answer is writing someone's words
            rest = found.groupdict().get("rest")
            if rest is not None and _ASKS.match(rest):
                continue
            phrase = found.group(0)
            if rest:
                phrase = phrase[:len(phrase) - len(rest)]
            return phrase.strip(" .!")
    return None


__all__ = ["OPENING", "refusal_text"]
