"""The `Upstream` port over the pooled HTTP/1.1 client: one pool per replica origin, per event loop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping

from channels.layers import BaseChannelLayer

from apps.gateway.pipeline.ports import Mailbox, ReplicaUnreachable, UpstreamUnavailable
from apps.gateway.pipeline.values import BackendView
from apps.gateway.protocol.sse import SseEvent, SseParser
from apps.gateway.upstream.http import MAX_BODY, ConnectFailed, HttpPool, Response, Target, UpstreamHttpError
from apps.gateway.upstream.sse import BridgeReply, SseBridge


class UpstreamReply:
    __slots__ = ("_response", "status", "headers")

    def __init__(self, response: Response) -> None:
        self._response = response
        self.status = response.status
        self.headers: Mapping[str, str] = response.headers

    @property
    def content_type(self) -> str:
        return self._response.content_type

    async def read(self, limit: int = MAX_BODY) -> bytes:
        try:
            return await self._response.read(limit)
        except UpstreamHttpError as exc:
            raise UpstreamUnavailable(str(exc)) from None

    async def events(self) -> AsyncIterator[SseEvent]:
        parser = SseParser()
        try:
            async for chunk in self._response.iter_bytes():
                for event in parser.feed(chunk):
                    yield event
        except UpstreamHttpError as exc:
            raise UpstreamUnavailable(str(exc)) from None
        except ValueError as exc:
            self._response.aclose()
            raise UpstreamUnavailable(f"broken event stream: {exc}") from None

    def close(self) -> None:
        self._response.aclose()


class HttpUpstream:
    """Sends to backends over pooled connections, one pool per origin. Backends of the HTTP+SSE
    transport go through `sse` (a bridge that needs this client to reach them), when given."""

    def __init__(self, sse: Callable[[HttpUpstream], SseBridge] | None = None) -> None:
        self._pools: dict[tuple[str, str, int], HttpPool] = {}
        self._targets: dict[str, tuple[HttpPool, str]] = {}
        self._sse = sse(self) if sse is not None else None

    def _target(self, url: str) -> tuple[HttpPool, str]:
        target = Target.from_url(url)
        origin = (target.scheme, target.host, target.port)
        pool = self._pools.get(origin)
        if pool is None:
            pool = self._pools[origin] = HttpPool(target)
        return pool, target.path

    async def request(
        self, method: str, url: str, headers: list[tuple[str, str]], body: bytes, timeout: float
    ) -> UpstreamReply:
        """One request to any URL (an HTTP+SSE backend's message endpoint differs per session)."""
        pool, path = self._targets.get(url) or self._target(url)
        try:
            response = await pool.request(method, path, headers, body, timeout=timeout)
        except ConnectFailed as exc:
            raise ReplicaUnreachable(str(exc)) from None
        except UpstreamHttpError as exc:
            raise UpstreamUnavailable(str(exc)) from None
        return UpstreamReply(response)

    async def send(
        self,
        backend: BackendView,
        replica: str,
        method: str,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        *,
        timeout: float,
    ) -> UpstreamReply | BridgeReply:
        if backend.transport == "sse" and self._sse is not None:
            return await self._sse.send(backend, replica, method, headers, body, timeout=timeout)
        if replica not in self._targets:  # replica URLs are few (configuration); remember them
            self._targets[replica] = self._target(replica)
        return await self.request(method, replica, headers, body, timeout)

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
        self._targets.clear()


def http_upstream(*, layer: BaseChannelLayer, mailbox: Mailbox) -> HttpUpstream:
    """The client the gateway reaches backends with, HTTP+SSE ones through their bridge (which
    relays through `layer` and `mailbox`)."""
    return HttpUpstream(sse=lambda http: SseBridge(http.request, layer=layer, mailbox=mailbox))
