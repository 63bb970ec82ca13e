"""A router's start builds only what its configuration uses: a start's CPU is mostly imports and tables, and the
suite starts some 400 routers."""
from __future__ import annotations

import json
import ssl
import subprocess
import sys
import tempfile

import httpx

from vsr_fast.routing.loaded import load_raw
from vsr_fast.upstream.pool import Upstreams

from .procs import ROOT, Proc, config, model, write_config

# The router as `vsr-fast serve` runs it, saying at exit which of the optional packages and modules it loaded.
_SERVE = """
import atexit, json, sys
WATCHED = json.loads(sys.argv[1])
atexit.register(lambda: sys.stderr.write("loaded: " + json.dumps(sorted(
    m for m in sys.modules if any(m == w or m.startswith(w + ".") for w in WATCHED))) + "\\n"))
from vsr_fast.cli import main
sys.exit(main(sys.argv[2:]))
"""
WATCHED = ["redis", "opentelemetry"]


def _loaded(path: str) -> list[str]:
    """The watched modules a router on ``path`` loaded by the time it stopped, after answering one request."""
    proc = Proc(["-c", _SERVE, json.dumps(WATCHED), "serve", "--config", path, "--host", "127.0.0.1", "--port", "0"],
                "vsr-fast: serving on", env={"VSR_STATE_DIR": tempfile.mkdtemp(prefix="vsr-state-")})
    with proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", timeout=30,
                       json={"model": "vsr/auto", "messages": [{"role": "user", "content": "Say hello"}]})
        assert r.status_code == 200, r.text
        proc.signal()
        assert proc.wait() == 0
    line = next(l for l in proc.lines if l.startswith("loaded: "))
    return json.loads(line.removeprefix("loaded: "))


def test_a_router_with_no_redis_configured_never_loads_redis_py(mock, tmp_path):
    doc = config([model("general-model", f"{mock.url}/v1", upstream_name="mock-general")],
                 [{"name": "general", "rules": {"operator": "AND", "conditions": []},
                   "modelRefs": [{"model": "general-model"}]}])
    assert _loaded(write_config(doc, str(tmp_path))) == []


def test_only_an_https_backend_builds_the_tls_context():
    def upstreams(*endpoints: str, previous: Upstreams | None = None) -> Upstreams:
        doc = config([model(f"m{i}", e) for i, e in enumerate(endpoints)],
                     [{"name": "d", "modelRefs": [{"model": "m0"}]}])
        return Upstreams(load_raw(doc).config, previous)

    plain = upstreams("http://127.0.0.1:9/v1", "127.0.0.1:9")
    assert plain.context is None
    secure = upstreams("http://127.0.0.1:9/v1", "https://api.example.com/v1", previous=plain)
    assert isinstance(secure.context, ssl.SSLContext)
    assert secure.backends["m1"][0].prober()._ssl_context is secure.context
    assert upstreams("https://api.example.com/v1", previous=secure).context is secure.context   # one per process


# In a process of its own: the detector is built once per process.
_DETECT = """
from vsr_fast.signals import langid_model, language
print(language.detect("The weather was lovely this morning.").code, langid_model.unpacked_matches(),
      str(langid_model.UNPACKED) in open("/proc/self/maps").read())
"""


def test_the_language_detector_maps_the_unpacked_model_rather_than_reading_it():
    """Read, the tables cost each process ~0.07 s of CPU and ~68 MB of its own; mapped, their pages are shared."""
    out = subprocess.run([sys.executable, "-c", _DETECT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["en", "True", "True"]       # make build wrote the copy; the kernel maps it
