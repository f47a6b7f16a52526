"""The upstream HTTP/1.1 client against a scripted server on loopback: framing and connection reuse."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from apps.gateway.adapters.http_pool import BodyTooLarge, HttpPool, Target, UpstreamHttpError

Script = Callable[[bytes], list[bytes]]  # request bytes -> what to send back ("CLOSE" closes)


class ScriptedServer:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> ScriptedServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/mcp"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = head + await reader.readexactly(length)
                for part in self.script(request):
                    if part == b"CLOSE":
                        writer.close()
                        return
                    writer.write(part)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            # Cancelled: the test's event loop ends while a pooled client connection is still open
            # (re-raised, asyncio would log the handler's cancellation as an error).
            writer.close()


def _json(body: bytes) -> list[bytes]:
    return [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)]


async def _get(pool: HttpPool, body: bytes = b"{}") -> tuple[int, bytes]:
    response = await pool.request("POST", "/mcp", [("content-type", "application/json")], body, timeout=5)
    return response.status, await response.read()


async def test_keep_alive_connections_are_reused() -> None:
    async with ScriptedServer(lambda request: _json(b'{"ok":true}')) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        for _ in range(5):
            assert await _get(pool) == (200, b'{"ok":true}')
        assert server.connections == 1
        pool.close()


async def test_chunked_bodies_with_extensions_and_trailers() -> None:
    chunked = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n",
               b"5;ext=1\r\nhello\r\n", b"6\r\n world\r\n", b"0\r\nX-Trailer: t\r\n\r\n"]
    async with ScriptedServer(lambda request: chunked) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        assert await _get(pool) == (200, b"hello world")
        assert await _get(pool) == (200, b"hello world")
        assert server.connections == 1
        pool.close()


async def test_a_body_that_ends_with_the_connection() -> None:
    async with ScriptedServer(lambda request: [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\":1}", b"CLOSE"]) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        assert await _get(pool) == (200, b'{"a":1}')
        assert await _get(pool) == (200, b'{"a":1}')
        assert server.connections == 2  # not reusable: the body was delimited by closing
        pool.close()


async def test_an_idle_connection_the_server_closed_is_not_reused() -> None:
    served: list[int] = []

    def script(request: bytes) -> list[bytes]:
        served.append(1)
        return [*_json(b"{}"), b"CLOSE"] if len(served) == 1 else _json(b"{}")

    async with ScriptedServer(script) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        response = await pool.request("POST", "/mcp", [], b"{}", timeout=5)
        # The server said nothing about closing, so the connection went back to the pool...
        await response.read()
        await asyncio.sleep(0.05)
        assert await _get(pool) == (200, b"{}")  # ...but its close was noticed before reuse
        assert len(served) == 2 and server.connections == 2
        pool.close()


async def test_truncated_and_malformed_responses_are_errors() -> None:
    async with ScriptedServer(lambda request: [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", b"CLOSE"]) as server:
        with pytest.raises(UpstreamHttpError, match="mid-body"):
            await _get(HttpPool(Target.from_url(server.url), allow_private=True))
    async with ScriptedServer(lambda request: [b"SPDY/9 what\r\n\r\n"]) as server:
        with pytest.raises(UpstreamHttpError, match="malformed"):
            await _get(HttpPool(Target.from_url(server.url), allow_private=True))


async def test_nothing_listening_is_an_upstream_error() -> None:
    async with ScriptedServer(lambda request: []) as server:
        url = server.url
    with pytest.raises(UpstreamHttpError, match="cannot connect"):
        await _get(HttpPool(Target.from_url(url), allow_private=True))


async def test_a_slow_answer_times_out() -> None:
    async with ScriptedServer(lambda request: []) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        with pytest.raises(TimeoutError):
            await pool.request("POST", "/mcp", [], b"{}", timeout=0.1)


async def test_header_values_cannot_add_lines() -> None:
    async with ScriptedServer(lambda request: _json(b"{}")) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        with pytest.raises(UpstreamHttpError, match="line break"):
            await pool.request("POST", "/mcp", [("mcp-name", "x\r\nX-Admin: yes")], b"{}", timeout=5)


async def test_a_request_is_never_sent_twice() -> None:
    """The backend read the request and dropped the connection: nobody knows whether it acted, so
    the client reports the failure instead of repeating a possibly non-idempotent call."""
    served: list[bytes] = []

    def script(request: bytes) -> list[bytes]:
        served.append(request)
        return _json(b"{}") if len(served) == 1 else [b"CLOSE"]

    async with ScriptedServer(script) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        assert await _get(pool) == (200, b"{}")
        with pytest.raises(UpstreamHttpError, match="without answering"):
            await _get(pool, b'{"method":"tools/call"}')
        assert len(served) == 2


async def test_interim_responses_are_skipped() -> None:
    early = [b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n", *_json(b'{"final":1}')]
    async with ScriptedServer(lambda request: early) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        assert await _get(pool) == (200, b'{"final":1}')
        assert await _get(pool) == (200, b'{"final":1}')


async def test_content_length_repeated_or_invalid() -> None:
    twice = [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}"]
    async with ScriptedServer(lambda request: twice) as server:
        assert await _get(HttpPool(Target.from_url(server.url), allow_private=True)) == (200, b"{}")
    bad = [b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\n{}"]
    async with ScriptedServer(lambda request: bad) as server:
        with pytest.raises(UpstreamHttpError, match="Content-Length"):
            await _get(HttpPool(Target.from_url(server.url), allow_private=True))


async def test_bodies_over_the_limit_are_refused() -> None:
    async with ScriptedServer(lambda request: _json(b"x" * 1000)) as server:
        response = await HttpPool(Target.from_url(server.url), allow_private=True).request("POST", "/mcp", [], b"{}", timeout=5)
        with pytest.raises(UpstreamHttpError, match="over 100 bytes"):
            await response.read(limit=100)


def _first_then_json(first: list[bytes]) -> Script:
    """A script answering `first` to the first request and a small JSON body to the others."""
    served: list[bytes] = []

    def script(request: bytes) -> list[bytes]:
        served.append(request)
        return first if len(served) == 1 else _json(b"{}")

    return script


async def test_a_content_length_over_the_limit_is_refused_before_reading() -> None:
    # The head announces a gigabyte and no body follows: the refusal cannot wait for the bytes.
    huge = [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"]
    async with ScriptedServer(_first_then_json(huge)) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        response = await pool.request("POST", "/mcp", [], b"{}", timeout=5)
        async with asyncio.timeout(2):
            with pytest.raises(BodyTooLarge, match="over 100 bytes"):
                await response.read(limit=100)
        assert await _get(pool) == (200, b"{}")  # on a fresh connection: the refused one was dropped
        assert server.connections == 2
        pool.close()


async def test_a_chunk_over_the_remaining_budget_is_refused_before_reading() -> None:
    # 60 bytes fit; the next chunk announces 1 MiB and never comes: refused on its size line.
    chunked = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"3c\r\n" + b"x" * 60 + b"\r\n",
               b"100000\r\n"]
    async with ScriptedServer(_first_then_json(chunked)) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        response = await pool.request("POST", "/mcp", [], b"{}", timeout=5)
        async with asyncio.timeout(2):
            with pytest.raises(BodyTooLarge, match="over 100 bytes"):
                await response.read(limit=100)
        assert await _get(pool) == (200, b"{}")
        assert server.connections == 2
        pool.close()


async def test_a_chunked_body_exactly_at_the_limit_is_read() -> None:
    chunked = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"3c\r\n" + b"x" * 60 + b"\r\n",
               b"28\r\n" + b"y" * 40 + b"\r\n", b"0\r\n\r\n"]
    async with ScriptedServer(lambda request: chunked) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        response = await pool.request("POST", "/mcp", [], b"{}", timeout=5)
        assert await response.read(limit=100) == b"x" * 60 + b"y" * 40
        assert await _get(pool) == (200, b"x" * 60 + b"y" * 40)
        assert server.connections == 1
        pool.close()


async def test_a_head_that_is_not_latin_1_is_an_upstream_error() -> None:
    async with ScriptedServer(lambda request: _json(b"{}")) as server:
        pool = HttpPool(Target.from_url(server.url), allow_private=True)
        with pytest.raises(UpstreamHttpError, match="ISO-8859-1"):
            await pool.request("GET", "/mcp", [("x-name", "日本")], timeout=5)
        assert server.connections == 0
