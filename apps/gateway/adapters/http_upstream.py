"""The `Upstream` port over the pooled HTTP/1.1 client: one pool per replica origin, per event loop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping

from channels.layers import BaseChannelLayer

from apps.gateway.adapters.http_pool import (
    MAX_BODY,
    BodyTooLarge,
    ConnectFailed,
    HttpPool,
    Response,
    Target,
    UpstreamHttpError,
)
from apps.gateway.adapters.sse_bridge import BridgeReply, SseBridge
from apps.gateway.pipeline.ports import Mailbox, ReplicaUnreachable, ResponseTooLarge, UpstreamUnavailable
from apps.gateway.pipeline.values import BackendView
from apps.gateway.protocol.sse import EventTooLarge, SseEvent, SseParser


class UpstreamReply:
    """A backend's answer. `max_bytes` caps what is read of it: the whole body (`read`), or each
    event of a stream (`events`); over it, the connection is dropped and UpstreamUnavailable says so."""

    __slots__ = ("_response", "_max_bytes", "status", "headers")

    def __init__(self, response: Response, max_bytes: int = MAX_BODY) -> None:
        self._response = response
        self._max_bytes = max_bytes
        self.status = response.status
        self.headers: Mapping[str, str] = response.headers

    @property
    def content_type(self) -> str:
        return self._response.content_type

    async def read(self, limit: int | None = None) -> bytes:
        cap = self._max_bytes if limit is None else min(limit, self._max_bytes)
        try:
            return await self._response.read(cap)
        except BodyTooLarge as exc:
            raise ResponseTooLarge(str(exc), cap) from None
        except UpstreamHttpError as exc:
            raise UpstreamUnavailable(str(exc)) from None

    async def events(self) -> AsyncIterator[SseEvent]:
        parser = SseParser(self._max_bytes)
        try:
            async for chunk in self._response.iter_bytes():
                for event in parser.feed(chunk):
                    yield event
        except UpstreamHttpError as exc:
            raise UpstreamUnavailable(str(exc)) from None
        except EventTooLarge as exc:
            self._response.aclose()
            raise ResponseTooLarge(f"broken event stream: {exc}", self._max_bytes) from None
        except ValueError as exc:
            self._response.aclose()
            raise UpstreamUnavailable(f"broken event stream: {exc}") from None

    def close(self) -> None:
        self._response.aclose()


def _long_lived(method: str, headers: list[tuple[str, str]]) -> bool:
    return method == "GET" or ("mcp-method", "subscriptions/listen") in headers


class HttpUpstream:
    """Sends to backends over pooled connections, one pool per origin. Backends of the HTTP+SSE
    transport go through `sse` (a bridge that needs this client to reach them), when given."""

    def __init__(
        self, sse: Callable[[HttpUpstream], SseBridge] | None = None, *, max_response_bytes: int = MAX_BODY
    ) -> None:
        self._max_response_bytes = max_response_bytes
        # Keyed by the address policy too: a pool's connections were checked under its policy.
        self._pools: dict[tuple[str, str, int, bool], HttpPool] = {}
        self._targets: dict[tuple[str, bool], tuple[HttpPool, str]] = {}
        self._sse = sse(self) if sse is not None else None

    def _target(self, url: str, allow_private: bool) -> tuple[HttpPool, str]:
        target = Target.from_url(url)
        origin = (target.scheme, target.host, target.port, allow_private)
        pool = self._pools.get(origin)
        if pool is None:
            pool = self._pools[origin] = HttpPool(target, allow_private=allow_private)
        return pool, target.path

    async def request(
        self, method: str, url: str, headers: list[tuple[str, str]], body: bytes, timeout: float,
        *, allow_private: bool = False, long_lived: bool | None = None,
    ) -> UpstreamReply:
        """One request to any URL (an HTTP+SSE backend's message endpoint differs per session);
        `allow_private`: the backend's tenant allows private addresses; `long_lived` as in `Upstream.send`."""
        pool, path = self._targets.get((url, allow_private)) or self._target(url, allow_private)
        # The answer to a POST (JSON, or the call's event stream) must keep coming: a backend silent
        # for `timeout` seconds is given up (keep-alive comments count). A GET stream, or the answer
        # to a 2026-07-28 `subscriptions/listen`, is the backend's channel for what it sends on its
        # own and may rightly stay silent for hours.
        idle = None if (_long_lived(method, headers) if long_lived is None else long_lived) else timeout
        try:
            response = await pool.request(method, path, headers, body, timeout=timeout, idle_timeout=idle)
        except ConnectFailed as exc:
            raise ReplicaUnreachable(str(exc)) from None
        except UpstreamHttpError as exc:
            raise UpstreamUnavailable(str(exc)) from None
        return UpstreamReply(response, self._max_response_bytes)

    async def send(
        self,
        backend: BackendView,
        replica: str,
        method: str,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        *,
        timeout: float,
        long_lived: bool | None = None,
    ) -> UpstreamReply | BridgeReply:
        if backend.transport == "sse" and self._sse is not None:
            return await self._sse.send(backend, replica, method, headers, body, timeout=timeout)
        key = (replica, backend.allow_private)
        if key not in self._targets:  # replica URLs are few (configuration); remember them
            self._targets[key] = self._target(replica, backend.allow_private)
        return await self.request(method, replica, headers, body, timeout, allow_private=backend.allow_private,
                                  long_lived=long_lived)

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
        self._targets.clear()


def http_upstream(*, layer: BaseChannelLayer, mailbox: Mailbox, max_response_bytes: int = MAX_BODY) -> HttpUpstream:
    """The client the gateway reaches backends with, HTTP+SSE ones through their bridge (which
    relays through `layer` and `mailbox`); it reads at most `max_response_bytes` of a response
    body or of one event."""
    return HttpUpstream(sse=lambda http: SseBridge(http.request, layer=layer, mailbox=mailbox),
                        max_response_bytes=max_response_bytes)
