"""bench/peer.py without LiteLLM: its command line, the config LiteLLM gets, and its goal checks."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from bench import peer
from bench.compare import router_config

ROOT = Path(__file__).resolve().parents[1]


def run_peer(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.peer", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_help_names_the_install_and_scaling_modes():
    out = run_peer("--help")
    assert out.returncode == 0, out.stderr
    assert "--install" in out.stdout and "--scaling" in out.stdout


def test_litellm_gets_the_model_the_router_serves_routed_to_the_same_mock():
    out = run_peer("--print-litellm-config", "http://127.0.0.1:8001/")
    assert out.returncode == 0, out.stderr
    config = yaml.safe_load(out.stdout)
    [entry] = config["model_list"]
    assert entry["litellm_params"]["api_base"] == "http://127.0.0.1:8001/v1"
    assert entry["litellm_params"]["model"] == "openai/mock"
    # sr-bench sends one model name to both proxies: both must serve it, from the same upstream.
    router = router_config("http://127.0.0.1:8001")
    assert entry["model_name"] in router["entrypoints"][0]["model_names"]
    assert router["providers"]["models"][0]["backend_refs"][0]["endpoint"] == entry["litellm_params"]["api_base"]


def row(target: str, conc: int, req_per_s: float, added_p50: float | None = None, errors: int = 0,
        cpu: float | None = None) -> dict:
    return {"target": target, "concurrency": conc, "stream": False, "req_per_s": req_per_s, "p50_ms": 1.0,
            "p99_ms": 2.0, "http_errors": errors, "conn_errors": 0, "added_p50_ms": added_p50,
            "cpu_us_per_req": cpu}


def test_goals_are_met_at_exactly_ten_times_and_a_tenth():
    rows = [row("direct", 1, 5000), row("litellm", 1, 50, added_p50=20.0), row("vsr-fast", 1, 500, added_p50=2.0),
            row("litellm", 64, 40, cpu=8000), row("vsr-fast", 64, 400, cpu=1250)]
    checks = peer.goals(rows)
    assert [met for _, met, _ in checks] == [True, True, True, True]
    table = peer.peer_table(rows, "1.0").splitlines()
    assert table[-1].endswith("| 10.0× | 6.4× |")     # req/s ratio, then CPU per request ratio
    assert table[-2].endswith("| 10.0× | — |")


def test_goals_fail_below_ten_times_on_errors_and_on_a_slow_added_p50():
    rows = [row("litellm", 1, 50, added_p50=20.0), row("vsr-fast", 1, 499, added_p50=2.1),
            row("litellm", 16, 40), row("vsr-fast", 16, 800, errors=3)]
    checks = {goal: (met, detail) for goal, met, detail in peer.goals(rows)}
    assert checks["vsr-fast ≥ 10× LiteLLM's req/s at concurrency 1"] == (False, "9.98×")
    assert checks["vsr-fast ≥ 10× LiteLLM's req/s at concurrency 16"][0] is True
    assert checks["vsr-fast: zero errors"] == (False, "3 errors")
    assert checks["vsr-fast's added p50 at concurrency 1 ≤ 1/10 of LiteLLM's"][0] is False


def test_a_missing_litellm_figure_fails_the_goal():
    checks = peer.goals([row("vsr-fast", 1, 500, added_p50=1.0)])
    against_litellm = [(met, detail) for goal, met, detail in checks if "LiteLLM" in goal]
    assert against_litellm == [(False, "no figure"), (False, "no figure")]


def test_scaling_table_gives_the_ratio_and_the_clients_share_of_its_core():
    one = dict(row("vsr-fast-w1", 16, 400), bench_cpu_us_per_req=100.0)
    two = dict(row("vsr-fast-w2", 16, 720), bench_cpu_us_per_req=125.0)
    last = peer.scaling_table([one, two]).splitlines()[-1]
    assert last.endswith("| 1.80× | 100 µs, 4 % / 125 µs, 9 % |")


def test_rounds_are_compared_pair_by_pair_and_steal_is_shown():
    mine = dict(row("vsr-fast", 1, 600), round_req_per_s=[700.0, 300.0, 650.0], host_steal_pct=12.4)
    theirs = dict(row("litellm", 1, 60), round_req_per_s=[70.0, 50.0, 50.0])
    assert peer.round_ratios([mine, theirs]) == ["- concurrency 1, stream off: 6.0, 10.0, 13.0 (median 10.0×)"]
    assert "steal 12 %" in peer.cell(mine)
    assert "steal" not in peer.cell(theirs)
    assert peer.round_ratios([dict(mine, round_req_per_s=[700.0]), dict(theirs, round_req_per_s=[70.0])]) == []
