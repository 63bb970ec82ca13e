import gc

import pytest

from bench.fake_systemone import process as fake_process

from .procs import Proc, config, mock_upstream, model, router, write_config


def pytest_configure(config):
    """A worker holds what the tests loaded (embedded models' vocabularies, gazetteers) for its whole run: rarer
    young collections and a frozen collected set keep the collector from scanning it over and over (~8 % of an
    in-process test file's CPU)."""
    gc.set_threshold(50_000, 20, 20)


def pytest_collection_finish(session):
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="module")
def mock():
    with mock_upstream() as proc:
        yield proc


@pytest.fixture(scope="module")
def fake():
    """The fake System One API (bench.fake_systemone) as a real HTTP server."""
    with fake_process() as proc:
        yield proc


@pytest.fixture(scope="module")
def agent():
    """The scripted agent model (bench.agent_model) as a real HTTP server; it logs every call (/_agent/log)."""
    with Proc(["-m", "bench.agent_model", "--host", "127.0.0.1", "--port", "0"], "listening") as proc:
        yield proc


@pytest.fixture(scope="module")
def silent():
    """A mock upstream that accepts and answers nothing for a minute."""
    with mock_upstream("--latency-ms", "60000") as proc:
        yield proc


@pytest.fixture(scope="module")
def routed(mock, tmp_path_factory):
    """A router with one recipe whose decision prefers general-model, then fast-model."""
    doc = config(
        [model("general-model", f"{mock.url}/v1", upstream_name="mock-general"),
         model("fast-model", f"{mock.url}/v1", upstream_name="mock-fast")],
        [{"name": "general", "priority": 10, "rules": {"operator": "AND", "conditions": []},
          "modelRefs": [{"model": "general-model"}, {"model": "fast-model"}]}],
    )
    path = write_config(doc, str(tmp_path_factory.mktemp("cfg")))
    with router(path) as proc:
        yield proc
