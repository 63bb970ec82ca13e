"""OpenAI Responses wire types (``POST /v1/responses``) and the response store.

Input items are one loose Struct (``Item``) rather than a tagged union: a
message item may leave out its ``type`` (the SDK's EasyInputMessage), which a
msgspec tag cannot express. Translation checks, per item type, the fields it
needs and names the path of a missing one. Content parts are a tagged union.

``previous_response_id`` is served by the Router itself: the store keeps, per
response it answered, the whole conversation as Responses input items (the
input, expanded, then the output), so a follow-up can reach any backend,
whatever protocol it speaks. ``ResponseStore`` is the seam; ``MemoryResponseStore``
is a bounded LRU, and a Redis one can keep the same records as bytes.
"""
from __future__ import annotations

import heapq
from collections import OrderedDict
from typing import Annotated, Any, Literal, Protocol

import msgspec
from msgspec import Meta, Struct

from .bounds import Count, PositiveCount


# --- request -------------------------------------------------------------------------


class InputText(Struct, tag="input_text", frozen=True):
    text: str


class InputImage(Struct, tag="input_image", frozen=True, omit_defaults=True):
    image_url: str | None = None
    file_id: str | None = None
    detail: str | None = None


class InputFile(Struct, tag="input_file", frozen=True, omit_defaults=True):
    file_id: str | None = None
    file_data: str | None = None
    file_url: str | None = None
    filename: str | None = None


class OutputText(Struct, tag="output_text", frozen=True):
    text: str
    annotations: list[Any] = msgspec.field(default_factory=list)


class Refusal(Struct, tag="refusal", frozen=True):
    refusal: str


class ReasoningText(Struct, tag="reasoning_text", frozen=True):
    text: str


class SummaryText(Struct, tag="summary_text", frozen=True):
    text: str


Part = InputText | InputImage | InputFile | OutputText | Refusal | ReasoningText | SummaryText
OutputPart = InputText | InputImage | InputFile


class Tool(Struct, frozen=True, omit_defaults=True):
    """A function tool, a freeform ``custom`` tool (its input one string, its ``format`` text or a
    grammar), a ``namespace`` of function and custom tools (Codex), or a hosted tool
    (web_search, image_generation, ...) kept by type."""

    type: str
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    size: str | None = None
    quality: str | None = None
    format: dict[str, Any] | None = None          # custom
    tools: "list[Tool] | None" = None              # namespace


class Item(Struct, frozen=True, omit_defaults=True):
    """One input item: a message (``type`` may be absent), a function_call or custom_tool_call
    (either may name its ``namespace``), their outputs, an ``additional_tools`` item (tools
    declared at that point of the conversation: Codex), or another item type (kept, and
    reported as a loss when translated)."""

    type: str = "message"
    role: Literal["user", "assistant", "system", "developer"] | None = None
    content: str | list[Part] | None = None
    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    namespace: str | None = None
    arguments: str | None = None
    input: str | None = None                        # custom_tool_call
    output: str | list[OutputPart] | None = None
    status: str | None = None
    result: str | None = None
    tools: list[Tool] | None = None                 # additional_tools
    summary: list[SummaryText] | None = None        # reasoning
    encrypted_content: str | None = None            # reasoning


class ResponsesRequest(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """A Responses request. Strict like OpenAI's API: a top-level field it does not define
    is a 400 ``unknown_parameter`` (a body with ``messages`` instead of ``input`` is refused,
    not forwarded). The fields routing and translation do not read are typed loosely."""

    model: str = ""
    input: str | list[Item] = ""
    instructions: str | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: PositiveCount | None = None
    temperature: Annotated[float, Meta(ge=0, le=2)] | None = None     # OpenAI's ranges
    top_p: Annotated[float, Meta(ge=0, le=1)] | None = None
    stream: bool = False
    previous_response_id: str | None = None
    store: bool | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    text: dict[str, Any] | None = None
    reasoning: dict[str, Any] | None = None     # its effort one of chat.EFFORTS: ResponsesAdapter.decode
    truncation: Literal["auto", "disabled"] | None = None
    # Read by no one here; declared so that they are known: the create parameters of the
    # openai SDK this package is tested with, and Codex's client_metadata.
    access_programs: Any = None
    background: bool | None = None
    background_options: Any = None
    image: Any = None
    moderation: Any = None
    prompt_cache_options: Any = None
    conversation: Any = None
    include: list[str] | None = None
    max_tool_calls: Count | None = None
    prompt: Any = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    safety_identifier: str | None = None
    service_tier: str | None = None
    stream_options: dict[str, Any] | None = None
    top_logprobs: Annotated[int, Meta(ge=0, le=20)] | None = None
    context_management: Any = None
    client_metadata: dict[str, Any] | None = None

    def items(self) -> list[Item]:
        """The input as items: a string input is one user message."""
        if isinstance(self.input, str):
            return [Item(role="user", content=self.input)]
        return self.input


class InputTokensRequest(Struct, frozen=True, forbid_unknown_fields=True):
    """``POST /v1/responses/input_tokens``: the parameters OpenAI defines, strict as a create request is; the
    count reads the conversation (as ``ResponsesRequest``), the rest is checked here only."""

    model: str | None = None
    input: str | list[Item] | None = None
    instructions: str | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    previous_response_id: str | None = None
    conversation: Any = None
    personality: str | None = None
    reasoning: dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    truncation: Literal["auto", "disabled"] | None = None


# --- response ----------------------------------------------------------------------------


# A backend's usage: a count an OpenAI-compatible server leaves null is read as 0, not as a broken answer.
class InputTokensDetails(Struct, frozen=True):
    cached_tokens: int | None = 0
    cache_write_tokens: int | None = 0


class OutputTokensDetails(Struct, frozen=True):
    reasoning_tokens: int | None = 0


class Usage(Struct, frozen=True):
    input_tokens: int | None = 0
    output_tokens: int | None = 0
    total_tokens: int | None = 0
    # Null from some OpenAI-compatible servers (vLLM among them): read as absent, not as a broken answer.
    input_tokens_details: InputTokensDetails | None = None
    output_tokens_details: OutputTokensDetails | None = None


class OutPart(Struct, frozen=True):
    """An output message's content part, any type."""

    type: str
    text: str | None = None
    refusal: str | None = None
    logprobs: list[Any] | None = None   # output_text's token logprobs (include message.output_text.logprobs)


class OutItem(Struct, frozen=True):
    """An output item, any type: the fields of the types we translate, all optional."""

    type: str
    id: str | None = None
    role: str | None = None
    status: str | None = None
    content: list[OutPart] | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    result: str | None = None
    summary: list[OutPart] | None = None     # reasoning
    encrypted_content: str | None = None     # reasoning, asked for by include reasoning.encrypted_content


class IncompleteDetails(Struct, frozen=True):
    reason: str | None = None


class ResponseError(Struct, frozen=True):
    code: str | None = None
    message: str = ""
    type: str | None = None     # an error event's, nested as the live API sends it


class Response(Struct, frozen=True):
    """A response object as a backend sends it; ``output`` items loose."""

    id: str
    output: list[OutItem] = msgspec.field(default_factory=list)
    model: str | None = ""
    status: str | None = None
    created_at: float | None = 0
    usage: Usage | None = None
    incomplete_details: IncompleteDetails | None = None
    error: ResponseError | None = None


class Event(Struct, frozen=True):
    """One stream event, any type: the fields of the events we translate, all optional."""

    type: str
    sequence_number: int = 0
    response: Response | None = None
    item: OutItem | None = None
    output_index: int = 0
    content_index: int = 0
    summary_index: int = 0                 # a reasoning summary part's, in its reasoning_summary_* events
    item_id: str | None = None
    delta: str | None = None
    text: str | None = None
    arguments: str | None = None
    part: OutPart | None = None
    logprobs: list[Any] | None = None    # output_text.delta's
    code: str | None = None
    message: str | None = None
    error: ResponseError | None = None     # an error event's fields, as the live API nests them


class Remembered(Struct, frozen=True):
    """What remembering needs of an answer: its id, and its output items as raw JSON."""

    id: str
    output: list[msgspec.Raw] = msgspec.field(default_factory=list)
    model: str = ""


# --- the response store ------------------------------------------------------------------------


class StoredResponse(Struct, frozen=True):
    """One answered response: its whole conversation as a JSON array of input items, and whose it is.

    ``owner``: ``Identity.owner`` of the caller it answered; only a caller of the same owner continues it, any
    other is told the id is unknown. A record stored before owners were kept decodes with None: only an
    anonymous caller (a router without identity, as the one that stored it then) continues it; behind keys it
    reads as evicted, and its thread starts over. Rejected: letting anyone read an ownerless record, which
    would keep every pre-upgrade thread readable by every tenant for the store's TTL.
    """

    id: str
    items: msgspec.Raw
    model: str = ""
    owner: str | None = None
    # The response object as the client got it, for ``GET /v1/responses/{id}``; null in a record stored before it
    # was kept, which then reads as not found there (and still continues).
    response: msgspec.Raw = msgspec.Raw(b"null")

    def size(self) -> int:
        return len(self.items) + len(self.response)


class ResponseStore(Protocol):
    """Where ``previous_response_id`` is looked up; async so a networked store fits."""

    async def get(self, response_id: str) -> StoredResponse | None:
        """The stored response, or None if it is unknown or was evicted."""
        ...

    async def put(self, record: StoredResponse) -> None:
        """Keep a response for later turns."""
        ...

    async def delete(self, response_id: str) -> None:
        """Forget a response: its id is unknown from then on."""
        ...


class MemoryResponseStore:
    """An in-process store, bounded fairly between owners (``StoredResponse.owner``): at most
    ``max_entries_per_owner`` responses per owner (its least recently used leave first), and at most
    ``max_entries`` responses and ``max_bytes`` of items and response objects in all, the overflow taken from the
    owner holding the most (entries, or bytes) first. One owner's traffic so never evicts another's records while
    it holds more than they do: a tenant flooding ``POST /v1/responses`` evicts its own oldest threads.

    A conversation larger than ``max_bytes`` on its own is not kept (and evicts nothing): its follow-up
    gets ``previous_response_not_found``, as after any eviction. A put never replaces another owner's record:
    ids are the router's own (``ResponsesAdapter.remember``), so one that is taken is refused, not overwritten.

    Each put or eviction costs O(log owners): the largest owners are found through heaps, rebuilt when stale.
    Rejected: a TTL. The bound already caps memory, and an hour-old thread a user
    resumes is exactly what the store is for.
    """

    def __init__(self, max_entries: int = 10_000, max_bytes: int = 256 * 1024 * 1024,
                 max_entries_per_owner: int | None = None) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_entries_per_owner = max_entries_per_owner or max_entries
        self._records: dict[str, StoredResponse] = {}
        self._owners: dict[str | None, _Shelf] = {}
        self._most_entries = _Largest()
        self._most_bytes = _Largest()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._records)

    async def get(self, response_id: str) -> StoredResponse | None:
        record = self._records.get(response_id)
        if record is not None:
            self._owners[record.owner].ids.move_to_end(response_id)
        return record

    async def put(self, record: StoredResponse) -> None:
        old = self._records.get(record.id)
        if old is not None and old.owner != record.owner:
            return      # another owner's: never replaced (see the class)
        if record.size() > self.max_bytes:
            return
        self._remove(record.id)
        shelf = self._owners.get(record.owner)
        if shelf is None:
            shelf = self._owners[record.owner] = _Shelf()
        self._records[record.id] = record
        shelf.ids[record.id] = None
        shelf.bytes += record.size()
        self._bytes += record.size()
        while len(shelf.ids) > self.max_entries_per_owner:
            self._remove(next(iter(shelf.ids)))
        self._noted(record.owner)
        while len(self._records) > self.max_entries:
            self._evict_from(self._most_entries.top())
        while self._bytes > self.max_bytes:
            self._evict_from(self._most_bytes.top())

    async def delete(self, response_id: str) -> None:
        owner = self._remove(response_id)
        if owner is not _NONE:
            self._noted(owner)

    def _evict_from(self, owner: str | None) -> None:
        """The least recently used response of ``owner`` leaves."""
        self._remove(next(iter(self._owners[owner].ids)))
        self._noted(owner)

    def _remove(self, response_id: str) -> Any:
        """Forget one record; its owner, or ``_NONE`` when there was no such record."""
        record = self._records.pop(response_id, None)
        if record is None:
            return _NONE
        shelf = self._owners[record.owner]
        del shelf.ids[response_id]
        shelf.bytes -= record.size()
        self._bytes -= record.size()
        if not shelf.ids:
            del self._owners[record.owner]
            self._most_entries.forget(record.owner)
            self._most_bytes.forget(record.owner)
        return record.owner

    def _noted(self, owner: str | None) -> None:
        """The owner's current holdings, for the heaps that find the largest."""
        shelf = self._owners.get(owner)
        if shelf is not None:
            self._most_entries.push(owner, len(shelf.ids), len(self._owners))
            self._most_bytes.push(owner, shelf.bytes, len(self._owners))


_NONE = object()    # no record removed (None is an owner: the anonymous one)


class _Shelf:
    """One owner's responses, least recently used first, and their bytes."""

    __slots__ = ("ids", "bytes")

    def __init__(self) -> None:
        self.ids: OrderedDict[str, None] = OrderedDict()
        self.bytes = 0


class _Largest:
    """The owner holding the most of one measure: a max-heap of (measure, owner) entries, stale ones skipped.

    An owner's measure changes at every put and eviction; rather than update its entry in place, a new one is
    pushed, and an entry that is not the owner's latest (or of an owner that holds nothing now: ``forget``) is
    dropped when it reaches the top. The heap is
    rebuilt when stale entries outnumber the owners, so it stays O(owners) in size, O(log owners) per push.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, str | None]] = []
        self._latest: dict[str | None, int] = {}     # owner -> its latest entry's sequence number
        self._seq = 0

    def push(self, owner: str | None, measure: int, owners: int) -> None:
        self._seq += 1
        self._latest[owner] = self._seq
        heapq.heappush(self._heap, (-measure, self._seq, owner))
        if len(self._heap) > 2 * owners + 64:
            self._heap = [e for e in self._heap if self._latest.get(e[2]) == e[1]]
            heapq.heapify(self._heap)
            self._latest = {e[2]: e[1] for e in self._heap}

    def forget(self, owner: str | None) -> None:
        """The owner holds nothing now: its entries are stale."""
        self._latest.pop(owner, None)

    def top(self) -> str | None:
        """The owner with the largest measure (of those holding any)."""
        while True:
            _, seq, owner = self._heap[0]
            if self._latest.get(owner) == seq:
                return owner
            heapq.heappop(self._heap)


REQUEST_DECODER = msgspec.json.Decoder(ResponsesRequest)
INPUT_TOKENS_DECODER = msgspec.json.Decoder(InputTokensRequest)
ITEMS_DECODER = msgspec.json.Decoder(list[Item])
RESPONSE_DECODER = msgspec.json.Decoder(Response)
REMEMBERED_DECODER = msgspec.json.Decoder(Remembered)
EVENT_DECODER = msgspec.json.Decoder(Event)
ENCODER = msgspec.json.Encoder()
