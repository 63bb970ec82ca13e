"""The exposition format keeps every sample value exactly (Prometheus rates are computed from them)."""
from __future__ import annotations

from vsr_fast.metrics import Counter


def test_counter_values_are_rendered_exactly():
    c = Counter("vsr_x_total", "x", ("k",))
    c.inc("big", by=1_234_567)
    c.inc("small", by=0.000123)
    c.inc("third", by=0.1)
    c.inc("third", by=0.2)
    lines = dict(line.rsplit(" ", 1) for line in c.render() if not line.startswith("#"))
    assert lines['vsr_x_total{k="big"}'] == "1234567"
    assert float(lines['vsr_x_total{k="small"}']) == 0.000123
    assert float(lines['vsr_x_total{k="third"}']) == 0.1 + 0.2
