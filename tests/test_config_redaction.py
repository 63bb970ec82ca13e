"""A password in a URL (a Redis store's ``redis://:pw@host``, an endpoint's ``http://user:pw@host``, a query's
``key=``) never appears in a configuration error, wherever it is said: ``config validate``, ``serve``'s refusal,
the reload-refused log line, ``POST /admin/reload``'s 422 (trial 10b finding 6)."""
from __future__ import annotations

import os
import signal

import httpx

from vsr_fast.errors import ConfigError, redact

from .procs import cli_process, config, mock_upstream, router, wait_for_value, write_config

SECRETS = ("hunter2pw", "redispw", "QUERYSECRET", "sk-SECRET-BACKEND")


def _bad(endpoint_host: str) -> dict:
    doc = config([{"name": "m", "backend_refs": [
        {"endpoint": f"http://admin:hunter2pw@{endpoint_host}:99999/v1?key=QUERYSECRET",
         "auth": {"api_key": "sk-SECRET-BACKEND\nx"}}]}],
        [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"auth": {"store": {"url": "redis://:redispw@bad host/0"}}},
                     "stores": {"response_cache": {"backend_type": "redis", "url": "rediss://u:redispw@/0"}}}
    return doc


def _clean(text: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"{leaked} in:\n{text}"


def test_redact_keeps_the_user_and_the_shape():
    assert redact("'redis://:pw@h:6379/0' names no host") == "'redis://:***@h:6379/0' names no host"
    assert redact("http://u:p@h/v1?key=abc&x=1") == "http://u:***@h/v1?key=***&x=1"
    assert redact("http://h/v1") == "http://h/v1"
    assert ConfigError(["a: invalid_value: 'redis://:pw@x y'"]).lines == ["a: invalid_value: 'redis://:***@x y'"]


def test_validate_and_serve_never_echo_a_password(tmp_path):
    path = write_config(_bad("127.0.0.1"), str(tmp_path))
    done = cli_process("config", "validate", path)
    assert done.returncode == 1 and "invalid_value" in done.stdout, done.stdout + done.stderr
    assert "redis://:***@" in done.stdout + done.stderr
    _clean(done.stdout + done.stderr)
    done = cli_process("config", "validate", "--format", "json", path)
    _clean(done.stdout + done.stderr)
    done = cli_process("serve", "--config", path, "--port", "0")
    assert done.returncode == 2 and "invalid_value" in done.stderr, done.stderr
    _clean(done.stdout + done.stderr)


def test_reload_refusals_never_echo_a_password(tmp_path):
    with mock_upstream() as upstream:
        good = config([{"name": "m", "backend_refs": [{"endpoint": f"{upstream.url}/v1"}]}],
                      [{"name": "d", "modelRefs": [{"model": "m"}]}])
        path = write_config(good, str(tmp_path))
        with router(path) as proc:
            bad = write_config(_bad("127.0.0.1"), str(tmp_path))
            os.replace(bad, path)
            refused = httpx.post(f"{proc.url}/admin/reload", timeout=30)
            assert refused.status_code == 422, refused.text
            _clean(refused.text)
            proc.signal(signal.SIGHUP)
            wait_for_value(lambda: [x for x in proc.lines if "reload refused (SIGHUP)" in x], "SIGHUP's refusal")
            _clean("\n".join(proc.lines))
            assert any("***" in x for x in proc.lines)
