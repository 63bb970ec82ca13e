"""The protocol-neutral request every signal reads, and the caller it came from.

Each client API's adapter builds one ``CanonicalRequest`` from its own body
(as Chat messages); the signals read only this.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .chat import AudioPart, ChatRequest, FilePart, ImagePart, Message, TextPart


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is calling, as one of the identity sources named it: a client key the router holds, or a trusted
    listener's headers. ``user`` None means anonymous. The rest of the code reads only this.

    ``entrypoints`` / ``models`` None: no restriction. ``key_id`` names the key, never the key itself.
    """

    user: str | None = None
    groups: frozenset[str] = frozenset()
    team: str | None = None
    tenant: str | None = None
    key_id: str | None = None
    entrypoints: frozenset[str] | None = None
    models: frozenset[str] | None = None
    admin: bool = False
    limits: Any = None          # the key's own config.auth.Limits, when it has any

    @property
    def owner(self) -> str | None:
        """Who owns what this caller leaves on the router for later requests (its stored Responses, its
        sessions' affinity): its tenant, else its key, else its user, else its team; None when anonymous.

        The tenant, as OpenAI scopes response ids to the project: every key of one tenant continues the
        tenant's threads, no other caller can tell them from unknown ones. Without a tenant, the key (the
        narrowest the router knows); behind a trusted authenticator without keys, the user, else the team.
        Anonymous callers are one owner: the router cannot tell them apart (a router without identity serves one
        tenant). The kind prefixes the name, so a tenant and a key of one name never share.
        """
        if self.tenant:
            return f"tenant:{self.tenant}"
        if self.key_id:
            return f"key:{self.key_id}"
        if self.user:
            return f"user:{self.user}"
        if self.team:
            return f"team:{self.team}"
        return None

    def reaches(self, model: str) -> bool:
        """Whether a request of this caller may be sent to provider model ``model``, named or routed to (a shadow
        copy included): one of its key's ``models``, or any when the key lists none."""
        return self.models is None or model in self.models


ANONYMOUS = Identity()

# What joins the current turn's user messages into the one text the signals read.
TURN_JOIN = "\n\n"


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
        # The legacy functions are tools too (a decision on tool use sees them).
        tools = len(request.tools or ()) + len(request.functions or ())
        return cls(request.messages, tools=tools, metadata=request.metadata, identity=identity)

    @cached_property
    def user_turns(self) -> list[str]:
        """The text of every user message, oldest first."""
        return [m.text() for m in self.messages if m.role == "user"]

    @cached_property
    def current(self) -> tuple[int, ...]:
        """Indexes in ``messages`` of the current user turn: every user message after the last assistant
        message before the last user message (consecutive user messages are one turn, as Anthropic reads
        them and as a Responses input lists them). A tool loop's results after the last user message leave
        the turn that asked for them current. Empty when no message is the user's."""
        last = next((i for i in range(len(self.messages) - 1, -1, -1) if self.messages[i].role == "user"), -1)
        if last < 0:
            return ()
        start = last
        while start > 0 and self.messages[start - 1].role != "assistant":
            start -= 1
        return tuple(i for i in range(start, last + 1) if self.messages[i].role == "user")

    @cached_property
    def turn_texts(self) -> list[str]:
        """The current turn's user messages' texts, oldest first, empty ones left out."""
        return [t for t in (self.messages[i].text() for i in self.current) if t]

    @cached_property
    def text(self) -> str:
        """The current user turn: its user messages' texts, joined by a blank line (``TURN_JOIN``)."""
        return TURN_JOIN.join(self.turn_texts)

    @cached_property
    def history(self) -> list[str]:
        """The earlier user turns, oldest first: each user message before the current turn."""
        return [m.text() for m in self.messages[: self._start] if m.role == "user"]

    @cached_property
    def _start(self) -> int:
        return self.current[0] if self.current else 0

    def previous_turns(self, n: int) -> list[tuple[str, str]]:
        """The last ``n`` user and assistant turns before the current one, oldest first."""
        if n <= 0:
            return []
        earlier = self.messages[: self._start]
        turns = [(m.role, m.text()) for m in earlier if m.role in ("user", "assistant") and m.text()]
        return turns[-n:]

    @cached_property
    def previous_answer(self) -> str | None:
        """The assistant answer the current turn replies to."""
        for m in reversed(self.messages[: self._start]):
            if m.role == "assistant":
                return m.text()
        return None

    @cached_property
    def tool_results(self) -> list[str]:
        return [m.text() for m in self.messages if m.role in ("tool", "function")]

    @cached_property
    def images(self) -> list[str]:
        """Image URLs of the current turn."""
        return [p.image_url.url for i in self.current if not isinstance(self.messages[i].content, str)
                for p in self.messages[i].content or () if isinstance(p, ImagePart)]

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
