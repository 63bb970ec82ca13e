"""``POST /api/v1/diagnostics/classify/<task>`` (spec 6.8): a text asked of the decision model, nothing routed.

``intent``, ``pii``, ``security``, ``fact-check`` and ``user-feedback`` each
read one application signal (``routing.classify``); ``combined`` reads intent,
pii and security in one merged call; ``batch`` reads one task for each of up
to ``MAX_BATCH`` texts. Bad bodies get the OpenAI error shape with the path of
the bad field; a text the model cannot read whole gets 400
``context_length_exceeded``.
"""
from __future__ import annotations

import time
from typing import Annotated, Literal

import msgspec
import trio
from msgspec import Meta, Struct

from ..errors import VsrError
from ..headers.public import public_headers
from ..headers.registry import ResponsePath
from ..protocol.errors import BodyProblem, decode_body, openai_error_body, openai_request_error
from ..routing.classify import COMBINED, TASKS
from .asgi import Receive, Scope, Send, read_body, send_whole
from .state import AppState

PREFIX = "/api/v1/diagnostics/classify/"
MAX_BATCH = 100
_JSON = (b"content-type", b"application/json")
_ENCODER = msgspec.json.Encoder()
Text = Annotated[str, Meta(min_length=1)]
Task = Literal["intent", "pii", "security", "fact-check", "user-feedback"]


class ClassifyBody(Struct, forbid_unknown_fields=True, frozen=True):
    text: Text
    recipe: str | None = None               # the recipe whose rules are asked (default: the default recipe)
    previous_answer: str | None = None      # user-feedback: the answer the text reacts to


class BatchBody(Struct, forbid_unknown_fields=True, frozen=True):
    texts: Annotated[list[Text], Meta(min_length=1, max_length=MAX_BATCH)]
    task: Task = "intent"
    recipe: str | None = None


_SINGLE = msgspec.json.Decoder(ClassifyBody)
_BATCH = msgspec.json.Decoder(BatchBody)
PATHS = frozenset(PREFIX + name for name in (*TASKS, "combined", "batch"))


async def handle_classify(state: AppState, scope: Scope, receive: Receive, send: Send) -> None:
    """Decode the body, ask the decision model, answer each task's result (or the error, with its path)."""
    task = scope["path"][len(PREFIX):]
    started = time.perf_counter()
    try:
        raw = await read_body(scope, receive, state.max_body_bytes, state.body_pace)
        try:
            body = decode_body(_BATCH if task == "batch" else _SINGLE, raw)
        except BodyProblem as exc:
            raise openai_request_error(exc.problem) from None
        classifier = state.classifier
        if task == "batch":
            results: list = [None] * len(body.texts)
            failed: list[tuple[int, VsrError]] = []

            async def one(i: int) -> None:
                try:
                    found = await classifier.classify((body.task,), body.texts[i], recipe=body.recipe)
                except VsrError as exc:
                    failed.append((i, exc))
                    return
                results[i] = {"text_index": i, **found["results"][body.task]}

            async with trio.open_nursery() as nursery:
                for i in range(len(body.texts)):
                    nursery.start_soon(one, i)
            if failed:
                # The first text's error answers for the batch, naming that text.
                i, exc = min(failed, key=lambda f: f[0])
                raise type(exc)(f"texts[{i}]: {exc.message}", param=f"texts[{i}]")
            doc = {"task": body.task, "recipe": classifier.task_set(body.recipe, (body.task,)).recipe,
                   "results": results, "count": len(results)}
        else:
            tasks = COMBINED if task == "combined" else (task,)
            found = await classifier.classify(tasks, body.text, recipe=body.recipe,
                                              previous_answer=body.previous_answer)
            doc = {"task": task, "recipe": found["recipe"],
                   **(found["results"] if task == "combined" else found["results"][task])}
    except VsrError as exc:
        headers = public_headers(config_version=state.config_version, path=ResponsePath.ERROR, recipe=None,
                                 decision=None, model=None)
        headers.append(_JSON)
        await send_whole(send, exc.status, headers, openai_error_body(exc))
        return
    doc["processing_time_ms"] = round((time.perf_counter() - started) * 1000, 3)
    headers = public_headers(config_version=state.config_version, path=ResponsePath.UPSTREAM,
                             recipe=doc["recipe"], decision=None, model=None)
    headers.append(_JSON)
    await send_whole(send, 200, headers, _ENCODER.encode(doc))
