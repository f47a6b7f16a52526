"""The `Upstream` port over the pooled HTTP/1.1 client: one pool per replica origin, per event loop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from apps.gateway.pipeline.ports import ReplicaUnreachable, UpstreamUnavailable
from apps.gateway.pipeline.values import BackendView
from apps.gateway.protocol.sse import SseEvent, SseParser
from apps.gateway.upstream.http import MAX_BODY, ConnectFailed, HttpPool, Response, Target, UpstreamHttpError


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
    def __init__(self) -> None:
        self._pools: dict[str, tuple[HttpPool, str]] = {}

    def _pool(self, url: str) -> tuple[HttpPool, str]:
        entry = self._pools.get(url)
        if entry is None:
            target = Target.from_url(url)
            entry = (HttpPool(target), target.path)
            self._pools[url] = entry
        return entry

    async def send(
        self,
        backend: BackendView,
        replica: str,
        method: str,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        *,
        timeout: float,
    ) -> UpstreamReply:
        pool, path = self._pool(replica)
        try:
            response = await pool.request(method, path, headers, body, timeout=timeout)
        except ConnectFailed as exc:
            raise ReplicaUnreachable(str(exc)) from None
        except UpstreamHttpError as exc:
            raise UpstreamUnavailable(str(exc)) from None
        return UpstreamReply(response)

    def close(self) -> None:
        for pool, _ in self._pools.values():
            pool.close()
        self._pools.clear()
