"""End to end, a real router subprocess, the mock upstream and the official SDKs: an image, file or audio in the
request is part of the response cache's keys, exact and semantic, in every client API.

A security trial found the semantic cache serving the answer about one image to the same question about another
(Chat image URLs and data URLs, Messages base64 images, Responses ``input_file`` ids): only the text was compared.
Each case asks about one attachment, checks the same request and a paraphrase (a trailing '?') hit, then asks the
same question about another attachment, which must reach the model.
"""
from __future__ import annotations

import base64
import uuid

import anthropic
import httpx
import openai
import pytest

from .procs import mock_upstream, model, router, wait_until, write_config

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()
GIF = base64.b64encode(b"GIF89a" + b"\x01" * 16).decode()
WAV_A = base64.b64encode(b"RIFF" + b"\x02" * 16).decode()
WAV_B = base64.b64encode(b"RIFF" + b"\x03" * 16).decode()


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with mock_upstream() as up:
        doc = {
            "version": "v0.5",
            "providers": {"models": [model("m", f"{up.url}/v1")]},
            "recipes": [{"name": "r", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}]}]}],
            "global": {"plugins": [{"type": "response_cache", "configuration": {
                "enabled": True, "mode": "exact_then_semantic", "ttl_seconds": 600}}],
                "stores": {"event_stream": {"backend": "none"}, "response_cache": {"backend_type": "memory"}}},
        }
        with router(write_config(doc, str(tmp_path_factory.mktemp("media")))) as proc:
            yield proc


def writes(proc) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in httpx.get(f"{proc.url}/metrics").text.splitlines()
               if line.startswith("llm_cache_writes_total"))


def chat(proc, text: str, part: dict) -> str:
    raw = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0, timeout=20) \
        .chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": [{"type": "text", "text": text}, part]}])
    raw.parse()
    return raw.headers["x-vsr-response-path"]


def messages(proc, text: str, block: dict) -> str:
    raw = anthropic.Anthropic(base_url=proc.url, api_key="unused", max_retries=0, timeout=20) \
        .messages.with_raw_response.create(
            model="auto", max_tokens=64, messages=[{"role": "user", "content": [block, {"type": "text", "text": text}]}])
    raw.parse()
    return raw.headers["x-vsr-response-path"]


def responses(proc, text: str, part: dict) -> str:
    raw = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="unused", max_retries=0, timeout=20) \
        .responses.with_raw_response.create(
            model="auto", input=[{"role": "user", "content": [{"type": "input_text", "text": text}, part]}])
    raw.parse()
    return raw.headers["x-vsr-response-path"]


def url_part(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def b64_block(data: str, media: str = "image/png") -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}


CASES = {
    "chat-image-url": (chat, url_part("http://a.example/1.png"), url_part("http://a.example/2.png")),
    "chat-image-data-url": (chat, url_part(f"data:image/png;base64,{PNG}"), url_part(f"data:image/png;base64,{GIF}")),
    "chat-audio": (chat, {"type": "input_audio", "input_audio": {"data": WAV_A, "format": "wav"}},
                   {"type": "input_audio", "input_audio": {"data": WAV_B, "format": "wav"}}),
    "messages-image-base64": (messages, b64_block(PNG), b64_block(GIF)),
    "messages-image-url": (messages, {"type": "image", "source": {"type": "url", "url": "http://a.example/1.png"}},
                           {"type": "image", "source": {"type": "url", "url": "http://a.example/2.png"}}),
    "messages-document": (messages, b64_block(PNG, "application/pdf") | {"type": "document"},
                          b64_block(GIF, "application/pdf") | {"type": "document"}),
    "responses-image-url": (responses, {"type": "input_image", "image_url": "http://a.example/1.png"},
                            {"type": "input_image", "image_url": "http://a.example/2.png"}),
    "responses-file-id": (responses, {"type": "input_file", "file_id": "file-aaa"},
                          {"type": "input_file", "file_id": "file-bbb"}),
    "responses-file-data": (responses,
                            {"type": "input_file", "filename": "a.pdf", "file_data": f"data:application/pdf;base64,{PNG}"},
                            {"type": "input_file", "filename": "a.pdf", "file_data": f"data:application/pdf;base64,{GIF}"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_another_attachment_never_hits_the_cache(gw, case):
    ask, first, other = CASES[case]
    text = f"describe this attachment {uuid.uuid4().hex[:8]}"
    before = writes(gw)
    assert ask(gw, text, first) == "upstream"
    wait_until(lambda: writes(gw) > before, "the first answer stored")
    assert ask(gw, text, first) == "cache", "the same request: an exact hit"
    assert ask(gw, text + "?", first) == "cache", "a paraphrase about the same attachment: a semantic hit"
    # The exact key differs; the semantic cache, asked the very same text, would hit if it compared text only.
    assert ask(gw, text, other) == "upstream", "the same question about another attachment"
