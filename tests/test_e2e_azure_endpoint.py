"""An Azure OpenAI deployment as a backend (outside-user trial): its endpoint carries the deployment in its path
and ``api-version`` in its query, and the key goes under ``api-key`` with no prefix. The query reaches every
request built from the endpoint, the health check's probe included; a fragment and a pasted API route are refused
at load with their field path."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler

import anthropic
import httpx
import openai
import pytest

from vsr_fast.errors import ConfigError
from vsr_fast.routing import load_raw

from .hostile_upstream import serving
from .procs import config, router, wait_until, write_config

DEPLOYMENT = "/openai/deployments/my-gpt4o"
QUERY = "api-version=2024-06-01"
CHAT = {"id": "chatcmpl-az", "object": "chat.completion", "created": 0, "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "from azure"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
RESPONSE = {"id": "resp_az", "object": "response", "created_at": 0, "status": "completed", "model": "gpt-4o",
            "output": [{"type": "message", "id": "msg_az", "status": "completed", "role": "assistant",
                        "content": [{"type": "output_text", "text": "from azure", "annotations": []}]}],
            "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}}
MESSAGE = {"id": "msg_az", "type": "message", "role": "assistant", "model": "claude", "stop_reason": "end_turn",
           "content": [{"type": "text", "text": "from azure"}], "usage": {"input_tokens": 3, "output_tokens": 2}}


class _Azure(BaseHTTPRequestHandler):
    """Azure's data plane as far as the router meets it: the deployment's routes with the api-version query and the
    api-key header, and the resource's model list; 404 for anything else, as Azure answers it."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str, str | None]] = []
    lock = threading.Lock()

    def log_message(self, *args) -> None:
        pass

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self) -> None:
        with self.lock:
            self.seen.append((self.command, self.path, self.headers.get("api-key")))

    def do_GET(self) -> None:
        self._record()
        if self.path == f"/openai/models?{QUERY}" and self.headers.get("api-key") == "k":
            self._answer(200, {"object": "list", "data": []})
        else:
            self._answer(404, {"error": {"code": "404", "message": "Resource not found"}})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self._record()
        bodies = {f"{DEPLOYMENT}/chat/completions?{QUERY}": CHAT, f"{DEPLOYMENT}/responses?{QUERY}": RESPONSE,
                  f"{DEPLOYMENT}/messages?{QUERY}": MESSAGE}
        if self.path in bodies and self.headers.get("api-key") == "k":
            self._answer(200, bodies[self.path])
        else:
            self._answer(404, {"error": {"code": "404", "message": "Resource not found"}})


def _azure(name: str, url: str, api_format: str = "openai", **extra) -> dict:
    return {"name": name, "api_format": api_format, "backend_refs": [
        {"endpoint": f"{url}{DEPLOYMENT}?{QUERY}", "name": f"{name}-be",
         "auth": {"api_key": "k", "header": "api-key", "prefix": ""}, **extra}]}


def test_an_azure_deployment_gets_its_query_on_every_route_and_on_its_health_check(tmp_path):
    check = {"enabled": True, "interval_ms": 100, "timeout_ms": 1000}
    with serving(_Azure) as url:
        doc = config([_azure("azure-chat", url, health_check=check), _azure("azure-resp", url, "responses"),
                      _azure("azure-msg", url, "anthropic")],
                     [{"name": "d", "modelRefs": [{"model": "azure-chat"}]}])
        with router(write_config(doc, str(tmp_path))) as proc:
            oa = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="x", max_retries=0)
            chat = oa.chat.completions.create(model="azure-chat", messages=[{"role": "user", "content": "hi"}])
            assert chat.choices[0].message.content == "from azure"
            assert oa.responses.create(model="azure-resp", input="hi").output_text == "from azure"
            an = anthropic.Anthropic(base_url=proc.url, api_key="x", max_retries=0)
            msg = an.messages.create(model="azure-msg", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
            assert msg.content[0].text == "from azure"
            posts = [(path, key) for method, path, key in _Azure.seen if method == "POST"]
            assert posts == [(f"{DEPLOYMENT}/chat/completions?{QUERY}", "k"), (f"{DEPLOYMENT}/responses?{QUERY}", "k"),
                             (f"{DEPLOYMENT}/messages?{QUERY}", "k")]
            # Azure serves no /models under a deployment: the check asks the resource's list with the same query.
            wait_until(lambda: 'backend="azure-chat-be",outcome="ok"} ' in httpx.get(f"{proc.url}/metrics").text,
                       "a passing health check")
            probes = {path for method, path, _ in _Azure.seen if method == "GET"}
            assert probes == {f"/openai/models?{QUERY}"}
            assert 'vsr_backend_up{model="azure-chat",backend="azure-chat-be"} 1' in httpx.get(f"{proc.url}/metrics").text


def _with_endpoint(endpoint: str) -> dict:
    return config([{"name": "m", "backend_refs": [{"endpoint": endpoint}]}], [{"name": "d", "modelRefs": [{"model": "m"}]}])


def test_an_endpoint_with_a_fragment_is_refused_with_its_path():
    with pytest.raises(ConfigError) as info:
        load_raw(_with_endpoint(f"http://127.0.0.1:9{DEPLOYMENT}?{QUERY}#frag"))
    assert any(line.startswith("providers.models[m].backend_refs[0].endpoint: invalid_value:") and "fragment" in line
               for line in info.value.lines), info.value.lines


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/messages", "/v1/responses",
                                   f"{DEPLOYMENT}/chat/completions"])
def test_a_pasted_full_api_url_is_refused_with_its_path(route):
    with pytest.raises(ConfigError) as info:
        load_raw(_with_endpoint(f"http://127.0.0.1:9{route}?{QUERY}"))
    assert any(line.startswith("providers.models[m].backend_refs[0].endpoint: invalid_value:") and route.rsplit("/", 1)[1]
               in line for line in info.value.lines), info.value.lines


def test_an_endpoint_with_a_query_loads():
    load_raw(_with_endpoint(f"http://127.0.0.1:9{DEPLOYMENT}?{QUERY}"))
