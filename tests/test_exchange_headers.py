"""A response header HTTP cannot carry fails the request before its head leaves: h11 refused it, the server
answered a bare 500 (no body) and the access log and metrics counted the 200 the router meant to send. The
request's error (a 500 with its body) is sent without the header."""
from __future__ import annotations

from types import SimpleNamespace

import h11
import pytest

from vsr_fast.headers import registry as h
from vsr_fast.errors import UnsendableHeader
from vsr_fast.server.pipeline.exchange import Exchange


def _exchange(decision: str) -> Exchange:
    # Only what headers() reads: the rest of an Exchange needs a serving AppState.
    ex = Exchange.__new__(Exchange)
    ex.state = SimpleNamespace(config_version=b"abc")
    ex.rec, ex.api = SimpleNamespace(request_id="req-1"), "chat"
    ex.path, ex.recipe, ex.decision, ex.model = h.ResponsePath.UPSTREAM, "r", decision, "m"
    ex.warnings, ex.cost, ex.trace, ex.extra, ex.failure = "", None, None, [], None
    return ex


def _h11_sends(headers) -> bool:
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
    conn.next_event()
    try:
        conn.send(h11.Response(status_code=500, headers=headers))
    except h11.LocalProtocolError:
        return False
    return True


@pytest.mark.parametrize("decision", ["d\nx", " d", "d\x00"])
def test_a_header_h11_refuses_fails_the_request_and_its_error_goes_without_it(decision):
    ex = _exchange(decision)
    with pytest.raises(UnsendableHeader) as info:
        ex.headers("application/json")
    assert info.value.status == 500 and "x-vsr-selected-decision" in info.value.message
    ex.failure = info.value
    headers = ex.headers("application/json")
    assert h.SELECTED_DECISION.encode() not in [name for name, _ in headers]
    assert _h11_sends(headers)


def test_sendable_headers_are_kept():
    headers = _exchange("d\tx é").headers("application/json")
    assert (h.SELECTED_DECISION.encode(), "d\tx é".encode()) in headers and _h11_sends(headers)


def test_values_remembered_sendable_never_let_a_bad_one_through():
    from vsr_fast.server.pipeline import exchange
    for _ in range(3):
        assert _exchange("good").headers("application/json")
        with pytest.raises(UnsendableHeader):
            _exchange("d\nx").headers("application/json")
    for i in range(exchange.SENT_MAX + 5):
        _exchange(f"d{i}").headers("application/json")
    assert 0 < len(exchange._SENT) <= exchange.SENT_MAX
    with pytest.raises(UnsendableHeader):
        _exchange(" d").headers("application/json")
