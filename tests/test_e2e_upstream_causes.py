"""Why an upstream failed, in one word: the cause label of vsr_upstream_errors_total, the access log's cause and
an INFO line per failed attempt, for a dead backend (connection refused) and a hanging one (read timeout)."""
from __future__ import annotations

import json
import re
import subprocess

import httpx

from .procs import Proc, config, refused_port, router, wait_for_value, write_config


def test_refused_and_hanging_backends_name_their_cause(tmp_path, silent):
    dead = f"http://127.0.0.1:{refused_port()}/v1"
    doc = config([{"name": "dead", "backend_refs": [{"endpoint": dead, "name": "gone"}]},
                  {"name": "hang", "backend_refs": [{"endpoint": f"{silent.url}/v1", "name": "stuck",
                                                     "read_timeout_ms": 300}]}],
                 [{"name": "d", "modelRefs": [{"model": "dead"}, {"model": "hang"}]}])
    doc["global"] = {"router": {"access_log": {"enabled": True},
                                "upstream": {"retries": {"max_retries": 0}}}}
    with router(write_config(doc, str(tmp_path)), "--log-level", "INFO") as proc, httpx.Client(timeout=30) as client:
        chat = {"messages": [{"role": "user", "content": "hi"}]}
        refused = client.post(f"{proc.url}/v1/chat/completions", json={"model": "dead", **chat})
        hung = client.post(f"{proc.url}/v1/chat/completions", json={"model": "hang", **chat})
        assert (refused.status_code, hung.status_code) == (502, 504), (refused.text, hung.text)
        # The timeout's value is named: which limit passed, not only that one did.
        assert "no answer came within the read timeout (0.3 s; read_timeout)" in hung.json()["error"]["message"]
        metrics = client.get(f"{proc.url}/metrics").text

        def access_lines():
            found = [json.loads(x) for x in proc.lines if x.startswith("{")]
            return found if len(found) == 2 else None

        logged = wait_for_value(access_lines, "two access log lines")
        def info_lines():
            found = [x for x in proc.lines if " INFO upstream attempt failed: " in x]
            return found if len(found) == 2 else None

        info = wait_for_value(info_lines, "two INFO lines")

    errors = dict(re.findall(r'^vsr_upstream_errors_total\{model="(\w+)",backend="\w+",cause="(\w+)"\} 1$',
                             metrics, re.M))
    assert errors == {"dead": "connect_refused", "hang": "read_timeout"}
    assert [(e["model"], e["status"], e["error"], e["cause"]) for e in logged] == [
        ("dead", 502, "upstream_failed", "connect_refused"), ("hang", 504, "upstream_timeout", "read_timeout")]
    assert "ConnectError" in logged[0]["message"] and "ReadTimeout" in logged[1]["message"]
    assert "model=dead backend=gone cause=connect_refused: backend gone failed: ConnectError" in info[0]
    assert "model=hang backend=stuck cause=read_timeout: backend stuck timed out (ReadTimeout)" in info[1]


def test_a_backend_whose_certificate_fails_verification_is_a_tls_error_tried_once(tmp_path, mock):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    with Proc(["-m", "tests.tls_proxy", "--cert", str(cert), "--key", str(key),
               "--target", mock.url.removeprefix("http://")], "tls_proxy: listening") as proxy:
        selfsigned = {"endpoint": f"https://127.0.0.1:{proxy.port}/v1", "name": "selfsigned"}
        doc = config([{"name": "tls", "backend_refs": [selfsigned]},
                      {"name": "both", "backend_refs": [{**selfsigned, "name": "first"},
                                                        {"endpoint": f"{mock.url}/v1", "name": "plain"}]}],
                     [{"name": "d", "modelRefs": [{"model": "tls"}]}])
        doc["global"] = {"router": {"access_log": {"enabled": True}}}
        with router(write_config(doc, str(tmp_path)), "--log-level", "INFO") as proc, \
                httpx.Client(timeout=30) as client:
            chat = {"messages": [{"role": "user", "content": "hi"}]}
            r = client.post(f"{proc.url}/v1/chat/completions", json={"model": "tls", **chat})
            assert r.status_code == 502, r.text
            message = r.json()["error"]["message"]
            assert "certificate verify failed: self-signed certificate (tls_error)" in message, message
            assert "127.0.0.1" not in message
            # Another backend is still tried in the same round (the round robin starts with the first).
            assert client.post(f"{proc.url}/v1/chat/completions", json={"model": "both", **chat}).status_code == 200
            metrics = client.get(f"{proc.url}/metrics").text
            logged = wait_for_value(lambda: [json.loads(x) for x in proc.lines if x.startswith("{")] or None,
                                    "an access log line")
            info = [x for x in proc.lines if " INFO upstream attempt failed: " in x]
    # One attempt: a certificate that failed verification fails again, so no round retries it.
    errors = re.findall(r'^vsr_upstream_errors_total\{model="(\w+)",backend="(\w+)",cause="(\w+)"\} (\d+)$',
                        metrics, re.M)
    assert sorted(errors) == [("both", "first", "tls_error", "1"), ("tls", "selfsigned", "tls_error", "1")]
    assert (logged[0]["cause"], logged[0]["status"]) == ("tls_error", 502)
    assert "self-signed certificate" in logged[0]["message"]
    assert "cause=tls_error" in info[0] and "certificate verify failed: self-signed certificate" in info[0]
