"""``global.stores``: where the event stream and the response cache live (spec 6.2).

Stores say where state is; they never turn a feature on. The response cache
is turned on by a ``response_cache`` plugin entry and the replay by
``router_replay`` (``vsr_fast.plugins``); writing a backend here does neither.
"""
from __future__ import annotations

import os
from typing import Annotated, Literal
from urllib.parse import quote, urlsplit, urlunsplit

from msgspec import Meta

from .catalog import EmbeddingRef
from .credentials import KeySource, static_key
from .schema_base import Block

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


class RedisAt(Block):
    """Where a Redis-backed block connects: ``url`` (query parameters reach redis-py, socket_timeout=... e.g., and
    win over the router's defaults), and its password out of the file when it must not be written there:
    ``password_env`` (an environment variable) or ``password_file`` (a mounted Secret), surrounding whitespace
    dropped, as the auth blocks' api_key_env and api_key_file read a key."""

    url: str = DEFAULT_REDIS_URL
    password_env: str | None = None
    password_file: str | None = None

    def redis_url(self) -> str:
        """``url`` with the password from ``password_env`` or ``password_file`` in it (a URL's own otherwise)."""
        return with_password(self.url, static_key(KeySource(api_key_env=self.password_env,
                                                            api_key_file=self.password_file)))


def with_password(url: str, password: str | None) -> str:
    """``url`` carrying ``password``: in its userinfo (redis://, rediss://) or its query (unix://)."""
    if not password:
        return url
    parts = urlsplit(url)
    if parts.scheme == "unix":     # no authority to carry it (and urlunsplit would drop the empty one's //)
        return f"{url}{'&' if parts.query else '?'}password={quote(password, safe='')}"
    host = parts.netloc.rsplit("@", 1)[-1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


class EventStreamStore(RedisAt):
    """``global.stores.event_stream``: the routing events' stream.

    ``redis`` appends to the Redis stream ``stream`` at ``url``; ``embedded``
    appends to a journal file under ``path`` and needs no server (the
    quickstart). Both spill to ``path`` when the in-memory queue is full.

    A full disk or a removed ``path`` never stops serving: events a spill (or the final spill at shutdown)
    cannot write count in ``vsr_events_lost_total{reason="spill_error"}``, and a consumer's or the spill's
    offset the disk refuses stays in memory and is written again later (a removed directory is created
    again; ``vsr_events_offset_write_failures_total`` counts the refusals); if the router stops before then, the entries after the last saved offset are delivered again
    (at least once; the stream's marks keep re-sent events from landing twice).

    The entries, for a consumer of your own: each Redis stream entry (XADD) holds one event in its one field
    ``e``, msgpack-encoded as a map by field name (bodies as msgpack ``bin``); ``kind`` tells the event
    types apart: ``request_received`` (RequestReceived), ``signals_evaluated`` (SignalsEvaluated),
    ``decision_chosen`` (DecisionChosen), ``upstream_attempt`` (UpstreamAttempted), ``answer_completed``
    (AnswerCompleted), ``cache_hit`` (CacheHit), ``cache_write`` (CacheWritten), ``shadow_answer``
    (ShadowAnswered), ``plugins_applied`` (PluginsApplied) and ``error`` (ErrorRaised), the msgspec Structs of
    ``vsr_fast/events/types.py``, whose ``decode_event`` reads an entry's bytes. Every event carries
    ``replay_id``, ``request_id``, ``session_id``, ``recipe``, ``config_version``, ``seq`` (the order of the events
    the request path wrote, 0 up; an event a consumer adds later takes the ``seq`` of the event it answers:
    ``cache_write`` its ``answer_completed``'s, ``shadow_answer`` its ``request_received``'s, so two events
    of a request may share one, and a reader orders those by ``kind`` and ``ts_ms``), ``ts_ms`` (Unix
    milliseconds) and ``replay``; a field at its default is left out.
    Every upstream attempt that was started has its ``upstream_attempt``, one a deadline or a cancellation cut
    too (its ``cause`` ``deadline``: the request's ``request_timeout_ms`` or an executor's budget passed;
    ``cancelled``: the client left, a panel had its quorum or a sibling call's failure ended the run), and every
    routed request ends with its ``answer_completed``: a failed one after its ``error``, with the error's
    status, ``response_path`` ``error`` and ``complete`` false.
    The embedded journal holds the same msgpack bytes, each in a frame of its own (``vsr-replay export``
    writes either as JSON lines).
    """

    # "none" records nothing: no replay records, no shadow copies; the response cache still works (looked
    # up in line, written by a task of its own, not through the stream). (Not "off": YAML reads a bare off
    # as false.)
    backend: Literal["redis", "embedded", "none"] = "embedded"
    stream: Annotated[str, Meta(min_length=1)] = "vsr:events"
    # Retention, both backends, approximate: Redis trims with XADD MAXLEN ~ and XTRIM MINID ~ (a consumer
    # group lagging past them loses what was trimmed: size them above the worst backlog); the embedded
    # journal drops whole segments of an eighth of the bounds, only those every consumer group running in
    # the router has acknowledged (a lagging group keeps its unread entries). None: no bound.
    maxlen: Annotated[int, Meta(ge=1_000)] | None = 1_000_000
    max_age_s: Annotated[int, Meta(ge=60)] | None = 7 * 86_400
    batch: Annotated[int, Meta(ge=1, le=4_096)] = 128              # events per write
    queue: Annotated[int, Meta(ge=16, le=10_000_000)] = 65_536     # events held in memory before spilling
    # The embedded journal and the spill journal live here (relative to the working directory).
    # Unset: $VSR_STATE_DIR/events/<port> (".vsr" by default), one per listener (and worker, embedded).
    path: Annotated[str, Meta(min_length=1)] | None = None
    # Past this the spill journal refuses events, and each one counts as lost.
    spill_max_bytes: Annotated[int, Meta(ge=1 << 20)] = 1 << 30


def default_events_dir() -> str:
    """Where event journals live when ``event_stream.path`` is unset: ``$VSR_STATE_DIR/events``
    (``.vsr`` by default), one directory per listener port and worker below it."""
    return os.path.join(os.environ.get("VSR_STATE_DIR", ".vsr"), "events")


class ResponseCacheStore(RedisAt):
    """``global.stores.response_cache``: where exact answers are kept.

    With an event stream (``embedded`` or ``redis``), answers are written by its ``cache-writer`` consumer: while
    the stream's own store is away, they wait with the stream's other events and are written once it is back, so a
    request repeated meanwhile is a miss even when this store answers. With ``event_stream: none``, and for a
    request whose router_replay says ``capture_personal_data: false`` (or whose decision masks), a task of the
    router's writes them: the stream never carries such an answer.
    """

    backend_type: Literal["memory", "redis"] = "memory"
    prefix: Annotated[str, Meta(min_length=1)] = "vsr:cache:"
    max_entries: Annotated[int, Meta(ge=1)] = 10_000               # memory backend only
    # An answer larger than this is not cached (llm_cache_write_skipped_total{reason="too_large"}).
    max_entry_bytes: Annotated[int, Meta(ge=1024, le=64 << 20)] = 1 << 20
    # How long a request waits for the cache's Redis before serving a miss (redis: each lookup's socket and connect
    # timeout); after three misses of that kind in a row the cache is not asked for five seconds. A URL query
    # (?socket_timeout=) still wins. The writer, off the request path, keeps a 2 s timeout.
    lookup_timeout_ms: Annotated[int, Meta(ge=1, le=10_000)] = 250
    # The semantic cache's embedding model and vector width; unset: global.model_catalog.embeddings.default.
    embedding: EmbeddingRef | None = None


class ResponsesStore(RedisAt):
    """``global.stores.responses``: the Responses API's conversations, for ``previous_response_id``.

    Each stored response belongs to its caller's owner (tenant, else key) and is stored under an id the router
    assigned, whatever id the backend gave it: no owner's answer can replace another's. ``memory`` is bounded
    fairly: the owner holding the most is evicted first (``max_entries_per_owner``). ``redis`` keeps no per-owner
    count, by choice: every key expires after ``ttl_seconds``, so nothing one owner stores displaces another's;
    a per-owner cap would cost a round trip more on every answer. Run that Redis with ``maxmemory-policy
    noeviction`` and size it for the traffic the keys' rate limits allow: full, it refuses new responses (their
    follow-ups get ``previous_response_not_found``) but displaces none; an evicting policy (``allkeys-lru``,
    ``volatile-ttl``, ...) would let one owner's volume evict another's responses.
    """

    backend_type: Literal["memory", "redis"] = "memory"
    prefix: Annotated[str, Meta(min_length=1)] = "vsr:responses:"
    ttl_seconds: Annotated[int, Meta(ge=60)] = 7 * 86_400      # redis only
    max_entries: Annotated[int, Meta(ge=1)] = 10_000           # memory only
    # Memory only: one owner's (tenant, else key: Identity.owner) share of max_entries, its least recently used
    # evicted first; unset: all of it. Either way the overflow of max_entries is taken from the owner holding the
    # most first, so one owner's traffic never evicts a smaller owner's responses.
    max_entries_per_owner: Annotated[int, Meta(ge=1)] | None = None


class VectorStore(RedisAt):
    """``global.stores.vector_store``: the in-memory vector store a ``context`` RAG source reads (spec 5.7).

    Documents are cut into chunks, each kept with its embedding and in a BM25
    index. ``files`` are ingested at start; ``POST /api/v1/context/documents``
    adds more. ``memory`` keeps one router's chunks; ``redis`` keeps them in
    Redis, and every router sharing it reads them into its local index.
    """

    backend_type: Literal["memory", "redis"] = "memory"
    prefix: Annotated[str, Meta(min_length=1)] = "vsr:vectors:"
    files: list[Annotated[str, Meta(min_length=1)]] = []
    chunk_chars: Annotated[int, Meta(ge=100, le=20_000)] = 800       # a chunk's length, cut at a paragraph or line
    max_chunks: Annotated[int, Meta(ge=1, le=1_000_000)] = 100_000
    embedding: EmbeddingRef | None = None


class MemoryStore(RedisAt):
    """``global.stores.memory``: each user's memories (spec 5.7), never read for another user."""

    backend_type: Literal["memory", "redis"] = "memory"
    prefix: Annotated[str, Meta(min_length=1)] = "vsr:memory:"
    # A memory source's recall bounds when its match block writes none (spec 5.4).
    default_retrieval_limit: Annotated[int, Meta(ge=1, le=1_000)] = 5
    default_similarity_threshold: Annotated[float, Meta(ge=-1, le=1)] = 0.7
    max_memories_per_user: Annotated[int, Meta(ge=1, le=100_000)] = 1_000    # the oldest leave first
    ttl_seconds: Annotated[int, Meta(ge=60)] | None = None          # redis: a user's memories expire unused
    embedding: EmbeddingRef | None = None


class Stores(Block):
    """``global.stores``."""

    event_stream: EventStreamStore = EventStreamStore()
    response_cache: ResponseCacheStore = ResponseCacheStore()
    responses: ResponsesStore = ResponsesStore()
    vector_store: VectorStore = VectorStore()
    memory: MemoryStore = MemoryStore()


__all__ = ["DEFAULT_REDIS_URL", "EventStreamStore", "MemoryStore", "ResponseCacheStore", "ResponsesStore", "Stores",
           "VectorStore", "default_events_dir"]
