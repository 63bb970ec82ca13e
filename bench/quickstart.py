"""``make run``: the mock upstream and the router on the quickstart configuration, together.

One command, one process group: Ctrl-C (or SIGTERM) stops both. The mock
listens where config/quickstart.yaml points (127.0.0.1:8001) unless
``--mock-port`` says otherwise (the router then reads a copy of the file whose
endpoints at 8001 name that port); the router on 127.0.0.1:8080 unless
``--port`` says otherwise.
"""
from __future__ import annotations

import argparse
import signal
import socket
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import trio
import yaml

MOCK_PORT = 8001


def _port_free(port: int) -> bool:
    # SO_REUSEADDR as the servers set it: a port whose last connections sit in
    # TIME_WAIT after a previous run is free for them, so it is free here too.
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def moved_mock(config: str, mock_port: int, into: Path) -> str:
    """``config``, or where it has endpoints on the mock's usual port, a copy in ``into`` that names ``mock_port``
    there instead (the file itself untouched: its version hash stays the README's)."""
    if mock_port == MOCK_PORT:
        return config
    doc = yaml.safe_load(Path(config).read_text())
    for model in (doc.get("providers") or {}).get("models") or []:
        for ref in model.get("backend_refs") or []:
            url = urlsplit(ref.get("endpoint") or "")
            if url.hostname == "127.0.0.1" and url.port == MOCK_PORT:
                ref["endpoint"] = url._replace(netloc=f"127.0.0.1:{mock_port}").geturl()
    copy = into / Path(config).name
    copy.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(copy)


async def _run(config: str, port: int, mock_port: int) -> int:
    with tempfile.TemporaryDirectory(prefix="vsr-quickstart-") as tmp:
        return await _serve(moved_mock(config, mock_port, Path(tmp)), port, mock_port)


async def _serve(config: str, port: int, mock_port: int) -> int:
    for p, what in ((mock_port, "the mock upstream"), (port, "the router")):
        if not _port_free(p):
            print(f"quickstart: port {p} for {what} is taken; stop what uses it first", file=sys.stderr)
            return 1
    mock = await trio.lowlevel.open_process(
        [sys.executable, "-m", "bench.mock_upstream", "--host", "127.0.0.1", "--port", str(mock_port)]
    )
    router = await trio.lowlevel.open_process(
        [sys.executable, "-m", "vsr_fast", "serve", "--config", config, "--host", "127.0.0.1", "--port", str(port)]
    )
    print(f"quickstart: router on http://127.0.0.1:{port}, mock upstream on http://127.0.0.1:{mock_port}; "
          "Ctrl-C stops both", file=sys.stderr, flush=True)
    async with trio.open_nursery() as nursery:
        async def stop_on_signal() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    for proc in (router, mock):
                        if proc.returncode is None:
                            proc.send_signal(signal.SIGTERM)
                    return

        async def stop_when_one_exits() -> None:
            async with trio.open_nursery() as inner:
                async def wait(proc) -> None:
                    await proc.wait()
                    inner.cancel_scope.cancel()
                inner.start_soon(wait, router)
                inner.start_soon(wait, mock)
            for proc in (router, mock):
                if proc.returncode is None:
                    proc.send_signal(signal.SIGTERM)
            await router.wait()
            await mock.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(stop_on_signal)
        nursery.start_soon(stop_when_one_exits)
    return router.returncode if router.returncode and router.returncode > 0 else 0


def main(argv: list[str] | None = None) -> int:
    """Start both; return when both have stopped."""
    parser = argparse.ArgumentParser(prog="python -m bench.quickstart", description=__doc__)
    parser.add_argument("--config", default="config/quickstart.yaml")
    parser.add_argument("--port", type=int, default=8080, help="the router's port (make run PORT=...)")
    parser.add_argument("--mock-port", type=int, default=MOCK_PORT,
                        help="the mock upstream's port; the config's endpoints on 8001 follow it "
                             "(make run MOCK_PORT=...)")
    args = parser.parse_args(argv)
    return trio.run(_run, args.config, args.port, args.mock_port)


if __name__ == "__main__":
    sys.exit(main())
