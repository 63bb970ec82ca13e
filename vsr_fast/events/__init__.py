"""The event stream: routing events, the writer that appends them, and the consumers they drive.

The request path: ``RequestEvents`` (one per request) over the ``EventSink``
that ``open_event_stream`` / ``open_event_services`` yield. The consumers:
``ReplayRecorder``, ``CacheWriter``, ``ShadowDispatcher``, run by
``run_consumer``. The records: ``ReplayRecords.get_record`` / ``list_records``.
"""
from .cache_writer import CacheWriter as CacheWriter
from .capture import AnswerCapture as AnswerCapture
from .capture import answer_facts as answer_facts
from .capture import request_copy as request_copy
from .consumers import Acks as Acks
from .consumers import Consumer as Consumer
from .consumers import ConsumerStats as ConsumerStats
from .consumers import run_consumer as run_consumer
from .embedded import EmbeddedLog as EmbeddedLog
from .recorder import ReplayRecorder as ReplayRecorder
from .records import ReplayRecords as ReplayRecords
from .redis_stream import RedisSource as RedisSource
from .redis_stream import RedisTransport as RedisTransport
from .request import RequestEvents as RequestEvents
from .service import EventServices as EventServices
from .service import EventStream as EventStream
from .service import open_event_services as open_event_services
from .service import open_event_stream as open_event_stream
from .service import open_records as open_records
from .shadow import ShadowDispatcher as ShadowDispatcher
from .source import Entry as Entry
from .source import StoreUnavailable as StoreUnavailable
from .source import StreamSource as StreamSource
from .types import AnswerCompleted as AnswerCompleted
from .types import CacheHit as CacheHit
from .types import CacheIntent as CacheIntent
from .types import CacheWritten as CacheWritten
from .types import DecisionChosen as DecisionChosen
from .types import ErrorRaised as ErrorRaised
from .types import Event as Event
from .types import RequestReceived as RequestReceived
from .types import ShadowAnswered as ShadowAnswered
from .types import SignalsEvaluated as SignalsEvaluated
from .types import UpstreamAttempted as UpstreamAttempted
from .types import Usage as Usage
from .types import decode_event as decode_event
from .types import encode_event as encode_event
from .types import new_replay_id as new_replay_id
from .writer import EventSink as EventSink
from .writer import TransportDown as TransportDown

__all__ = [
    "Acks", "AnswerCapture", "AnswerCompleted", "CacheHit", "CacheIntent", "CacheWriter", "CacheWritten", "Consumer",
    "ConsumerStats", "DecisionChosen", "EmbeddedLog", "Entry", "ErrorRaised", "Event", "EventServices", "EventSink",
    "EventStream", "RedisSource", "RedisTransport", "ReplayRecorder", "ReplayRecords", "RequestEvents",
    "RequestReceived", "ShadowAnswered", "ShadowDispatcher", "SignalsEvaluated", "StoreUnavailable", "StreamSource",
    "TransportDown", "UpstreamAttempted", "Usage", "answer_facts", "decode_event", "encode_event", "new_replay_id",
    "open_event_services", "open_event_stream", "open_records", "request_copy", "run_consumer",
]
