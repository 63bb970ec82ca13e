"""Answer reuse: an LRU per local model, a 10-minute window for a remote API (spec 5.3).

Keyed by the configuration's generation, the deployment, the state and the
question, so two entrypoints asking one deployment the same question about
the same state share an answer, and a new configuration starts clean.
"""
from __future__ import annotations

import hashlib
import os
import time
from collections import OrderedDict

from ..protocol.systemone import ENCODER, Answer, Question, QuestionError, State

LOCAL_SIZE_ENV = "VLLM_SRUN_RESULT_CACHE"
LOCAL_DEFAULT = 4096
REMOTE_TTL_S = 600.0
REMOTE_MAX = 65536


def state_key(state: State) -> bytes:
    return hashlib.blake2b(ENCODER.encode(state), digest_size=16).digest()


def question_key(wire_id: str, question: Question) -> bytes:
    return hashlib.blake2b(wire_id.encode() + b"\0" + ENCODER.encode(question), digest_size=16).digest()


class AnswerCache:
    """Bounded LRU with an optional time to live; errors are never kept."""

    def __init__(self, size: int, ttl_s: float | None) -> None:
        self.size = size
        self.ttl_s = ttl_s
        self._items: OrderedDict[tuple, tuple[float, Answer]] = OrderedDict()

    @classmethod
    def for_deployment(cls, local: bool) -> "AnswerCache":
        if local:
            size = int(os.environ.get(LOCAL_SIZE_ENV, LOCAL_DEFAULT) or 0)
            return cls(max(size, 0), None)
        return cls(REMOTE_MAX, REMOTE_TTL_S)

    def get(self, key: tuple) -> Answer | None:
        if not self.size:
            return None
        hit = self._items.get(key)
        if hit is None:
            return None
        stored_at, answer = hit
        if self.ttl_s is not None and time.monotonic() - stored_at > self.ttl_s:
            del self._items[key]
            return None
        self._items.move_to_end(key)
        return answer

    def put(self, key: tuple, answer: Answer) -> None:
        if not self.size or isinstance(answer, QuestionError):
            return
        self._items[key] = (time.monotonic(), answer)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)
