"""``vsr-replay``: export the event stream, re-route it under another configuration, diff two exports.

    vsr-replay export (--redis URL [--stream KEY] | --journal DIR | --from-config FILE) [-o FILE]
    vsr-replay run --config NEW.yaml (--input FILE | --redis URL ... | --journal DIR | --from-config FILE)
    vsr-replay diff A.jsonl B.jsonl

``run`` and ``diff`` print what moved (``--json`` for tools) and every request
they skipped, counted by reason; ``--fail-on-change`` exits 1 when anything
moved, or when nothing could be compared (a gate that compared nothing proves
nothing), for a CI gate before a configuration ships. ``run`` counts apart,
never as a change, the routes a session's or a stored response's state chose
(``stateful``) and those re-routed on a cut copy or offline (``approximate``).
A Redis stream that does not exist is an error (exit 2), not an empty one.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from contextlib import nullcontext
from typing import IO

import msgspec
import trio

from vsr_fast.routing import load_file
from vsr_fast.errors import ConfigError, StoreUnavailable
from vsr_fast.routing.open_systemone import open_systemone, read_attached_cards

from . import diff as diff_mod
from . import rerun
from .progress import Progress
from .sources import LINE_ENCODER, ExportLine, Source, open_source


def _add_source(p: argparse.ArgumentParser, *, input_ok: bool) -> None:
    g = p.add_argument_group("events (one of)")
    if input_ok:
        g.add_argument("--input", "-i", help="an export file (JSON lines; - for stdin)")
    g.add_argument("--redis", dest="redis_url", metavar="URL", help="a Redis URL holding the stream")
    g.add_argument("--stream", help="the stream key (default vsr:events)")
    g.add_argument("--journal", metavar="DIR", help="an embedded stream's directory or journal file")
    g.add_argument("--from-config", metavar="FILE", help="the stream global.stores.event_stream of FILE names")
    g.add_argument("--start", type=stream_id("-"), metavar="ID",
                   help="after this entry id (exclusive): ms or ms-seq, - for the first (an embedded journal: a "
                        "byte offset)")
    g.add_argument("--end", type=stream_id("+"), metavar="ID",
                   help="up to this entry id (inclusive): ms or ms-seq, + for the last (an embedded journal: a "
                        "byte offset)")


_STREAM_ID = re.compile(r"[0-9]{1,20}(-[0-9]{1,20})?")


def stream_id(whole: str) -> Callable[[str], str | None]:
    """An argparse type for --start (``whole`` "-") or --end ("+"): a stream id, checked before Redis sees it
    (so a typo is one usage line naming the option); ``whole`` reads as no bound."""
    def parse(value: str) -> str | None:
        if value == whole:
            return None
        if not _STREAM_ID.fullmatch(value) or any(int(part) >= 2 ** 64 for part in value.split("-")):
            raise argparse.ArgumentTypeError(f"{value!r} is not a stream entry id: ms or ms-seq (e.g. "
                                             f"1764800000000-0), or {whole}")
        return value
    return parse


def _source(args: argparse.Namespace) -> Source:
    return open_source(input=getattr(args, "input", None), redis_url=args.redis_url, stream=args.stream,
                       journal=args.journal, from_config=args.from_config, start=args.start, end=args.end)


def _progress(args: argparse.Namespace, source: Source, label: str) -> Progress:
    return Progress(source.total, source.unit, enabled=True if args.progress else None, label=label)


def cmd_export(args: argparse.Namespace) -> int:
    source = _source(args)
    progress = _progress(args, source, "export ")
    n = 0
    with (open(args.output, "wb") if args.output != "-" else nullcontext(sys.stdout.buffer)) as out:
        for entry_id, ev in source:
            out.write(LINE_ENCODER.encode(ExportLine(entry_id, ev)) + b"\n")
            n += 1
            progress.update(source.done)
    progress.close(source.done)
    print(f"vsr-replay: exported {n} events" + (f" ({source.undecodable} undecodable, left out)"
                                                if source.undecodable else ""), file=sys.stderr)
    _report_unreadable(source)
    return 0


def _report_unreadable(source: Source) -> None:
    """Corrupt journal stretches the read went past: what they held is lost, so say where and how much."""
    if source.unreadable:
        where = ", ".join(f"{size} at {place}" for place, size in source.unreadable.items())
        print(f"vsr-replay: {sum(source.unreadable.values())} unreadable journal bytes read past "
              f"(the events in them are lost): {where}", file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
    loaded = load_file(args.config)
    # --from-config OLD.yaml: OLD.yaml's records only (its version as the file is now), not every router's.
    recorded_under = load_file(args.from_config).version_hash if args.from_config else None
    source = _source(args)
    progress = _progress(args, source, "re-route ")
    out_cm: IO[bytes] | nullcontext = open(args.out, "wb") if args.out else nullcontext(None)
    seen = [0]

    def on_request(n: int) -> None:
        seen[0] = n
        progress.update(source.done, n)

    async def rerun_all(out):
        if args.offline:
            return await rerun.run(loaded, source, out=out, on_request=on_request, recorded_under=recorded_under)
        # System One questions go to the deployments NEW.yaml resolves to, as in the live router.
        checked = await read_attached_cards(loaded)
        async with open_systemone(checked) as client:
            asker = checked.table.asker(client) if client is not None else None
            return await rerun.run(checked, source, out=out, on_request=on_request, systemone=asker,
                                   recorded_under=recorded_under)

    with out_cm as out:
        cmp = trio.run(rerun_all, out)
    progress.close(source.done, seen[0])
    if source.undecodable:
        cmp.skipped["undecodable_event"] += source.undecodable
    _report_unreadable(source)
    _explain_nothing_compared(args, cmp, recorded_under)
    if args.json:
        print(json.dumps({"config": args.config, "config_version": loaded.version_hash, **cmp.json()}, indent=2))
    else:
        print(cmp.text(f"vsr-replay run: recorded routes re-routed under {args.config} ({loaded.version_hash})"))
    return _gate(args, cmp)


def _explain_nothing_compared(args: argparse.Namespace, cmp, recorded_under: str | None) -> None:
    """When no request was compared, the skip that explains it, and what to change."""
    if cmp.compared:
        return
    if cmp.skipped["no_request_copy"]:
        print("vsr-replay: no record holds a request copy: set router_replay.capture_request_body: true in the "
              "recorded configuration (the quickstart's is off), then replay the traffic it records", file=sys.stderr)
    elif cmp.skipped["other_config"]:
        print(f"vsr-replay: every record was written under another configuration than {args.from_config} as it is "
              f"now (version {recorded_under}); --journal DIR reads one router's journal whatever it ran",
              file=sys.stderr)


def _gate(args: argparse.Namespace, cmp) -> int:
    """``--fail-on-change``: 1 when a route moved, or when nothing was compared at all."""
    if not args.fail_on_change:
        return 0
    if cmp.compared == 0:
        print("vsr-replay: nothing was compared (see the skipped counts), so nothing is shown unchanged",
              file=sys.stderr)
        return 1
    return 1 if cmp.changed else 0


def cmd_diff(args: argparse.Namespace) -> int:
    sources = open_source(input=args.a), open_source(input=args.b)
    a, b = (diff_mod.outcomes(source) for source in sources)
    cmp = diff_mod.diff(a, b)
    for side, source in zip("ab", sources):
        if source.undecodable:
            cmp.skipped[f"undecodable_line_in_{side}"] += source.undecodable
    if args.json:
        print(json.dumps({"a": args.a, "b": args.b, **cmp.json()}, indent=2))
    else:
        print(cmp.text(f"vsr-replay diff: {args.a} -> {args.b}"))
    return _gate(args, cmp)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vsr-replay", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    e = sub.add_parser("export", help="write a stream range (or the embedded journal) as JSON lines")
    _add_source(e, input_ok=False)
    # Both spellings on both subcommands (export had --output, run --out): neither is the wrong one.
    e.add_argument("--output", "--out", "-o", dest="output", default="-", help="the export file (default stdout)")
    e.add_argument("--progress", action="store_true", help="show progress even when stderr is not a terminal")
    e.set_defaults(func=cmd_export)

    r = sub.add_parser("run", help="re-route every recorded request under another configuration")
    r.add_argument("--config", "-c", required=True, help="the configuration to re-route under")
    _add_source(r, input_ok=True)
    r.add_argument("--out", "--output", "-o", dest="out", help="also write the requests with their new routes as an export (for diff)")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    r.add_argument("--progress", action="store_true", help="show progress even when stderr is not a terminal")
    r.add_argument("--fail-on-change", action="store_true",
                   help="exit 1 when any route moved, or when no request could be compared (stateful and "
                        "approximate routes are never changes)")
    r.add_argument("--offline", action="store_true",
                   help="do not ask the decision model: learned signals read unknown (routes marked approximate)")
    r.set_defaults(func=cmd_run)

    d = sub.add_parser("diff", help="compare the routes two exports recorded for the same requests")
    d.add_argument("a")
    d.add_argument("b")
    d.add_argument("--json", action="store_true", help="print the result as JSON")
    d.add_argument("--fail-on-change", action="store_true",
                   help="exit 1 when any route moved, or when no request could be compared")
    d.set_defaults(func=cmd_diff)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print("\n".join(f"vsr-replay: {line}" for line in exc.lines), file=sys.stderr)
        return 2
    except StoreUnavailable as exc:
        # Cannot run, as a configuration that does not load: 2, never 1 (--fail-on-change's "a route moved").
        print(f"vsr-replay: {exc.detail}", file=sys.stderr)
        return 2
    except (OSError, ValueError, msgspec.ValidationError) as exc:
        print(f"vsr-replay: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
