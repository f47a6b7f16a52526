import pytest

from apps.gateway.protocol.sse import EventTooLarge, SseEvent, SseParser, encode_event


def test_parser_handles_split_chunks_crlf_comments_and_multiline_data() -> None:
    parser = SseParser()
    stream = b": keep-alive\r\nid: 7\r\nretry: 1000\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\nevent: message\ndata: x\n\n"
    events = []
    for i in range(0, len(stream), 5):
        events.extend(parser.feed(stream[i : i + 5]))
    assert events == [SseEvent(b'{"a":\n1}', "message", "7", 1000), SseEvent(b"x", "message", None, None)]


def test_priming_event_with_empty_data_survives_a_round_trip() -> None:
    priming = SseEvent(b"", "message", "stream-1:0", 500)
    encoded = encode_event(priming)
    assert SseParser().feed(encoded) == [priming]


def test_encode_is_what_parse_reads() -> None:
    for event in [SseEvent(b'{"jsonrpc":"2.0"}'), SseEvent(b"a\nb", "custom", "id-1")]:
        assert SseParser().feed(encode_event(event)) == [event]


def test_lone_cr_line_endings_and_a_crlf_split_across_chunks() -> None:
    parser = SseParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n\r\n") == [SseEvent(b"a")]
    assert parser.feed(b"data: b\r\rdata: c\n\n") == [SseEvent(b"b"), SseEvent(b"c")]


def test_an_endless_line_is_refused() -> None:
    import pytest

    parser = SseParser()
    with pytest.raises(ValueError):
        for _ in range(20):
            parser.feed(b"x" * (1024 * 1024))


def test_events_up_to_the_cap_pass_however_many_arrive_in_one_chunk() -> None:
    parser = SseParser(max_event=10)
    chunk = b"".join(encode_event(SseEvent(b"0123456789")) for _ in range(50))
    assert parser.feed(chunk) == [SseEvent(b"0123456789")] * 50


def test_an_event_over_the_cap_is_refused_whether_in_one_line_or_many() -> None:
    with pytest.raises(EventTooLarge, match="an event over 10 bytes, the gateway's limit"):
        SseParser(max_event=10).feed(b"data: 01234\ndata: 56789\n")  # 11 bytes with the line break
    with pytest.raises(EventTooLarge):
        SseParser(max_event=10).feed(b"data: 0123456789abc")  # an unfinished line already too long
