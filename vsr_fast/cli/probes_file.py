"""A probes file (the ``*.probes.yaml`` shape of vLLM-SR's maintained recipes) as request bodies.

Probes are grouped by the decision they exercise; each variant is a prompt
(``query``, optionally repeated or padded) or a ``messages`` list, whose
``image_fixture`` parts name an image of ``fixtures.images``. Fields the
router cannot check (plugins, aliases, tags, coverage goals) are read past.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import msgspec
import yaml

from ..config.shape import render_validation_error
from ..errors import ProbesFileError


class _Shape(msgspec.Struct, kw_only=True, frozen=True):
    """Unknown fields are kept out, not refused: the format carries more than routing can check."""


class ImageFixture(_Shape, kw_only=True):
    media_type: str
    data_base64: str


class Fixtures(_Shape, kw_only=True):
    images: dict[str, ImageFixture] = msgspec.field(default_factory=dict)


class Padding(_Shape, kw_only=True):
    text: str
    repeat: int = 1
    placement: Literal["before", "after", "around"] = "after"


class GeneratedText(_Shape, kw_only=True):
    """A text part of ``target_text_bytes`` inserted at ``messages[message_index].content[content_index]``."""

    message_index: int
    content_index: int
    target_text_bytes: int


class Variant(_Shape, kw_only=True):
    id: str
    query: str | None = None
    messages: list[dict[str, Any]] | None = None
    repeat: int = 1
    padding: Padding | None = None
    generated_text: GeneratedText | None = None
    tools: list[dict[str, Any]] | None = None


class Group(_Shape, kw_only=True):
    id: str
    model: str | None = None
    expected_recipe: str | None = None
    expected_decision: str | None = None
    expected_algorithm: str | None = None
    variants: list[Variant]


class ProbesFile(_Shape, kw_only=True):
    name: str = ""
    fixtures: Fixtures = Fixtures()
    decisions: list[Group]


@dataclass(frozen=True)
class Expect:
    recipe: str | None = None
    decision: str | None = None
    algorithm: str | None = None

    def over(self, other: "Expect") -> "Expect":
        """This expectation, each unset part taken from ``other``."""
        return Expect(self.recipe or other.recipe, self.decision or other.decision,
                      self.algorithm or other.algorithm)


@dataclass(frozen=True)
class Probe:
    group: str          # the decision the probe exercises (its row in the summary)
    id: str
    body: dict
    expect: Expect


_FILLER = "Neutral filler text for a context-size probe. "


def read_probes(path: str, model: str) -> list[Probe]:
    """Every variant of ``path`` as a Chat Completions body; ProbesFileError names the bad field's path."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        raise ProbesFileError([f"{path}: {exc}"]) from None
    try:
        doc = msgspec.convert(raw, ProbesFile, strict=True)
    except msgspec.ValidationError as exc:
        raise ProbesFileError([f"{path}: {render_validation_error(exc, [], raw)}"]) from None
    out = []
    for i, group in enumerate(doc.decisions):
        expect = Expect(group.expected_recipe, group.expected_decision, group.expected_algorithm)
        for j, variant in enumerate(group.variants):
            where = f"{path}: decisions[{i}].variants[{j}]"
            messages = _messages(variant, doc.fixtures, where)
            body: dict = {"model": group.model or model, "messages": messages}
            if variant.tools:
                body["tools"] = variant.tools
            out.append(Probe(group.id, variant.id, body, expect))
    return out


def prompt_body(prompt: str, model: str) -> dict:
    """One user turn as a Chat Completions body."""
    return {"model": model, "messages": [{"role": "user", "content": prompt}]}


def _messages(variant: Variant, fixtures: Fixtures, where: str) -> list[dict]:
    if (variant.query is None) == (variant.messages is None):
        raise ProbesFileError([f"{where}: exactly one of query and messages"])
    if variant.query is not None:
        text = " ".join([variant.query] * max(variant.repeat, 1))
        pad = variant.padding
        if pad is not None:
            filler = pad.text * max(pad.repeat, 1)
            text = {"before": f"{filler}{text}", "after": f"{text}{filler}",
                    "around": f"{filler}{text}{filler}"}[pad.placement]
        return [{"role": "user", "content": text}]
    messages = [_with_images(m, fixtures, f"{where}.messages[{k}]") for k, m in enumerate(variant.messages or [])]
    gen = variant.generated_text
    if gen is not None:
        if not 0 <= gen.message_index < len(messages):
            raise ProbesFileError([f"{where}.generated_text.message_index: no message {gen.message_index}"])
        message = messages[gen.message_index]
        parts = message["content"] if isinstance(message.get("content"), list) else \
            [{"type": "text", "text": message.get("content") or ""}]
        have = sum(len(p.get("text", "").encode()) for p in parts if p.get("type") == "text")
        need = max(gen.target_text_bytes - have, 0)
        filler = (_FILLER * (need // len(_FILLER) + 1))[:need]
        parts.insert(min(gen.content_index, len(parts)), {"type": "text", "text": filler})
        message["content"] = parts
    return messages


def _with_images(message: dict, fixtures: Fixtures, where: str) -> dict:
    """``message`` with each ``image_fixture`` part as an ``image_url`` part carrying the image inline."""
    content = message.get("content")
    if not isinstance(content, list):
        return dict(message)
    parts = []
    for k, part in enumerate(content):
        if isinstance(part, dict) and part.get("type") == "image_fixture":
            image = fixtures.images.get(part.get("fixture", ""))
            if image is None:
                raise ProbesFileError([f"{where}.content[{k}].fixture: no image {part.get('fixture')!r} "
                                       "in fixtures.images"])
            data = "".join(image.data_base64.split())
            parts.append({"type": "image_url", "image_url": {"url": f"data:{image.media_type};base64,{data}"}})
        else:
            parts.append(part)
    return {**message, "content": parts}
