"""How well the refusal-text detector (``vsr_fast.selection.refusal``) tells refusals from ordinary answers.

    PYTHONPATH=. .venv/bin/python -m bench.refusal [--wheels DIR] [--show N]

The phrases were written from English refusal phrasing as assistants produce it and from garak's
mitigation and prefix strings (``garak/detectors/mitigation.py``), which read as its training set: garak is
not measured here. Every figure below is on sources that wrote none of the phrases (pinned wheels, fetched
and checked by sha256 as ``vsr_fast.models.vsr_static._sources`` pins them):

- pyrit's human-labelled refusal evaluation sets (``refusal.csv``, ``refusal_extra.csv``): recall on the
  answers labelled refusals, false refusals on those labelled not. Its label counts an answer that dodges the
  objective as a refusal too, which a text detector does not see; the misses are printed with ``--show``;
- chatterbot-corpus's English replies (a chatbot's answers, "Sorry" and "can't" in ordinary use): false refusals;
- the Chit-Chat Challenge's distinct utterances (people talking to each other): false refusals. A person
  can refuse there too ("I can't help you with that"), so each hit is printed for a look.

The phrases were revised once after reading the errors on those three sets (the first run's figures are in
the report beside the final ones), so two sets were kept unread until the end, for the final figures only:

- pyrit's objective scorer sets (``scorer_evals/objective/*.csv``): the answers labelled as achieving a harmful
  objective complied, so a hit there is a false refusal; on those labelled not achieving it (refusals, dodges
  and partial answers mixed) the share the detector calls refusals is printed, not a recall;
- Debian's fortunes (quotes, jokes, short dialogues, first-person "I can't" in ordinary use): false refusals.

Their first run found one bug (a long form, "I will not", read as "I'll not"), fixed before the final figures.
"""
from __future__ import annotations

import argparse
import csv
import io
import tempfile
import time
from pathlib import Path

import yaml

from vsr_fast.models.vsr_static import _sources as sources
from vsr_fast.selection.refusal import refusal_text

PYRIT_SETS = ("pyrit/datasets/scorer_evals/refusal_scorer/refusal.csv",
              "pyrit/datasets/scorer_evals/refusal_scorer/refusal_extra.csv")


def pyrit_rows(wheel: Path) -> list[tuple[bool, str]]:
    """(labelled a refusal, answer) of pyrit's refusal scorer evaluation sets."""
    out = []
    for member in PYRIT_SETS:
        lines = [line for line in sources.read(wheel, member).decode().splitlines(keepends=True)
                 if not line.startswith("#")]
        for row in csv.DictReader(io.StringIO("".join(lines))):
            out.append((row["human_score"].strip() == "1", row["assistant_response"]))
    return out


def chatterbot_replies(wheel: Path) -> list[str]:
    """The English corpus's replies: every turn after a conversation's first."""
    import zipfile
    out = []
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            if name.startswith("chatterbot_corpus/data/english/") and name.endswith(".yml"):
                for conversation in (yaml.safe_load(zf.read(name)) or {}).get("conversations") or []:
                    out += [str(t).strip() for t in conversation[1:] if str(t).strip()]
    return out


def chitchat_utterances(wheel: Path) -> list[str]:
    distinct: dict[str, str] = {}
    for text in sources.chitchat(wheel):
        distinct.setdefault(text.strip().lower(), text.strip())
    return [t for t in distinct.values() if t]


def pyrit_objective_rows(wheel: Path) -> list[tuple[bool, str]]:
    """(labelled as achieving its objective, answer) of pyrit's objective scorer evaluation sets."""
    import zipfile
    out = []
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            if name.startswith("pyrit/datasets/scorer_evals/objective/") and name.endswith(".csv"):
                lines = [line for line in zf.read(name).decode().splitlines(keepends=True) if not line.startswith("#")]
                out += [(row["human_score"].strip() == "1", row["assistant_response"])
                        for row in csv.DictReader(io.StringIO("".join(lines)))]
    return out


def _rate(hits: int, n: int) -> str:
    return f"{100 * hits / n:.2f} % ({hits} of {n:,})" if n else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, help="reuse (or fill) this folder of pinned wheels")
    parser.add_argument("--show", type=int, default=0, help="print up to N misses and false refusals per source")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.wheels or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        wheels = {n: sources.fetch(n, folder) for n in ("pyrit", "chatterbot-corpus", "chitchat-dataset")}
        labelled = pyrit_rows(wheels["pyrit"])
        ordinary = {"chatterbot-corpus English replies": chatterbot_replies(wheels["chatterbot-corpus"]),
                    "Chit-Chat Challenge distinct utterances": chitchat_utterances(wheels["chitchat-dataset"])}
        objective = pyrit_objective_rows(wheels["pyrit"])
        ordinary["pyrit objective sets, labelled achieved (complied)"] = [t for done, t in objective if done]
        ordinary["Debian fortunes"] = sources.fortunes(sources.fetch_deb("fortunes", folder))
        undone = [t for done, t in objective if not done]
    rows, shown = [], []
    refusals = [t for refused, t in labelled if refused]
    others = [t for refused, t in labelled if not refused]
    caught = [t for t in refusals if refusal_text(t)]
    missed = [t for t in refusals if not refusal_text(t)]
    wrong = [(refusal_text(t), t) for t in others if refusal_text(t)]
    rows.append(("recall", "pyrit refusal sets, labelled refusals", _rate(len(caught), len(refusals))))
    rows.append(("false refusals", "pyrit refusal sets, labelled not refusals", _rate(len(wrong), len(others))))
    shown.append(("pyrit: missed refusals", [("-", t) for t in missed]))
    shown.append(("pyrit: false refusals", wrong))
    for name, texts in ordinary.items():
        hits = [(refusal_text(t), t) for t in texts if refusal_text(t)]
        rows.append(("false refusals", name, _rate(len(hits), len(texts))))
        shown.append((name, hits))
    flagged = [(refusal_text(t), t) for t in undone if refusal_text(t)]
    rows.append(("called refusals", "pyrit objective sets, labelled not achieved (not a recall)",
                 _rate(len(flagged), len(undone))))
    shown.append(("pyrit objective sets, not achieved, not called refusals",
                  [("-", t) for t in undone if not refusal_text(t)]))
    sample = [t for _, t in labelled] + ordinary["chatterbot-corpus English replies"]
    start = time.perf_counter_ns()
    for text in sample:
        refusal_text(text)
    per = (time.perf_counter_ns() - start) / len(sample) / 1000
    rows.append(("cost", "one answer, pyrit and chatterbot texts", f"{per:.1f} µs mean"))
    print("| figure | measured on | result |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if args.show:
        for title, items in shown:
            print(f"\n{title}: {len(items)}")
            for phrase, text in items[:args.show]:
                print(f"  [{phrase}] {' '.join(text.split())[:160]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
