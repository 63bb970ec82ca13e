"""Backend credentials and header values as an SRE writes them (trial 10b): a key read from an environment variable
filled from a file (a Kubernetes Secret keeps its trailing newline) is sent without it; a value that cannot travel in
an HTTP header, or a placeholder no layer expands (``${VAR}``, ``os.environ/VAR``), is refused at load with its path,
not sent to fail every request and eject the backend."""
from __future__ import annotations

import httpx
import pytest

from .procs import cli_process, config, model, router, write_config
from .test_config_load import errors_of
from .test_e2e_chat import CHAT, mock_stats


def _doc(auth: dict, endpoint: str = "http://127.0.0.1:9/v1") -> dict:
    return config([model("m", endpoint, auth=auth)], [{"name": "d", "modelRefs": [{"model": "m"}]}])


def test_env_key_with_trailing_newline_is_sent_stripped(mock, tmp_path):
    doc = _doc({"api_key_env": "VSR_TEST_NL_KEY"}, f"{mock.url}/v1")
    with router(write_config(doc, str(tmp_path)), env={"VSR_TEST_NL_KEY": "sk-backend\n"}) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
        assert r.status_code == 200, r.text
        assert mock_stats(mock)["last_request"]["headers"]["authorization"] == "Bearer sk-backend"
        assert httpx.get(f"{proc.url}/ready").status_code == 200


@pytest.mark.parametrize("auth, field", [
    ({"api_key": "sk-x\ny: z"}, "auth.api_key"),
    ({"api_key": "sk-\x01x"}, "auth.api_key"),
    ({"api_key": "sk", "header": "bad header"}, "auth.header"),
    ({"api_key": "sk", "header": "x-key:"}, "auth.header"),
    ({"api_key": "sk", "prefix": "Bearer\r\n"}, "auth.prefix"),
])
def test_unsendable_header_values_refused(auth, field):
    lines = errors_of(_doc(auth))
    mine = [ln for ln in lines if f"backend_refs[0].{field}: invalid_value" in ln]
    assert mine, lines
    assert "sk-x" not in "\n".join(lines)      # the value itself is a secret: never echoed


def test_env_key_with_control_char_inside_refused(monkeypatch):
    monkeypatch.setenv("VSR_TEST_BAD_KEY", "sk-a\nb\n")
    lines = errors_of(_doc({"api_key_env": "VSR_TEST_BAD_KEY"}))
    assert any("backend_refs[0].auth.api_key_env: invalid_value" in ln and "VSR_TEST_BAD_KEY" in ln
               for ln in lines), lines
    assert "sk-a" not in "\n".join(lines)


@pytest.mark.parametrize("value", ["${MY_KEY}", "$MY_KEY", "os.environ/MY_KEY", "Bearer ${MY_KEY}"])
def test_env_placeholders_in_inline_key_refused_with_hint(value):
    lines = errors_of(_doc({"api_key": value}))
    mine = [ln for ln in lines if "backend_refs[0].auth.api_key: invalid_value" in ln]
    assert mine and "api_key_env" in mine[0], lines


def test_env_placeholder_in_header_refused():
    lines = errors_of(_doc({"api_key": "sk", "header": "${HDR}"}))
    assert any("backend_refs[0].auth.header: invalid_value" in ln for ln in lines), lines


def test_env_placeholder_in_endpoint_names_env_form():
    lines = errors_of(_doc({}, "${UPSTREAM_URL}"))
    mine = [ln for ln in lines if "backend_refs[0].endpoint: invalid_value" in ln]
    assert mine and "environment" in mine[0], lines


def test_validate_refuses_newline_key_in_process(tmp_path):
    path = write_config(_doc({"api_key": "sk-x\nx: y", "header": "bad header"}), str(tmp_path))
    r = cli_process("config", "validate", path)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "auth.api_key: invalid_value" in r.stdout + r.stderr


def test_backend_key_from_file_like_a_mounted_secret(mock, tmp_path):
    key = tmp_path / "key"
    key.write_text("sk-from-file\n")
    doc = _doc({"api_key_file": str(key)}, f"{mock.url}/v1")
    with router(write_config(doc, str(tmp_path))) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": CHAT})
        assert r.status_code == 200, r.text
        assert mock_stats(mock)["last_request"]["headers"]["authorization"] == "Bearer sk-from-file"


def test_one_key_source_per_auth_block(tmp_path):
    lines = errors_of(_doc({"api_key": "sk", "api_key_file": str(tmp_path / "missing")}))
    assert any("backend_refs[0].auth: invalid_value: set one of api_key or api_key_file, not both" in ln
               for ln in lines), lines
    assert any("backend_refs[0].auth.api_key_file: file_unreadable" in ln for ln in lines), lines
