"""docs/config.md is the schema: regenerated, it is the same file, and it covers every block and field."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
import msgspec
import yaml
from msgspec import inspect as mi

from vsr_fast.cli import reference
from vsr_fast.config.schema import BackendRef, Decision, RouterConfig
from vsr_fast.plugins.table import CONFIGURATIONS
from vsr_fast.routing import load_raw

from .procs import ROOT

DOC = ROOT / "docs" / "config.md"


def test_the_document_is_what_the_schema_generates():
    generated = subprocess.run([sys.executable, "-m", "vsr_fast.cli.reference"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout
    assert generated == DOC.read_text(), ("docs/config.md disagrees with the schema: regenerate it with "
                                          "`python -m vsr_fast.cli.reference > docs/config.md`")


def _every_struct():
    seen: set[type] = set()

    def walk(cls):
        if cls in seen:
            return
        seen.add(cls)
        for f in mi.type_info(cls).fields:
            for sub, _ in reference._structs(f.type):
                walk(sub)

    walk(RouterConfig)
    for cls in CONFIGURATIONS.values():
        walk(cls)
    return seen


def test_every_block_and_field_has_a_row():
    text = reference.render()
    sections = dict(re.findall(r'<a id="([^"]+)"></a>\n\n### [^\n]+\n(.*?)(?=\n<a id=|\Z)', text, re.S))
    structs = _every_struct()
    assert len(sections) == len(structs)
    for cls in structs:
        body = sections[reference._anchor(cls)]
        for f in mi.type_info(cls).fields:
            assert f"| `{f.encode_name}` |" in body, f"{cls.__name__}.{f.encode_name} has no row"


def test_rows_say_defaults_allowed_values_and_notes():
    text = DOC.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `read_timeout_ms` |"))
    assert "`120000`" in row and "≥ 1, ≤ 3600000" in row and "between bytes of the answer" in row
    domains = next(line for line in text.splitlines() if line.startswith("| `domains` |"))
    assert "`type: domain`" in domains
    labels = [line for line in text.splitlines() if line.startswith("| `labels` |") and "`computer science`" in line]
    assert len(labels) == 1, "a domain rule's 14 labels are listed"
    assert ("one of: `escalate`, `fusion`, `multi_factor`, `random`, `ratings`, `remom`, `static`, `systemone`, "
            "`workflows`") in text


def test_each_scalar_example_loads_where_the_document_puts_it():
    """The example of each scalar field of a backend and a decision is a value the load takes there."""
    base = {"version": "v0.5",
            "providers": {"models": [{"name": "m", "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]}]},
            "recipes": [{"name": "default", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}]}]}]}
    targets = {BackendRef: lambda d: d["providers"]["models"][0]["backend_refs"][0],
               Decision: lambda d: d["recipes"][0]["decisions"][0]}
    fields = {BackendRef: ["weight", "connect_timeout_ms", "read_timeout_ms", "max_connections", "pool_shards",
                           "max_pending", "protocol"],
              Decision: ["priority", "request_timeout_ms", "description"]}
    for cls, names in fields.items():
        for f in mi.type_info(cls).fields:
            if f.name not in names:
                continue
            example = reference._example(cls, f, reference.KNOWN_VALUES.get((cls, f.name)))
            doc = yaml.safe_load(msgspec.json.encode(base))
            targets[cls](doc).update(yaml.safe_load(example.strip("`")))
            if f.name == "protocol":
                targets[cls](doc)["endpoint"] = "https://127.0.0.1:9/v1"
            load_raw(doc)


def test_context_window_size_loads_and_its_row_offers_an_example():
    """Trial 28: the load refused context_window_size, so compress's max_tokens auto had no window to read."""
    row = next(line for line in DOC.read_text().splitlines() if line.startswith("| `context_window_size` |"))
    assert "Refused at load" not in row and "context_window_size: 10" in row, row
    base = {"version": "v0.5", "recipes": [{"name": "default", "decisions": [{"name": "d", "modelRefs": [{"model": "m"}]}]}],
            "providers": {"models": [{"name": "m", "context_window_size": 10,
                                      "backend_refs": [{"endpoint": "http://127.0.0.1:9/v1"}]}]}}
    assert load_raw(base).config.providers.models[0].context_window_size == 10


def test_a_redis_block_s_examples_are_a_redis_url_and_its_password_s_variable():
    """Trial 88: the event stream's ``url`` example was an OpenAI base URL and ``password_env`` MY_API_KEY."""
    from vsr_fast.config.stores import RedisAt
    blocks = [cls for cls in _every_struct() if issubclass(cls, RedisAt)]
    assert len(blocks) >= 5
    for cls in blocks:
        fields = {f.name: f for f in mi.type_info(cls).fields}
        assert reference._example(cls, fields["url"], None).startswith("`url: redis://"), cls
        assert reference._example(cls, fields["password_env"], None) == "`password_env: REDIS_PASSWORD`", cls


def test_the_event_stream_s_entry_format_names_every_event_type():
    """Trial 88: a consumer of the Redis stream had to read the source to learn an entry's field and encoding."""
    from vsr_fast.events.types import EVENT_TYPES
    section = DOC.read_text().split('<a id="eventstreamstore"></a>', 1)[1].split("<a id=", 1)[0]
    assert "field ``e``, msgpack-encoded" in section
    for kind in EVENT_TYPES:
        assert f"``{kind.__struct_config__.tag}`` ({kind.__name__})" in section, kind
