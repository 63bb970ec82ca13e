"""Embeddings for recall only (spec 5.5): the catalog, its load checks, the embedded and remote deployments, the
inventory, lazy start, and that no decision path reads an embedding.

The remote deployment is the bench mock upstream's ``/v1/embeddings`` (a real HTTP server answering hashed
bag-of-words vectors); the semantic cache end to end embeds with it.
"""
from __future__ import annotations

import msgspec
import numpy as np
import pytest

from vsr_fast.config.catalog import Deployment, ModelCatalog
from vsr_fast.embeddings import Embedders, RemoteEmbedder
from vsr_fast.errors import EmbeddingFailed

from .procs import router, write_config
from .test_e2e_semantic_cache import ASKED, PARAPHRASE, UNRELATED, ask, config, stored
from .test_layers import _imports
from .test_plugins_config import doc, errors_of

REMOTE = {"provider": "openai_embeddings", "endpoint": "http://127.0.0.1:1/v1", "model": "emb",
          "capabilities": {"dimensions": 64}}


def catalog_doc(deployments: dict, *, default: str | None = None, store: dict | None = None) -> dict:
    d = doc([])
    catalog: dict = {"deployments": deployments}
    if default is not None:
        catalog["embeddings"] = {"default": {"deployment": default}}
    d["global"]["model_catalog"] = catalog
    if store is not None:
        d["global"]["stores"] = {"response_cache": store}
    return d


DEP = "global.model_catalog.deployments"


@pytest.mark.parametrize(("d", "line"), [
    (catalog_doc({"e": {**REMOTE, "capabilities": {}}}),
     f"{DEP}.e.capabilities.dimensions: missing_field: an openai_embeddings deployment declares the width"),
    (catalog_doc({"e": {k: v for k, v in REMOTE.items() if k != "endpoint"}}),
     f"{DEP}.e.endpoint: missing_field"),
    (catalog_doc({"e": {**REMOTE, "auth": {"credential": "delegated"}}}),
     f"{DEP}.e.auth.credential: invalid_value"),
    (catalog_doc({}, default="nope"),
     "global.model_catalog.embeddings.default.deployment: unknown_deployment: 'nope' is not declared"),
    (catalog_doc({"remote-judge": {"provider": "systemone", "endpoint": "http://127.0.0.1:1"}}, default="remote-judge"),
     "global.model_catalog.embeddings.default.deployment: invalid_value: deployment 'remote-judge' does not embed text"),
    (catalog_doc({"e": {**REMOTE, "capabilities": {"dimensions": 64, "modalities": ["image"]}}}, default="e"),
     "global.model_catalog.embeddings.default.deployment: invalid_value: deployment 'e' does not embed text"),
    (catalog_doc({}, store={"embedding": {"deployment": "ghost", "dimension": 256}}),
     "global.stores.response_cache.embedding: unknown_deployment: 'ghost' is not declared"),
    (catalog_doc({"e": REMOTE}, store={"embedding": {"deployment": "e", "dimension": 256}}),
     "global.stores.response_cache.embedding.dimension: invalid_value: the index holds 256-wide vectors; "
     "deployment 'e' answers with 64"),
    (catalog_doc({}, store={"embedding": {"deployment": "vela-embedding", "dimension": 384}}),
     "global.stores.response_cache.embedding.dimension: invalid_value: the index holds 384-wide vectors; "
     "deployment 'vela-embedding' answers with 256"),
    (catalog_doc({}, store={"embedding": {"deployment": "vela-embedding"}}),
     "global.stores.response_cache.embedding.dimension: missing_field"),
    (catalog_doc({"e": {**REMOTE, "capabilities": {"dimensions": 0}}}), f"{DEP}.e.capabilities.dimensions: invalid_value"),
])
def test_each_bad_embedding_form_is_one_line_naming_what_it_refuses(d, line):
    lines = errors_of(d)
    assert any(got.startswith(line) for got in lines), lines


def test_good_embedding_blocks_load():
    from vsr_fast.routing import load_raw
    load_raw(catalog_doc({"e": REMOTE}, default="e", store={"embedding": {"deployment": "e", "dimension": 64}}))
    load_raw(catalog_doc({"mine": {"provider": "model_runtime", "artifact": "vsr-static-3"}},
                         store={"embedding": {"deployment": "mine", "dimension": 256}}))


def test_an_embedding_deployment_is_no_decision_model():
    """An openai_embeddings deployment answers no question: a judge naming it is refused as undeclared."""
    d = catalog_doc({"e": REMOTE})
    d["recipes"][0]["decisions"][0]["plugins"] = [
        {"type": "tools", "configuration": {"select": {"match": {"judge": {"deployment": "e"}}}}}]
    assert any("unknown_deployment: 'e'" in line for line in errors_of(d))


def test_the_embedded_deployment_starts_on_first_use_and_embeds_256_wide():
    embedders = Embedders(ModelCatalog())
    vela = embedders.get()
    assert [row["started"] for row in embedders.inventory()] == [False]
    rows = vela.encode(["How do I reverse a list in Python?", "How can I reverse a python list", "Rome's history"])
    assert rows.shape == (3, 256) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert rows[0] @ rows[1] > rows[0] @ rows[2]
    assert vela.inline and embedders.inventory()[0]["started"]


def test_a_remote_deployment_embeds_over_http_with_its_declared_width(mock):
    catalog = msgspec.convert({"deployments": {"e": {"provider": "openai_embeddings", "endpoint": f"{mock.url}/v1",
                                                     "model": "emb", "capabilities": {"dimensions": 64}}},
                               "embeddings": {"default": {"deployment": "e"}}}, ModelCatalog)
    embedders = Embedders(catalog)
    try:
        remote = embedders.get()
        assert isinstance(remote, RemoteEmbedder) and not remote.started and not remote.inline
        rows = remote.encode(["reverse a list in python", "reverse a python list", "the history of Rome"])
        assert rows.shape == (3, 64) and remote.started
        assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
        assert rows[0] @ rows[1] > 0.8 > rows[0] @ rows[2]      # 4 of 5 words shared; none
        row = {r["name"]: r for r in embedders.inventory()}["e"]
        assert row == {"name": "e", "provider": "openai_embeddings", "kind": "remote", "model": "emb",
                       "dimensions": 64, "modalities": ["text"], "default": True, "started": True}
    finally:
        embedders.close()


def remote(endpoint: str, dimensions: int) -> Deployment:
    return msgspec.convert({"provider": "openai_embeddings", "endpoint": endpoint,
                            "capabilities": {"dimensions": dimensions}}, Deployment)


def test_a_remote_answer_of_another_width_or_no_answer_fails(mock):
    wrong = RemoteEmbedder("e", remote(f"{mock.url}/v1", 32))
    gone = RemoteEmbedder("g", remote("http://127.0.0.1:1/v1", 32))
    try:
        with pytest.raises(EmbeddingFailed, match="64 wide; it declares 32"):
            wrong.encode(["a text"])
        with pytest.raises(EmbeddingFailed, match="did not answer"):
            gone.encode(["a text"])
    finally:
        wrong.close()
        gone.close()


# Recall features that may embed; everything else, decisions and signals above all, never imports an embedder.
RECALL_MODULES = {"vsr_fast.events.cache_store", "vsr_fast.events.service", "vsr_fast.events.vector_store",
                  "vsr_fast.events.memory_store", "vsr_fast.server.context_stores", "vsr_fast.server.serve",
                  "vsr_fast.server.state"}


def test_no_decision_path_reads_an_embedding():
    readers = {m for m, targets in _imports().items()
               if any(t == "vsr_fast.embeddings" or t.startswith("vsr_fast.embeddings.") for t in targets)
               and not m.startswith("vsr_fast.embeddings")}
    assert readers and readers <= RECALL_MODULES, sorted(readers - RECALL_MODULES)


def inventory(url: str) -> dict[str, dict]:
    import httpx
    return {row["name"]: row for row in httpx.get(f"{url}/api/v1/inventory/embedding-models").json()["data"]}


def test_a_router_without_recall_never_starts_an_embedding(mock, tmp_path):
    with router(write_config(config(mock.url, store={"backend_type": "memory"}, mode="exact"), str(tmp_path))) as proc:
        ask(proc.url, ASKED)
        ask(proc.url, PARAPHRASE)
        assert inventory(proc.url)["vela-embedding"] == {
            "name": "vela-embedding", "provider": "model_runtime", "kind": "embedded", "model": "vsr-static-11",
            "dimensions": 256, "modalities": ["text"], "default": True, "started": False}


def test_the_semantic_cache_recalls_with_a_remote_embedding_deployment(mock, tmp_path):
    import httpx
    d = config(mock.url, store={"backend_type": "memory", "embedding": {"deployment": "remote", "dimension": 64}})
    d["global"]["model_catalog"] = {"deployments": {"remote": {
        "provider": "openai_embeddings", "endpoint": f"{mock.url}/v1", "model": "emb",
        "capabilities": {"dimensions": 64}}}}
    before = httpx.get(f"{mock.url}/_mock/stats").json()["embeddings"]
    with router(write_config(d, str(tmp_path))) as proc:
        assert ask(proc.url, "How do I reverse a list in Python?")["x-vsr-response-path"] == "upstream"
        stored(proc.url, 1)
        assert ask(proc.url, "how do I reverse a Python list")["x-vsr-response-path"] == "cache"
        assert ask(proc.url, UNRELATED)["x-vsr-response-path"] == "upstream"
        rows = inventory(proc.url)
        assert rows["remote"]["started"] and not rows["vela-embedding"]["started"]
    assert httpx.get(f"{mock.url}/_mock/stats").json()["embeddings"] >= before + 3
