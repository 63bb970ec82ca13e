"""sr-bench probe (bench.tier_probe) against a real router and mock upstreams, run as the console command runs it:
per-decision first-useful and total percentiles, route validity, fallbacks, and gauges sampled from /metrics."""
from __future__ import annotations

import json
import subprocess
import sys

from bench.tier_probe import parse_case, useful

from .procs import ROOT, config, mock_upstream, model, router, write_config


def test_cases_and_useful_deltas_are_read_as_the_tier_report_defines_them():
    case = parse_case("greeting=Hi there @ you@greeting")
    assert (case.name, case.messages, case.expect) == ("greeting", [{"role": "user", "content": "Hi there @ you"}],
                                                       "greeting")
    assert parse_case("free=No expectation").expect is None
    assert useful({"content": "x"}) and useful({"tool_calls": [{"index": 0}]})
    assert not useful({"reasoning_content": "thinking..."}) and not useful({"role": "assistant", "content": ""})


def test_the_probe_reports_each_decision_and_counts_misroutes_and_fallbacks(tmp_path):
    with mock_upstream("--chunks", "4") as good, mock_upstream("--fail-rate", "1") as bad:
        models = [model("fast", f"{good.url}/v1"), model("broken", f"{bad.url}/v1"), model("deep", f"{good.url}/v1")]
        decisions = [
            {"name": "greeting", "priority": 20, "modelRefs": [{"model": "fast"}],
             "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "hello"}]}},
            {"name": "research", "priority": 10, "modelRefs": [{"model": "broken"}, {"model": "deep"}],
             "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "papers"}]}}]
        doc = config(models, decisions, signals={"keywords": [
            {"name": "hello", "operator": "OR", "keywords": ["hello"]},
            {"name": "papers", "operator": "OR", "keywords": ["papers"]}]})
        with router(write_config(doc, str(tmp_path))) as proc:
            out = subprocess.run(
                [sys.executable, "-m", "bench.sr_bench", "probe", proc.url, "--repeat", "3", "--json",
                 "--case", "greeting=hello there@greeting", "--case", "research=find papers on routing@research",
                 "--case", "misrouted=hello again@research",
                 "--metrics-url", f"{proc.url}/metrics", "--gauge", "vsr_connections_active"],
                cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr          # one case routed elsewhere than expected
    rows = {r["case"]: r for r in json.loads(out.stdout)}
    greeting, research, misrouted = rows["greeting"], rows["research"], rows["misrouted"]
    assert (greeting["valid"], greeting["n"], greeting["routed"]) == (3, 3, ["greeting"])
    assert greeting["first_useful_p50"] <= greeting["total_p50"]
    assert greeting["first_useful_p95"] <= greeting["total_p95"]
    assert greeting["completion_tokens"][0] > 0 and greeting["finish"] == ["stop"]
    assert (greeting["retries"], greeting["fallbacks"], greeting["malformed"], greeting["errors"]) == (0, 0, 0, 0)
    assert research["valid"] == 3 and research["fallbacks"] == 3        # the broken model first, every time
    assert (misrouted["valid"], misrouted["routed"]) == (0, ["greeting"])
    assert set(greeting["gauges_max"]) == {"vsr_connections_active"}
