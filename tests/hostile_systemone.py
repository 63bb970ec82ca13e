"""A System One API whose answers a router must not trust, where the fake (``bench.fake_systemone``) answers only
well-formed ones: a real HTTP server, served in the test's process (``hostile_upstream.serving``).

The first path segment picks the misbehaviour (``endpoint: URL/<mode>/v1/systemone``); a standard request is
answered in the standard form, a batch in the batch form, each question by its type unless the mode says:

- ``ok``: a valid neutral answer to every question (noul 0.5, the first option at 1, level 0, no spans);
- ``wrong-kind``: a noul answer (0.9) to every question, whatever its type;
- ``out-of-range``: 7.5 for every probability (noul, each option's, each label's), the last option chosen,
  score 99;
- ``unoffered``: a choice of ``ghost-model`` (0.99), not offered, and 0.01 for the last option offered;
- ``empty``: ``answers: {}``;
- ``missing-last``: every question answered but the last asked; ``extra``: an unasked ``unasked`` answer too;
- ``batch-missing``: a batch answered without its last entry;
- ``huge``: 200 whose body is a JSON string of ``HUGE`` bytes, chunked, no Content-Length;
- ``rate-limited``: 429 ``{"error": {"code": "rate_limited"}}`` with ``Retry-After: 7``;
- ``leaky-503``: 503 whose error message names an internal host (``db-7.internal:5432``).
"""
from __future__ import annotations

import json

from . import hostile_upstream

HUGE = 24 * 1000 * 1000
PIECE = 1 << 20
LEAK = "upstream db-7.internal:5432 refused: ECONNREFUSED"
LONG = "Z" * 200_000     # a value no message may quote whole


def neutral(question: dict) -> dict:
    kind = question["type"]
    criteria = question.get("criteria")
    if kind == "noul":
        return {"type": "noul", "noul": 0.5}
    if kind == "choice":
        first = next(iter(criteria))
        return {"type": "choice", "choice": first, "confidence": 1.0, "probabilities": {first: 1.0}}
    if kind == "score":
        return {"type": "score", "score": 0.0, "confidence": 1.0, "probabilities": {"0": 1.0}, "legend": {}}
    if kind == "set":
        return {"type": "set", "probabilities": dict.fromkeys(criteria, 0.0)}
    return {"type": "span", "spans": []}


def answer(mode: str, question: dict) -> dict:
    if mode == "wrong-kind":
        return {"type": "noul", "noul": 0.9}
    if mode == "out-of-range":
        kind = question["type"]
        if kind == "noul":
            return {"type": "noul", "noul": 7.5}
        if kind == "choice":
            last = list(question["criteria"])[-1]
            return {"type": "choice", "choice": last, "confidence": 7.5,
                    "probabilities": dict.fromkeys(question["criteria"], 7.5)}
        if kind == "score":
            return {"type": "score", "score": 99.0, "confidence": 1.0, "probabilities": {"0": 1.0}, "legend": {}}
        if kind == "set":
            return {"type": "set", "probabilities": dict.fromkeys(question["criteria"], 7.5)}
    if mode == "long-choice" and question["type"] == "choice":
        return {"type": "choice", "choice": LONG, "confidence": 0.99, "probabilities": {LONG: 0.99}}
    if mode == "unoffered" and question["type"] == "choice":
        last = list(question["criteria"])[-1]
        return {"type": "choice", "choice": "ghost-model", "confidence": 0.99,
                "probabilities": {"ghost-model": 0.99, last: 0.01}}
    return neutral(question)


def answers(mode: str, questions: dict) -> dict:
    if mode == "empty":
        return {}
    out = {name: answer(mode, q) for name, q in questions.items()}
    if mode == "missing-last":
        out.pop(list(questions)[-1])
    if mode == "extra":
        out["unasked"] = {"type": "noul", "noul": 0.5}
    return out


class Handler(hostile_upstream.Handler):
    """The hostile upstream's server, answering System One's routes instead."""

    def _send(self, status: int, doc: dict, headers: tuple = ()) -> None:
        self.whole(status, json.dumps(doc).encode(), list(headers))

    def do_GET(self) -> None:
        self._send(200, {"models": [{"name": "hostile", "question_types": ["choice", "noul", "score", "set", "span"],
                                     "modalities": ["text"]}]})

    def do_POST(self) -> None:
        mode = self.path.strip("/").split("/")[0]
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        model = body.get("model") or "hostile"
        if mode == "rate-limited":
            self._send(429, {"error": {"type": "systemone_error", "code": "rate_limited", "message": "slow down"}},
                       (("retry-after", "7"),))
        elif mode == "leaky-503":
            self._send(503, {"error": {"type": "systemone_error", "code": "server_error", "message": LEAK}})
        elif mode == "huge":
            self._huge()
        elif "states" in body:
            names = list(body["states"])
            if mode == "batch-missing":
                names = names[:-1]
            states = {n: {"answers": answers(mode, body["states"][n]["questions"]),
                          "usage": {"input_tokens": 1, "output_tokens": 1}} for n in names}
            self._send(200, {"model": model, "states": states, "usage": {"input_tokens": 1, "output_tokens": 1}})
        else:
            self._send(200, {"model": model, "answers": answers(mode, body["questions"]),
                             "usage": {"input_tokens": 1, "output_tokens": 1}})

    def _huge(self) -> None:
        """A 200 answer of HUGE bytes in 1 MiB chunks: a router that reads it whole holds it all."""
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        head = b'{"model": "hostile", "usage": {"input_tokens": 1, "output_tokens": 1}, "answers": {"x": "'
        piece = b"a" * PIECE
        try:
            for chunk in [head, *[piece] * (HUGE // PIECE), b'"}}']:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
