"""An answer cut for its size leaves nothing of itself behind, and a compressed one is never inflated past the
size limit: the router's upstream calls in this process against a hostile backend (``tests.hostile_upstream``),
over real sockets, with the cyclic collector off as a serving router nearly has it (``server.heap``): what
reference counting alone does not free stays."""
from __future__ import annotations

import gc
import tracemalloc

import pytest

from vsr_fast.errors import UpstreamTooLarge
from vsr_fast.routing.loaded import load_raw
from vsr_fast.upstream.dispatch import Dispatcher
from vsr_fast.upstream.pool import Upstreams

from .hostile_upstream import Handler, serving
from .procs import config

LIMIT = 8 << 20
MIB = 1 << 20


class _Outbound:
    path = "/chat/completions"
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    headers = ()
    credential = None


@pytest.fixture(scope="module")
def hostile():
    with serving(Handler) as url:
        yield url


@pytest.fixture
def collector_off():
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()
        gc.enable()


def _routers() -> int:
    """Bytes allocated and still held, the backend's own (its thread, in this process) left out."""
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, "*hostile_upstream.py")])
    return sum(stat.size for stat in snapshot.statistics("filename"))


@pytest.mark.parametrize("mode", ["huge", "gzip-bomb"])
async def test_an_answer_cut_for_its_size_is_freed_at_once_and_never_grows_past_the_limit(hostile, mode,
                                                                                       collector_off):
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{hostile}/{mode}/v1", "max_response_bytes": LIMIT}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    loaded = load_raw(doc).config
    upstreams = Upstreams(loaded)
    dispatcher = Dispatcher(upstreams, lambda attempt: None)
    try:
        base = _routers()
        for _ in range(4):
            tracemalloc.reset_peak()
            with pytest.raises(UpstreamTooLarge):
                await dispatcher.whole(loaded.providers.models, lambda model: _Outbound(), [])
            peak = tracemalloc.get_traced_memory()[1] - base
            held = _routers() - base
            assert held < MIB, f"{held / MIB:.1f} MiB of the cut answer still held"
            # Read and counted a piece at a time: at most the limit and a piece, never a bomb's whole inflation.
            assert peak < LIMIT + 4 * MIB, f"{peak / MIB:.1f} MiB at the peak"
    finally:
        await upstreams.aclose()
