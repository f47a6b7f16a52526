"""What the upstream client reads of a backend, and for how long: the response cap (a whole body,
each event of a stream) and the idle timeout of a body; a connection given up is never reused."""

from __future__ import annotations

import asyncio

import pytest

from apps.gateway.adapters.http_pool import BodyTimedOut, HttpPool, Target
from apps.gateway.adapters.http_upstream import HttpUpstream
from apps.gateway.pipeline.ports import UpstreamUnavailable
from tests.gateway.adapters.test_http_pool import ScriptedServer, _json


def _sse(*events: bytes) -> list[bytes]:
    body = b"".join(events)
    return [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)]


async def _post(upstream: HttpUpstream, url: str, timeout: float = 5.0):  # noqa: ANN202 - the client's reply
    return await upstream.request("POST", url, [("content-type", "application/json")], b"{}", timeout,
                                  allow_private=True)


async def test_a_body_over_the_cap_fails_naming_the_cap_and_its_connection_is_dropped() -> None:
    async with ScriptedServer(lambda request: _json(b'"' + b"x" * 200 + b'"')) as server:
        upstream = HttpUpstream(max_response_bytes=100)
        reply = await _post(upstream, server.url)
        with pytest.raises(UpstreamUnavailable, match="over 100 bytes, the gateway's limit"):
            await reply.read()
        with pytest.raises(UpstreamUnavailable):
            await (await _post(upstream, server.url)).read()
        assert server.connections == 2  # the refused body's connection was not pooled
        upstream.close()


async def test_a_body_within_the_cap_is_read_and_its_connection_reused() -> None:
    async with ScriptedServer(lambda request: _json(b'"' + b"x" * 98 + b'"')) as server:
        upstream = HttpUpstream(max_response_bytes=100)
        for _ in range(2):
            assert len(await (await _post(upstream, server.url)).read()) == 100
        assert server.connections == 1
        upstream.close()


async def test_the_cap_bounds_each_event_of_a_stream_not_the_stream() -> None:
    small = b"data: " + b"y" * 60 + b"\n\n"
    async with ScriptedServer(lambda request: _sse(small, small, small)) as server:
        upstream = HttpUpstream(max_response_bytes=100)
        events = [event async for event in (await _post(upstream, server.url)).events()]
        assert len(events) == 3  # 180 bytes in all, each event under 100
        upstream.close()
    big = b"data: " + b"z" * 150 + b"\n\n"
    async with ScriptedServer(lambda request: _sse(small, big)) as server:
        upstream = HttpUpstream(max_response_bytes=100)
        with pytest.raises(UpstreamUnavailable, match="an event over 100 bytes, the gateway's limit"):
            async for _ in (await _post(upstream, server.url)).events():
                pass
        second = await _post(upstream, server.url)
        second.close()
        assert server.connections == 2  # the stream's connection was dropped, not pooled
        upstream.close()


def _stalling(request: bytes) -> list[bytes]:
    """A head announcing 10 bytes, 5 of them, then silence (the test gives up first)."""
    return [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n12345"]


async def test_a_body_that_stops_coming_times_out_after_the_idle_timeout_and_the_connection_is_closed() -> None:
    async with ScriptedServer(_stalling) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        response = await pool.request("POST", "/mcp", [], b"{}", timeout=5, idle_timeout=0.2)
        with pytest.raises(BodyTimedOut, match=r"timed out after 0.2 s"):
            await response.read()
        with pytest.raises(BodyTimedOut):
            await (await pool.request("POST", "/mcp", [], b"{}", timeout=5, idle_timeout=0.2)).read()
        assert server.connections == 2
        pool.close()


async def test_posts_get_the_idle_timeout_and_get_streams_do_not() -> None:
    async with ScriptedServer(_stalling) as server:
        upstream = HttpUpstream()
        with pytest.raises(UpstreamUnavailable, match=r"timed out after 0.2 s"):
            await (await _post(upstream, server.url, timeout=0.2)).read()
        stream = await upstream.request("GET", server.url, [], b"", 0.2, allow_private=True)
        reading = asyncio.ensure_future(stream.read())
        await asyncio.sleep(0.5)
        assert not reading.done()  # a GET stream may stay silent as long as the backend likes
        reading.cancel()
        upstream.close()


async def test_a_listen_stream_gets_no_idle_timeout() -> None:
    """The answer to `subscriptions/listen` carries only what the backend announces, maybe hours
    apart: the gateway's own listen stream must not be given up after the backend's timeout."""
    async with ScriptedServer(_stalling) as server:
        upstream = HttpUpstream()
        headers = [("content-type", "application/json"), ("mcp-method", "subscriptions/listen")]
        stream = await upstream.request("POST", server.url, headers, b"{}", 0.2, allow_private=True)
        reading = asyncio.ensure_future(stream.read())
        await asyncio.sleep(0.5)
        assert not reading.done()
        reading.cancel()
        upstream.close()
