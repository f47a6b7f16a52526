"""A small HTTP/1.1 client for the hot path: keep-alive connections pooled per origin, one write per
request, streaming response bodies (SSE). A general-purpose async client costs milliseconds of CPU
per request here; this one costs tens of microseconds, which is the gateway's whole budget."""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from apps.common.egress_headers import header_denied
from apps.common.http_syntax import bad_target_character, bad_value_character, is_token
from apps.common.netguard import AddressRefused, resolve_checked

log = logging.getLogger(__name__)

_MAX_HEAD = 64 * 1024
_READ_CHUNK = 64 * 1024
_MAX_CHUNK = 16 * 1024 * 1024
#: What `Response.read` holds when its caller names no limit; the gateway passes its configured cap
#: (GATEWAY_UPSTREAM_MAX_RESPONSE_BYTES, `HttpUpstream`).
MAX_BODY = 64 * 1024 * 1024
#: Idle keep-alive connections older than this are not reused: servers close idle connections
#: after a few seconds (uvicorn: 5 s), and a request sent as they do would be lost.
_MAX_IDLE_SECONDS = 4.0


class UpstreamHttpError(Exception):
    """The upstream could not be reached, or broke the HTTP exchange."""


class ConnectFailed(UpstreamHttpError):
    """No connection could be made: the request was not sent."""


class AddressNotAllowed(ConnectFailed):
    """The upstream's address is one the gateway may not connect to (apps.common.netguard)."""


class RequestRefused(UpstreamHttpError):
    """The request cannot be written as HTTP/1.1 as it stands (a line break in a header, a space in
    the target, ...): nothing was sent. Its strings came from a spec or configuration."""


class BodyTooLarge(UpstreamHttpError):
    """The response body is larger than the reader's limit (the connection is dropped)."""


class BodyTimedOut(UpstreamHttpError):
    """No byte of the response body came for the response's idle timeout (the connection is dropped)."""


@dataclass(frozen=True, slots=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str

    @classmethod
    def from_url(cls, url: str) -> Target:
        parts = urlsplit(url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        return cls(parts.scheme, parts.hostname, port, path)

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


class _Connection:
    __slots__ = ("reader", "writer", "idle_since")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def close(self) -> None:
        self.writer.close()

    @property
    def usable(self) -> bool:
        """Open, and nothing received beyond the last response: bytes a server sent after the end
        of a response would be read as the answer to the next request, someone else's call."""
        return not self.writer.is_closing() and not self.reader.at_eof() and not _unread(self.reader)


def _unread(reader: asyncio.StreamReader) -> int:
    """Bytes received on the connection and not read yet. asyncio has no public way to ask; its
    StreamReader keeps them in `_buffer` (a bytearray, in every CPython version since 3.4)."""
    return len(reader._buffer)


class Response:
    """Status and headers are read; the body is read with `read()` or streamed with `iter_bytes()`.
    The connection goes back to the pool only when the body was read to its end."""

    def __init__(
        self, pool: HttpPool, conn: _Connection, status: int, headers: dict[str, str], no_body: bool,
        *, keep_alive: bool = True,
    ):
        #: The longest wait for the next bytes of the body (None: no limit); `HttpPool.request` sets it.
        self.idle_timeout: float | None = None
        self._pool = pool
        self._conn: _Connection | None = conn
        self.status = status
        self.headers = headers
        self._remaining: int | None = None
        self._chunked = False
        self._keep_alive = keep_alive
        codings = headers.get("transfer-encoding", "").lower()
        if no_body:
            self._remaining = 0
        elif codings:
            # RFC 9112 §6.3: chunked must be the final coding, else the body ends with the
            # connection; with a Content-Length too, the framing is ambiguous (the classic
            # smuggling message): read it as chunked, then drop the connection.
            self._chunked = codings.rsplit(",", 1)[-1].strip() == "chunked"
            if not self._chunked or "content-length" in headers:
                self._keep_alive = False
        elif "content-length" in headers:
            self._remaining = _content_length(headers["content-length"])
        else:
            self._keep_alive = False  # body ends when the server closes the connection
        if self._remaining == 0:
            self._finish()

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    async def read(self, limit: int = MAX_BODY) -> bytes:
        """The whole body; BodyTooLarge (the connection dropped) when it is over `limit` bytes,
        known as soon as the head or a chunk size announces it, before anything is buffered."""
        if self._remaining is not None and self._remaining > limit:
            self.aclose()
            raise BodyTooLarge(f"response body over {limit:,} bytes, the gateway's limit")
        chunks: list[bytes] = []
        size = 0
        async for chunk in self.iter_bytes(limit=limit):
            size += len(chunk)
            if size > limit:  # a body that ends with the connection announces no size
                self.aclose()
                raise BodyTooLarge(f"response body over {limit:,} bytes, the gateway's limit")
            chunks.append(chunk)
        return b"".join(chunks)

    async def iter_bytes(self, *, limit: int | None = None) -> AsyncIterator[bytes]:
        """The body as it arrives. With `limit`, a chunk announced beyond it is BodyTooLarge before
        it is read (`read` checks the other framings)."""
        conn = self._conn
        if conn is None:
            return
        reader = conn.reader
        budget = limit  # what the chunks may still hold
        idle = self.idle_timeout
        watch = None if idle is None else _IdleWatch(conn, idle)
        try:
            if self._chunked:
                while True:
                    size_line = await reader.readuntil(b"\r\n")
                    size = int(size_line.split(b";", 1)[0].strip(), 16)
                    if budget is not None:
                        if size > budget:
                            raise BodyTooLarge(f"response body over {limit:,} bytes, the gateway's limit")
                        budget -= size
                    if size > _MAX_CHUNK:
                        raise ValueError(f"chunk of {size} bytes")
                    if size == 0:
                        while (await reader.readuntil(b"\r\n")) != b"\r\n":
                            pass  # trailers
                        break
                    data = await reader.readexactly(size + 2)
                    if data[-2:] != b"\r\n":
                        raise ValueError("chunk not followed by CRLF")  # the framing is lost
                    if watch is not None:
                        watch.saw()
                    yield data[:-2]
            elif self._remaining is not None:
                while self._remaining > 0:
                    data = await reader.read(min(self._remaining, _READ_CHUNK))
                    if not data:
                        raise UpstreamHttpError("upstream closed the connection mid-body")
                    self._remaining -= len(data)
                    if watch is not None:
                        watch.saw()
                    yield data
            else:
                while data := await reader.read(_READ_CHUNK):
                    if watch is not None:
                        watch.saw()
                    yield data
                if watch is not None and watch.expired:
                    raise UpstreamHttpError("cut")  # the watch closed it: not the body's real end
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError,
                UpstreamHttpError) as exc:
            self.aclose()
            if watch is not None and watch.expired:
                raise BodyTimedOut(f"timed out after {idle:g} s waiting for the rest of the response") from None
            if isinstance(exc, UpstreamHttpError):
                raise
            raise UpstreamHttpError(f"upstream broke the response body: {type(exc).__name__}") from None
        except BaseException:
            self.aclose()
            raise
        finally:
            if watch is not None:
                watch.stop()
        self._finish()

    def _finish(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            if self._keep_alive:
                self._pool.release(conn)
            else:
                conn.close()

    def aclose(self) -> None:
        """Abandon the body: the connection is closed, not reused (it may still carry bytes)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class HttpPool:
    """Keep-alive connections to one origin. Bound to the event loop it is first used on."""

    def __init__(
        self, target: Target, *, max_idle: int = 64, connect_timeout: float = 5.0, allow_private: bool = False
    ) -> None:
        self.target = target
        self.allow_private = allow_private  # private addresses may be connected to (the tenant's setting)
        self._idle: deque[_Connection] = deque()
        self._max_idle = max_idle
        self._connect_timeout = connect_timeout
        self._ssl = ssl.create_default_context() if target.scheme == "https" else None

    async def _connect(self) -> _Connection:
        host, port = self.target.host, self.target.port
        try:
            async with asyncio.timeout(self._connect_timeout):
                # Resolved and checked on every new connection, then connected to by address, so
                # a name re-pointed at a refused address after it was saved is refused too.
                addresses = await resolve_checked(host, port, allow_private=self.allow_private)
                reader, writer = await self._open(addresses)
        except AddressRefused as exc:
            log.warning("refused to connect to %s:%s: %s", host, port, exc)
            # Tenants see this message: it names the reason, not the backend's address.
            raise AddressNotAllowed(f"cannot connect: the backend's address is not allowed ({exc.reason})") from None
        except (OSError, TimeoutError) as exc:
            raise ConnectFailed(f"cannot connect ({type(exc).__name__})") from None
        return _Connection(reader, writer)

    async def _open(self, addresses: list[str]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to the first of `addresses` that accepts one (TLS names the target's host)."""
        server_hostname = self.target.host if self._ssl is not None else None
        for address in addresses[:-1]:
            try:
                return await asyncio.open_connection(
                    address, self.target.port, ssl=self._ssl, server_hostname=server_hostname, limit=_MAX_HEAD
                )
            except OSError:
                continue
        return await asyncio.open_connection(
            addresses[-1], self.target.port, ssl=self._ssl, server_hostname=server_hostname, limit=_MAX_HEAD
        )

    def _take_idle(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.usable and now - conn.idle_since < _MAX_IDLE_SECONDS:
                return conn
            conn.close()
        return None

    def release(self, conn: _Connection) -> None:
        if conn.usable and len(self._idle) < self._max_idle:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()

    async def request(
        self,
        method: str,
        path: str,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        *,
        timeout: float,
        idle_timeout: float | None = None,
    ) -> Response:
        """Send one request and read the response head within `timeout` seconds (a new connection
        gets at most `timeout` too, and the pool's connect timeout); then the body may pause at most
        `idle_timeout` seconds between parts (None: as long as it likes — long-lived event streams)."""
        if not _is_token(method):
            raise RequestRefused(f"refusing to send the method {method[:40]!r}: it is not an HTTP token")
        if (bad := bad_target_character(path)) is not None:
            raise RequestRefused(f"refusing to send a request target that holds {bad}")
        if not path.startswith("/"):
            raise RequestRefused("refusing to send a request target that does not start with '/'")
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.target.host_header}"]
        for name, value in headers:
            if not _is_token(name):
                raise RequestRefused(f"refusing to send the header name {name[:80]!r}: it is not an HTTP token")
            if header_denied(name):  # written by this client, or of one connection (the second line)
                continue
            if not value.isprintable() and (bad := bad_value_character(value)) is not None:
                # Values may come from a client or a backend: never let one add a header line.
                kind = "a line break" if "\r" in value or "\n" in value else bad
                raise RequestRefused(f"refusing to send header {name!r} with {kind}")
            lines.append(f"{name}: {value}")
        if body or method in {"POST", "PUT", "PATCH"}:
            lines.append(f"Content-Length: {len(body)}")
        try:
            head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        except UnicodeEncodeError:
            raise UpstreamHttpError("refusing to send a request head with characters outside ISO-8859-1") from None
        payload = head + body
        # A request is sent once: after a connection failure nobody knows whether the backend
        # acted on it (a tools/call must not run twice), so there is no automatic retry.
        conn = self._take_idle() or await self._connect_within(timeout)
        response = await self._exchange(conn, method, payload, timeout)
        response.idle_timeout = idle_timeout
        return response

    async def _connect_within(self, timeout: float) -> _Connection:
        """A new connection, given up after `timeout` seconds when that is sooner than the pool's
        own connect timeout (ConnectFailed either way: nothing was sent)."""
        if timeout >= self._connect_timeout:
            return await self._connect()
        try:
            async with asyncio.timeout(timeout):
                return await self._connect()
        except TimeoutError:
            raise ConnectFailed(f"cannot connect within {timeout:g} s") from None

    async def _exchange(self, conn: _Connection, method: str, payload: bytes, timeout: float) -> Response:
        try:
            async with asyncio.timeout(timeout):
                conn.writer.write(payload)
                if conn.writer.transport.get_write_buffer_size() > _READ_CHUNK:
                    await conn.writer.drain()
                while True:
                    version, status, headers = _parse_head(await conn.reader.readuntil(b"\r\n\r\n"))
                    # Interim answers (100 Continue, 103 Early Hints) precede the real one.
                    if not 100 <= status < 200 or status == 101:
                        break
            no_body = method == "HEAD" or status in (204, 304)
            persistent = headers.get("connection", "").lower()
            # HTTP/1.0 connections close after the response unless the server says otherwise.
            keep_alive = persistent == "keep-alive" if version == "HTTP/1.0" else persistent != "close"
            return Response(self, conn, status, headers, no_body, keep_alive=keep_alive)
        except TimeoutError:  # before OSError, of which it is a subclass
            conn.close()
            raise
        except asyncio.IncompleteReadError:
            conn.close()
            raise UpstreamHttpError("upstream closed the connection without answering") from None
        except (ConnectionError, OSError) as exc:
            conn.close()
            raise UpstreamHttpError(f"upstream connection failed: {type(exc).__name__}") from None
        except asyncio.LimitOverrunError:
            conn.close()
            raise UpstreamHttpError("upstream response head too large") from None
        except BaseException:
            conn.close()
            raise


class _IdleWatch:
    """Closes a connection whose body has brought nothing for `idle` seconds, which ends the read
    waiting on it. One timer per body, moved on only when it fires: a timeout around every read
    would cost microseconds per chunk on the hot path."""

    __slots__ = ("_conn", "_idle", "_loop", "_last", "_timer", "expired")

    def __init__(self, conn: _Connection, idle: float) -> None:
        self._conn = conn
        self._idle = idle
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()
        self._timer: asyncio.TimerHandle | None = self._loop.call_at(self._last + idle, self._check)
        self.expired = False

    def saw(self) -> None:
        """Some of the body arrived just now."""
        self._last = self._loop.time()

    def _check(self) -> None:
        due = self._last + self._idle
        if self._loop.time() < due:
            self._timer = self._loop.call_at(due, self._check)
            return
        self._timer = None
        self.expired = True
        self._conn.writer.transport.abort()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


_tokens: set[str] = set()  # methods and header names that passed: the hot path sees the same few
_TOKENS_MAX = 4096


def _is_token(text: str) -> bool:
    """Whether `text` is an HTTP token (remembered when it is, in a bounded set)."""
    if text in _tokens:
        return True
    if not is_token(text):
        return False
    if len(_tokens) < _TOKENS_MAX:
        _tokens.add(text)
    return True


def _content_length(value: str) -> int:
    """A Content-Length, also when a server repeated the header with the same value."""
    values = {part.strip() for part in value.split(",")}
    if len(values) != 1 or not (length := values.pop()).isdigit():
        raise UpstreamHttpError(f"invalid upstream Content-Length {value!r}")
    return int(length)


def _parse_head(head: bytes) -> tuple[str, int, dict[str, str]]:
    """The version, status and headers (names lower-cased, repeated ones joined) of a response head."""
    try:
        text = head.decode("latin-1")
        status_line, _, rest = text.partition("\r\n")
        version, status, *_ = status_line.split(" ", 2)
        if not version.startswith("HTTP/1."):
            raise ValueError(status_line)
        headers: dict[str, str] = {}
        for line in rest.split("\r\n"):
            if not line:
                continue
            name, _, value = line.partition(":")
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        return version, int(status), headers
    except ValueError as exc:
        raise UpstreamHttpError(f"malformed upstream response head: {exc}") from None
