"""Requests and tokens per key and per team, outside the access log: two real routers sharing a real Redis (a prefix
of this module's own), the bench mock, the OpenAI SDK.

- ``GET /api/v1/keys`` shows each key's requests and charged tokens this UTC day and month (every router's), a key
  without limits too, and the teams beside the keys with theirs.
- ``vsr_team_requests_total`` / ``vsr_team_tokens_total`` label a team only where the configuration names it.
"""
from __future__ import annotations

import datetime as dt
import tempfile

import httpx
import openai
import pytest

from .procs import Proc, redis_prefix, wait_for_value, write_config
from .test_e2e_auth import REDIS_URL, auth_doc, sha

KEYS = {"alice": ("vsk-count-alice-" + "a" * 32, "red", None),
        "bob": ("vsk-count-bob-" + "b" * 32, "red", {"budget": {"tokens": 1_000_000, "period": "month"}}),
        "carol": ("vsk-count-carol-" + "c" * 32, "blue", None)}


@pytest.fixture(scope="module")
def two(mock, tmp_path_factory):
    """((router, admin URL) a, (router, admin URL) b, prefix)."""
    with redis_prefix("counts") as prefix:
        keys = [{"id": name, "sha256": sha(key), "team": team, **({"limits": limits} if limits else {})}
                for name, (key, team, limits) in KEYS.items()]
        doc = auth_doc(mock.url, keys=keys, store={"backend": "redis", "url": REDIS_URL, "prefix": prefix},
                       rate_limits={"teams": {"green": {"rpm": 1000}}})
        doc["listeners"] = [{"name": "main", "address": "127.0.0.1", "port": 0},
                            {"name": "ops", "role": "admin", "port": 0}]
        path = write_config(doc, str(tmp_path_factory.mktemp("cfg-counts")))

        def start() -> Proc:
            return Proc(["-m", "vsr_fast", "serve", "--config", path], "vsr-fast: serving on",
                        env={"VSR_STATE_DIR": tempfile.mkdtemp(prefix="vsr-state-")})

        with start() as a, start() as b:
            yield [(p, next(line for line in p.lines if line.startswith("vsr-fast: admin on")).split()[-1])
                   for p in (a, b)], prefix


def chat(proc, name: str) -> int:
    done = openai.OpenAI(base_url=f"{proc.url}/v1", api_key=KEYS[name][0], max_retries=0).chat.completions.create(
        model="vsr/auto", messages=[{"role": "user", "content": f"hello from {name}"}])
    return done.usage.total_tokens


def test_counts_per_key_and_team_across_routers(two):
    ((a, admin_a), (b, _)), _ = two
    spent = {"alice": chat(a, "alice") + chat(b, "alice") + chat(a, "alice"), "bob": chat(b, "bob")}

    def listed():
        doc = httpx.get(f"{admin_a}/api/v1/keys").json()
        keys = {k["id"]: k for k in doc["keys"]}
        return (keys, {t["team"]: t for t in doc["teams"]}) if keys["bob"]["counts"]["day"]["requests"] == 1 \
            and keys["alice"]["counts"]["day"]["requests"] == 3 else None
    keys, teams = wait_for_value(listed, "both routers' counts to reach the store")
    for name, requests in (("alice", 3), ("bob", 1)):
        for period in ("day", "month"):
            assert keys[name]["counts"][period] == {"requests": requests, "tokens": spent[name]}, keys[name]
    assert keys["alice"]["usage"] == {}, "alice has no limits: her counts are there all the same"
    assert keys["carol"]["counts"]["day"] == {"requests": 0, "tokens": 0}
    assert teams["red"]["counts"]["day"] == {"requests": 4, "tokens": spent["alice"] + spent["bob"]}
    assert teams["blue"]["counts"]["month"]["requests"] == 0 and teams["green"]["limits"]["rpm"] == 1000

    # A month budget ends with the calendar month in UTC.
    now = dt.datetime.now(dt.timezone.utc)
    first = dt.datetime(now.year + now.month // 12, now.month % 12 + 1, 1, tzinfo=dt.timezone.utc)
    assert keys["bob"]["usage"]["budget"]["period_end_ms"] == int(first.timestamp() * 1000)

    metrics = httpx.get(f"{admin_a}/metrics").text
    # a's own requests (alice's two there), under a team a declared key names
    teams_seen = [line for line in metrics.splitlines() if line.startswith("vsr_team")]
    assert 'vsr_team_requests_total{team="red"} 2' in teams_seen, teams_seen
    assert "vsr_team_requests_total{team=\"blue\"}" not in metrics, "no request of blue's on a"
