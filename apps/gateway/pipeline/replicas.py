"""Which replica of a backend a request goes to (ARCHITECTURE §7): the session's, chosen by
rendezvous hashing among the replicas that are up; and which replicas are up, as this process sees
them (a failed connection marks one down at once, a periodic check marks it down or up)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from collections.abc import Callable

from apps.gateway.pipeline.ports import ReplicaUnreachable, Upstream, UpstreamReply, UpstreamUnavailable
from apps.gateway.pipeline.values import BackendView

log = logging.getLogger(__name__)

#: Sent with every request of a session, so a backend service with its own consistent forwarding
#: keeps the session on one of its nodes without learning the downstream session id.
ROUTING_HASH_HEADER = "x-mcp-routing-hash"


def routing_hash(affinity: str) -> str:
    return hashlib.blake2b(affinity.encode(), digest_size=16, person=b"mcp-routing").hexdigest()


def _rank(affinity: str, url: str) -> bytes:
    return hashlib.blake2b(f"{affinity}|{url}".encode(), digest_size=8).digest()


class NoReplicaAvailable(UpstreamUnavailable):
    """Every replica of the backend is down."""


class ReplicaHealth:
    """Replicas of backends that have several, as this process sees them. Backends with one
    replica are not tracked: there is nowhere else to go, and each request tries it.

    Down: a connection to it failed (nothing was sent), or a check got no HTTP answer. Up again:
    a check got any HTTP answer (a 4xx too: something is serving). Checks run every
    `check_seconds` (None: never) for every tracked replica, once any is in use."""

    def __init__(
        self, upstream: Upstream, *, check_seconds: float | None = 5.0, check_timeout: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._upstream = upstream
        self._check_seconds = check_seconds
        self._check_timeout = check_timeout
        self._clock = clock
        self._known: dict[str, BackendView] = {}
        self._down: dict[str, float] = {}  # url -> since
        self._checker: asyncio.Task[None] | None = None

    def is_up(self, url: str) -> bool:
        return url not in self._down

    def down(self) -> tuple[str, ...]:
        return tuple(self._down)

    def mark_down(self, url: str) -> None:
        if url in self._known and url not in self._down:
            log.warning("replica %s is down", url)
            self._down[url] = self._clock()

    def mark_up(self, url: str) -> None:
        if self._down.pop(url, None) is not None:
            log.warning("replica %s is up again", url)

    def pick(self, backend: BackendView, affinity: str | None) -> str:
        """The replica for `affinity` (a session; None: any will do). Rendezvous hashing over the
        replicas that are up: a session stays where it is while its replica is up, and only the
        sessions of a replica that goes down move. Raises NoReplicaAvailable."""
        urls = backend.urls
        if len(urls) == 1:
            return urls[0]
        if not urls:
            raise NoReplicaAvailable(f"backend {backend.name} has no replica")
        for url in urls:
            if url not in self._known:
                self._known[url] = backend
                self._start_checks()
        up = [url for url in urls if url not in self._down]
        if not up:
            raise NoReplicaAvailable(f"backend {backend.name}: all {len(urls)} replicas are down")
        if affinity is None:
            return random.choice(up)
        return max(up, key=lambda url: _rank(affinity, url))

    async def send(
        self, backend: BackendView, replica: str, method: str, headers: list[tuple[str, str]],
        body: bytes = b"", *, timeout: float,
    ) -> UpstreamReply:
        """`Upstream.send` that marks a replica down when it cannot be connected to."""
        try:
            return await self._upstream.send(backend, replica, method, headers, body, timeout=timeout)
        except ReplicaUnreachable:
            self.mark_down(replica)
            raise

    def _start_checks(self) -> None:
        if self._check_seconds is not None and (self._checker is None or self._checker.done()):
            self._checker = asyncio.ensure_future(self._check_forever(self._check_seconds))

    async def _check_forever(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            await asyncio.gather(*(self.check(url) for url in list(self._known)))

    async def check(self, url: str) -> bool:
        """Ask the replica for anything; any HTTP answer means it is up."""
        backend = self._known.get(url)
        if backend is None:
            return False
        try:
            reply = await self._upstream.send(
                backend, url, "GET", [("accept", "application/json")], timeout=self._check_timeout
            )
        except (UpstreamUnavailable, TimeoutError):
            self.mark_down(url)
            return False
        reply.close()
        self.mark_up(url)
        return True
