"""What every signal reads and what it answers.

A request becomes one ``CanonicalRequest`` (protocol-neutral) before any
signal runs; each signal family compiles its rules once at load and answers
``Outcome``s for the rule names a recipe reads.
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

from ..protocol.chat import AudioPart, ChatRequest, FilePart, ImagePart, Message, TextPart


@dataclass(frozen=True, slots=True)
class Identity:
    """The caller as a trusted authenticator named it; ``user`` None means anonymous."""

    user: str | None = None
    groups: frozenset[str] = frozenset()


ANONYMOUS = Identity()


@dataclass(slots=True)
class Outcome:
    """One rule's answer. ``matched`` None means unknown (three-valued logic)."""

    matched: bool | None
    value: float | None = None        # the number the rule publishes (count, density, tokens)
    confidence: float = 1.0           # for strategy: confidence and projections
    detail: str | None = None         # why, in a few words, for the preview and the trace
    labels: dict[str, bool] | None = None   # per option, for conditions that name a label
    spans: list | None = None               # span answers, for masking


class CanonicalRequest:
    """One request as every signal sees it, whatever protocol it came in."""

    def __init__(
        self,
        messages: list[Message],
        *,
        tools: int = 0,
        metadata: dict[str, str] | None = None,
        identity: Identity = ANONYMOUS,
    ) -> None:
        self.messages = messages
        self.tool_count = tools
        self.metadata = metadata or {}
        self.identity = identity

    @classmethod
    def from_chat(cls, request: ChatRequest, identity: Identity = ANONYMOUS) -> "CanonicalRequest":
        return cls(request.messages, tools=len(request.tools or ()), metadata=request.metadata, identity=identity)

    @cached_property
    def user_turns(self) -> list[str]:
        """The text of every user message, oldest first."""
        return [m.text() for m in self.messages if m.role == "user"]

    @cached_property
    def text(self) -> str:
        """The current user turn: the last user message's text."""
        turns = self.user_turns
        return turns[-1] if turns else ""

    @cached_property
    def history(self) -> list[str]:
        """The earlier user turns, oldest first."""
        return self.user_turns[:-1]

    @cached_property
    def current_index(self) -> int:
        """Index of the current user turn in ``messages`` (-1 when there is none)."""
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i].role == "user":
                return i
        return -1

    def previous_turns(self, n: int) -> list[tuple[str, str]]:
        """The last ``n`` user and assistant turns before the current one, oldest first."""
        if n <= 0:
            return []
        earlier = self.messages[: max(self.current_index, 0)]
        turns = [(m.role, m.text()) for m in earlier if m.role in ("user", "assistant") and m.text()]
        return turns[-n:]

    @cached_property
    def previous_answer(self) -> str | None:
        """The assistant answer the current turn replies to."""
        for m in reversed(self.messages[: max(self.current_index, 0)]):
            if m.role == "assistant":
                return m.text()
        return None

    @cached_property
    def tool_results(self) -> list[str]:
        return [m.text() for m in self.messages if m.role in ("tool", "function")]

    @cached_property
    def images(self) -> list[str]:
        """Image URLs of the current turn."""
        i = self.current_index
        if i < 0 or isinstance(self.messages[i].content, str):
            return []
        return [p.image_url.url for p in self.messages[i].content or () if isinstance(p, ImagePart)]

    @cached_property
    def all_text_bytes(self) -> int:
        """UTF-8 size of every message's text, the basis of the token estimate."""
        return sum(len(m.text().encode()) for m in self.messages)

    @cached_property
    def modalities(self) -> frozenset[str]:
        """The media of the parts the request carries."""
        found: set[str] = set()
        for m in self.messages:
            if isinstance(m.content, str):
                if m.content:
                    found.add("text")
                continue
            for part in m.content or ():
                if isinstance(part, TextPart):
                    found.add("text")
                elif isinstance(part, ImagePart):
                    found.add("image")
                elif isinstance(part, AudioPart):
                    found.add("audio")
                elif isinstance(part, FilePart):
                    found.add(_file_medium(part))
        return frozenset(found)


def _file_medium(part: FilePart) -> str:
    mime = str(part.file.get("mime_type") or part.file.get("filename") or "").lower()
    for medium, marks in (("video", ("video/", ".mp4", ".mov", ".webm")), ("audio", ("audio/", ".mp3", ".wav")),
                          ("image", ("image/", ".png", ".jpg", ".jpeg", ".gif", ".webp"))):
        if any(mark in mime for mark in marks):
            return medium
    return "file"


class Family(Protocol):
    """A compiled signal type: the rules of one ``recipes[].signals.<key>`` list."""

    condition_type: str

    def names(self) -> Collection[str]:
        """The rule names it declares."""
        ...

    def evaluate(self, request: CanonicalRequest, names: Collection[str]) -> dict[str, Outcome]:
        """An Outcome for each of ``names`` (a subset of ``names()``)."""
        ...


@dataclass
class CompileErrors:
    """Load errors a family found in its rules, as ``<path>: <code>: <message>`` lines."""

    lines: list[str] = field(default_factory=list)

    def add(self, path: str, code: str, message: str) -> None:
        self.lines.append(f"{path}: {code}: {message}")


class RuleFamily:
    """Base of the compiled families: rule name -> that rule's compiled form.

    A rule that failed to load is kept as None, so conditions naming it are not
    also reported as undeclared; the load fails on its own error anyway.
    """

    condition_type: str = ""

    def __init__(self, rules: dict) -> None:
        self._rules = rules

    def names(self) -> Collection[str]:
        return self._rules.keys()


def compile_each(rules: list, path: str, errors: CompileErrors, compile_one) -> dict:
    """``{name: compile_one(rule, rule_path, errors)}``; a repeated name is a load error."""
    compiled: dict = {}
    for rule in rules:
        rule_path = f"{path}[{rule.name}]"
        if rule.name in compiled:
            kind = path.rsplit(".", 1)[-1]
            errors.add(f"{rule_path}.name", "duplicate_name", f"{kind} rule {rule.name!r} is declared more than once")
            continue
        compiled[rule.name] = compile_one(rule, rule_path, errors)
    return compiled
