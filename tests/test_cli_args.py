"""A bad argument value is argparse's one-line refusal and exit 2, or one line of the command's own, never a traceback."""
from __future__ import annotations

import subprocess

import pytest

from tests.procs import cli as vsr_fast
from tests.procs import cli_process


def refused(out: subprocess.CompletedProcess, flag: str, why: str) -> None:
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 2, out.stderr
    errors = [x for x in out.stderr.splitlines() if ": error: " in x]
    assert len(errors) == 1 and f"argument {flag}: " in errors[0] and why in errors[0], out.stderr


@pytest.mark.parametrize(("flag", "value", "why"), [
    ("--port", "99999", "must be 0-65535"),
    ("--port", "-1", "must be 0-65535"),
    ("--port", "http", "not a whole number"),
    ("--log-level", "bogus", "invalid choice: 'BOGUS'"),
    ("--graceful-timeout", "-5", "0 or more"),
    ("--graceful-timeout", "nan", "0 or more"),
    ("--graceful-timeout", "soon", "not a number of seconds"),
    ("--drain-delay", "-1", "0 or more"),
    ("--fd", "-3", "at least 0"),
    ("--worker-index", "-1", "at least 0"),
])
def test_serve_refuses_a_bad_number_or_level_before_starting(flag, value, why):
    refused(vsr_fast("serve", "--config", "config/quickstart.yaml", flag, value), flag, why)


def test_the_command_a_user_runs_refuses_as_main_does():
    """The other refusals are main() in this process; the process itself (python -m vsr_fast) refuses alike."""
    refused(cli_process("serve", "--config", "config/quickstart.yaml", "--port", "99999"), "--port", "must be 0-65535")
    refused(cli_process("keys", "list", "--redis", "notaurl"), "--redis", "not a redis://")


def test_a_log_level_in_any_case_is_taken():
    from vsr_fast.cli._parser import parser as _parser

    assert _parser().parse_args(["serve", "--config", "c.yaml", "--log-level", "debug"]).log_level == "DEBUG"


@pytest.mark.parametrize("value", ["0", "-1"])
def test_route_probe_refuses_a_concurrency_below_one(value):
    out = vsr_fast("route", "probe", "--config", "config/quickstart.yaml", "--prompt", "hi", "--concurrency", value)
    refused(out, "--concurrency", "at least 1")


@pytest.mark.parametrize(("flag", "value", "why"), [
    ("--rpm", "-5", "at least 1"),
    ("--tpm", "0", "at least 1"),
    ("--concurrent", "-1", "at least 1"),
    ("--budget-tokens", "0", "at least 1"),
    ("--redis", "notaurl", "not a redis://"),
])
def test_keys_create_refuses_a_bad_limit_or_store_url(flag, value, why):
    refused(vsr_fast("keys", "create", "someone", flag, value), flag, why)


def test_keys_list_refuses_a_url_that_is_not_redis():
    refused(vsr_fast("keys", "list", "--redis", "notaurl"), "--redis", "not a redis://")


def test_config_migrate_to_an_unwritable_place_is_one_line(tmp_path):
    out_path = tmp_path / "missing" / "out.yaml"
    out = vsr_fast("config", "migrate", "config/quickstart.yaml", "-o", str(out_path))
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 2
    assert out.stderr.splitlines() == [f"vsr-fast: cannot write {out_path}: No such file or directory"]
