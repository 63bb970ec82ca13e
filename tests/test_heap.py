"""The serving process's heap: frozen at start, a larger young generation, and the collector's series."""
from __future__ import annotations

import re
import subprocess
import sys

import httpx
import trio

from bench._procs import ROOT

CHAT = {"model": "vsr/auto", "messages": [{"role": "user", "content": "Say hello"}]}

# In a process of its own: settle() freezes whatever is alive, which in pytest's process would be pytest.
_SETTLE = """
import gc, weakref
from vsr_fast.server import heap
class Node: pass
def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)
gc.disable()                     # only settle() may collect the first cycle
early = cycle()
before = gc.get_threshold()
heap.settle()
frozen = gc.get_freeze_count()
late = cycle()
print(before[0], gc.get_threshold()[0], gc.get_threshold()[1:] == before[1:], frozen, early() is None,
      gc.collect() >= 2 and late() is None, gc.isenabled())
"""


def test_settle_freezes_the_heap_and_later_cycles_are_still_collected():
    out = subprocess.run([sys.executable, "-c", _SETTLE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    default, young, same_older, frozen, early_freed, late_freed, enabled = out.stdout.split()
    assert enabled == "True"             # `vsr-fast serve` starts with the collector off: settle() turns it on
    assert (int(default), int(young), same_older) == (700, 10_000, "True")
    assert int(frozen) > 1_000           # the interpreter's own start-up objects at least
    assert early_freed == "True"         # garbage from before the freeze is collected, not frozen for good
    assert late_freed == "True"          # and a cycle made after it is still collected


def _series(text: str, name: str) -> dict[str, float]:
    return {m.group(1): float(m.group(2)) for m in re.finditer(rf"^{name}(\{{[^}}]*\}})? (\S+)$", text, re.M)}


# What importing the serving code alone leaves alive (the modules ``vsr-fast serve`` imports before it loads its
# configuration): the router's frozen heap holds more (its configuration, upstreams, metrics), so freezing before
# those were built would fail the test below.
_IMPORTS = """
import gc
import vsr_fast.cli._main, vsr_fast.errors, vsr_fast.routing, vsr_fast.server.process, vsr_fast.server.serve
gc.collect()
gc.freeze()
print(gc.get_freeze_count())
"""


async def test_the_router_process_serves_with_its_start_up_heap_frozen(routed):
    imports = subprocess.run([sys.executable, "-c", _IMPORTS], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert imports.returncode == 0, imports.stderr
    async with httpx.AsyncClient(base_url=routed.url, timeout=30) as client:
        async def one() -> None:
            r = await client.post("/v1/chat/completions", json=CHAT)
            assert r.status_code == 200

        async with trio.open_nursery() as nursery:
            for _ in range(64):
                nursery.start_soon(one)
        text = (await client.get("/metrics")).text
    frozen = _series(text, "vsr_gc_frozen_objects")[None]
    print(f"frozen {frozen:.0f}, imports alone {imports.stdout.strip()}")
    assert frozen > int(imports.stdout) + 1_000
    collections = _series(text, "python_gc_collections_total")
    assert set(collections) == {'{generation="0"}', '{generation="1"}', '{generation="2"}'}
    assert set(_series(text, "python_gc_objects_collected_total")) == set(collections)


# ``serve`` runs its start-up with the collector off (cli.main); whatever way it ends, the caller's is on again.
_SERVE_FAILS = """
import gc
from vsr_fast.cli import main
code = main(["serve", "--config", "/nonexistent/vsr-fast.yaml"])
print(code, gc.isenabled())
"""


def test_serve_that_ends_before_serving_leaves_the_collector_on():
    out = subprocess.run([sys.executable, "-c", _SERVE_FAILS], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    code, enabled = out.stdout.split()
    assert code == "2" and enabled == "True"
