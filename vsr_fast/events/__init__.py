"""The event stream: routing events, the writer that appends them, and the consumers they drive.

The request path: ``RequestEvents`` (one per request) over the ``EventSink``
that ``open_event_stream`` / ``open_event_services`` yield. The consumers:
``ReplayRecorder``, ``CacheWriter``, ``ShadowDispatcher``, run by
``run_consumer``. The records: ``ReplayRecords.get_record`` / ``list_records``.
"""
# Exports resolve on first use (PEP 562): the plugin modules import events.types
# and events.capture, and the consumers here import the plugins, so eager
# imports in this file would make a cycle out of any first import.
import importlib

_WHERE = {
    "CacheWriter": "cache_writer",
    "AnswerCapture": "capture",
    "answer_facts": "capture",
    "request_copy": "capture",
    "Acks": "consumers",
    "Consumer": "consumers",
    "ConsumerStats": "consumers",
    "run_consumer": "consumers",
    "EmbeddedLog": "embedded",
    "ReplayRecorder": "recorder",
    "ReplayRecords": "records",
    "RedisSource": "redis_stream",
    "RedisTransport": "redis_stream",
    "RequestEvents": "request",
    "EventServices": "service",
    "EventStream": "service",
    "open_event_services": "service",
    "open_event_stream": "service",
    "open_records": "service",
    "ShadowDispatcher": "shadow",
    "Entry": "source",
    "StoreUnavailable": "source",
    "StreamSource": "source",
    "AnswerCompleted": "types",
    "CacheHit": "types",
    "CacheIntent": "types",
    "CacheWritten": "types",
    "DecisionChosen": "types",
    "ErrorRaised": "types",
    "Event": "types",
    "RequestReceived": "types",
    "ShadowAnswered": "types",
    "SignalsEvaluated": "types",
    "UpstreamAttempted": "types",
    "Usage": "types",
    "decode_event": "types",
    "encode_event": "types",
    "new_replay_id": "types",
    "EventSink": "writer",
    "TransportDown": "writer",
}


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "Acks", "AnswerCapture", "AnswerCompleted", "CacheHit", "CacheIntent", "CacheWriter", "CacheWritten", "Consumer",
    "ConsumerStats", "DecisionChosen", "EmbeddedLog", "Entry", "ErrorRaised", "Event", "EventServices", "EventSink",
    "EventStream", "RedisSource", "RedisTransport", "ReplayRecorder", "ReplayRecords", "RequestEvents",
    "RequestReceived", "ShadowAnswered", "ShadowDispatcher", "SignalsEvaluated", "StoreUnavailable", "StreamSource",
    "TransportDown", "UpstreamAttempted", "Usage", "answer_facts", "decode_event", "encode_event", "new_replay_id",
    "open_event_services", "open_event_stream", "open_records", "request_copy", "run_consumer",
]
