"""answers.EventCheck, sans I/O: a backend's event stream cut anywhere is judged event by event, and the bytes
before a bad event are released whole."""
from __future__ import annotations

from vsr_fast.errors import UpstreamInvalid
from vsr_fast.upstream.answers import EventCheck

CHUNK = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
DONE = b"data: [DONE]\n\n"
TYPED = b'event: ping\r\ndata: {"type":"ping"}\r\n\r\n'
STOP = b'event: message_stop\r\ndata: {"type":"message_stop"}\r\n\r\n'


def test_a_good_stream_cut_at_every_byte_passes_whole():
    stream = b": keep-alive\n\n" + CHUNK * 3 + b"retry: 1000\n\n" + DONE
    check = EventCheck("openai", "b")
    passed = sum(check.feed(stream[i:i + 1]) for i in range(len(stream)))
    assert passed == len(stream) and check.close() is None
    assert check.events == 4


def test_crlf_events_of_a_typed_protocol_pass():
    check = EventCheck("anthropic", "b")
    assert check.feed(TYPED * 2 + STOP) == len(TYPED) * 2 + len(STOP) and check.close() is None
    assert check.events == 3


def test_only_the_bytes_before_a_bad_event_pass():
    check = EventCheck("openai", "b")
    chunk = CHUNK * 2 + b"data: {not json\n\n" + CHUNK
    assert check.feed(chunk) == len(CHUNK) * 2
    assert isinstance(check.failure, UpstreamInvalid) and "not a JSON event" in check.failure.message
    assert b"not json" not in check.failure.message.encode()     # the backend's bytes stay in the log


def test_a_line_that_is_no_field_a_typeless_event_and_done_on_messages_are_refused():
    for api_format, chunk in (("openai", b'{"choices": []}\n\n'), ("anthropic", b'data: {"index": 0}\n\n'),
                              ("anthropic", DONE), ("responses", CHUNK)):
        check = EventCheck(api_format, "b")
        assert check.feed(chunk) == 0 and check.failure is not None, (api_format, chunk)


def test_a_stream_that_ends_mid_event_or_without_one_is_refused_at_close():
    check = EventCheck("openai", "b")
    assert check.feed(CHUNK + CHUNK[:20]) == len(CHUNK) + 20      # the unfinished event waits for its end
    assert check.close() is not None
    empty = EventCheck("openai", "b")
    empty.feed(b": only a comment\n\n")
    assert "without an event" in empty.close().message


def test_an_event_without_its_blank_line_at_the_end_is_taken():
    check = EventCheck("openai", "b")
    check.feed(CHUNK + b"data: [DONE]\n")
    assert check.close() is None and check.events == 2


def test_large_events_in_many_reads_and_a_boundary_across_two_reads():
    # A 1 MiB event arriving in 64 KiB reads (kept growing, searched only where a boundary can newly be),
    # then events whose blank line is split between two reads, CRLF and LF alike.
    big = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"' + b"B" * (1 << 20) + b'"}}]}\n\n'
    check = EventCheck("openai", "b")
    stream = big * 2 + CHUNK
    passed = sum(check.feed(stream[i:i + (64 << 10)]) for i in range(0, len(stream), 64 << 10))
    assert passed == len(stream) and check.events == 3
    typed = EventCheck("anthropic", "b")
    cut = len(TYPED) - 2              # between the two CRLFs that end the event
    assert typed.feed(TYPED[:cut]) + typed.feed(TYPED[cut:] + TYPED[:cut - 1]) == 2 * cut - 1 + 2
    assert typed.events == 1 and typed.failure is None
    assert typed.feed(TYPED[cut - 1:]) == len(TYPED) - cut + 1 and typed.events == 2
    assert typed.feed(STOP) == len(STOP) and typed.close() is None


def test_a_read_of_whole_lf_events_is_judged_as_by_the_boundary_search():
    # Whole LF events in one read take a split-based path; a read that continues a carried byte takes the
    # boundary search over the same bytes. Both must agree on what passes, the events counted and the verdict.
    typed_lf = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    streams = [
        ("openai", CHUNK * 3 + DONE),
        ("openai", b": keep-alive\n\n" + CHUNK + b"id: 7\nretry: 10\n\n" + DONE),
        ("openai", CHUNK + b"data: {not json\n\n" + CHUNK),
        ("openai", CHUNK + b"data: {\"a\":\ndata: 1}\n\n" + DONE),          # one event of two data lines
        ("openai", CHUNK + b"bogus: x\n\n" + CHUNK),
        ("openai", CHUNK + b"\n\n\n" + CHUNK),                                 # extra blank lines
        ("openai", CHUNK + b"data:" + CHUNK[6:]),                              # no space after the colon
        ("openai", CHUNK + CHUNK[:30]),                                        # ends mid-event
        ("anthropic", typed_lf * 2),                                           # the second after the end
        ("openai", CHUNK + DONE + CHUNK + DONE),
        ("anthropic", typed_lf + CHUNK),                                       # a typeless event on Messages
        ("anthropic", typed_lf + DONE),
    ]
    verdicts = set()
    for api_format, stream in streams:
        split, searched = EventCheck(api_format, "b"), EventCheck(api_format, "b")
        passed = split.feed(stream)
        assert passed == searched.feed(stream[:1]) + searched.feed(stream[1:]), (api_format, stream)
        assert split.events == searched.events, (api_format, stream)
        verdict = split.failure is None and split.close() is None
        assert verdict == (searched.failure is None and searched.close() is None), (api_format, stream)
        verdicts.add((verdict, passed == len(stream)))
    # good, cut short at close, bad mid-read, good with what follows its terminator held back
    assert verdicts == {(True, True), (False, True), (False, False), (True, False)}


def test_nothing_after_the_terminator_passes():
    for api_format, stream, end in (("openai", CHUNK, DONE), ("anthropic", TYPED, STOP),
                                    ("responses", b'data: {"type":"response.created"}\n\n',
                                     b'data: {"type":"response.completed"}\n\n')):
        after = stream + b"data: {not json\n\n" + end
        whole = stream + end
        for reads in ([whole + after], [whole[:-1], whole[-1:] + after], [stream, end[:3], end[3:] + after]):
            check = EventCheck(api_format, "b")
            passed = [check.feed(chunk) for chunk in reads]
            assert sum(passed) == len(whole) and check.done and check.failure is None, (api_format, reads)
            assert check.close() is None


def test_a_stream_whose_body_ends_cleanly_before_its_terminator_is_refused_at_close():
    ping = b'event: ping\ndata: {"type":"ping"}\n\n'
    created = b'event: response.created\ndata: {"type":"response.created"}\n\n'
    for api_format, stream, terminator in (("openai", CHUNK * 2, "no data: [DONE]"),
                                           ("anthropic", ping, "no message_stop"),
                                           ("responses", created, "no response.completed")):
        check = EventCheck(api_format, "b")
        assert check.feed(stream) == len(stream) and check.failure is None    # every event passes as it comes
        failure = check.close()
        assert isinstance(failure, UpstreamInvalid), api_format
        assert "ended its event stream before the answer did" in failure.message and terminator in failure.message


def test_an_error_event_of_the_backend_ends_its_answer():
    for api_format, stream in (("openai", CHUNK + b'data: {"error":{"message":"overloaded"}}\n\n'),
                               ("anthropic", b'event: error\ndata: {"type":"error","error":{"type":"x"}}\n\n'),
                               ("responses", b'event: response.failed\ndata: {"type":"response.failed"}\n\n')):
        check = EventCheck(api_format, "b")
        assert check.feed(stream) == len(stream) and check.close() is None, api_format


def test_a_chat_stream_whose_every_choice_finished_has_ended_without_done():
    """Some OpenAI-compatible servers leave out [DONE]: the answer is whole once each choice has its finish_reason."""
    def chunk(index: int, finish: str | None) -> bytes:
        reason = "null" if finish is None else f'"{finish}"'
        return (b'data: {"choices":[{"index":%d,"delta":{"content":"x"},"finish_reason":%s}]}\n\n'
                % (index, reason.encode()))

    for stream, whole in ((chunk(0, None) + chunk(0, "stop"), True),
                          (chunk(0, None) + chunk(1, None) + chunk(0, "stop") + chunk(1, "length"), True),
                          (chunk(0, None) + chunk(1, None) + chunk(0, "stop"), False),     # choice 1 cut short
                          (chunk(0, None), False)):
        check = EventCheck("openai", "b")
        assert check.feed(stream) == len(stream)
        assert (check.close() is None) is whole, stream


def _chat_chunk(delta: str, logprobs: str = "null", finish: str = "null") -> bytes:
    return (b'data: {"choices":[{"index":0,"delta":%s,"logprobs":%s,"finish_reason":%s}]}\n\n'
            % (delta.encode(), logprobs.encode(), finish.encode()))


def test_a_chat_chunk_that_only_opens_the_answer_is_not_the_answer():
    """LiteLLM's is_pre_first_chunk: a role with empty content (or none) opens the answer; an error after it is
    still one before the answer. A chunk with any text, a tool call, a refusal, logprobs or a finish is the
    answer."""
    opening = ['{"role":"assistant","content":""}', '{"role":"assistant"}', '{"role":"assistant","content":null}',
               '{"role":"assistant","content":"","tool_calls":[]}', '{}']
    for delta in opening:
        check = EventCheck("openai", "b")
        check.feed(_chat_chunk(delta, '{"content":[]}'))
        assert not check.answering, delta
    answer = [_chat_chunk('{"role":"assistant","content":"Hi"}'),
              _chat_chunk('{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"c"}]}'),
              _chat_chunk('{"role":"assistant","refusal":"no"}'),
              _chat_chunk('{"role":"assistant","reasoning_content":"hm"}'),
              _chat_chunk('{"role":"assistant","content":""}', '{"content":[{"token":"a","logprob":0}]}'),
              _chat_chunk('{"role":"assistant","content":""}', finish='"stop"'),
              b'data: {"choices":[]}\n\n']
    for chunk in answer:
        check = EventCheck("openai", "b")
        check.feed(chunk)
        assert check.answering, chunk
    check = EventCheck("openai", "b")
    check.feed(_chat_chunk('{"role":"assistant","content":""}') + b'data: {"error":{"message":"x","code":503}}\n\n')
    assert check.erred == "error" and not check.answering
