"""Which replica of a backend a request goes to (docs/sessions.md): the session's, chosen by
rendezvous hashing among the replicas that are up; and which replicas are up, as the gateway
instances see them (a failed connection marks one down at once, a periodic check marks it down or
up, and every instance hears what the others found)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from collections.abc import Callable

from apps.gateway.pipeline.ports import (
    HealthFeed,
    ReplicaState,
    ReplicaUnreachable,
    Upstream,
    UpstreamReply,
    UpstreamUnavailable,
)
from apps.gateway.pipeline.standalone import NoHealthFeed
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
    `check_seconds` (None: never) for every tracked replica, down ones too, once any is in use.

    With a shared `feed`, every instance shares what it finds: its own transitions are published, the
    others' are applied (`apply`) as if found here, and a check that finds a replica still down
    confirms the shared record. A record for a replica not in use here yet is kept: once used, it
    starts in that state, and is checked at once."""

    def __init__(
        self, upstream: Upstream, *, check_seconds: float | None = 5.0, check_timeout: float = 2.0,
        clock: Callable[[], float] = time.time, feed: HealthFeed | None = None,
    ) -> None:
        self._upstream = upstream
        self._check_seconds = check_seconds
        self._check_timeout = check_timeout
        self._clock = clock
        self.feed: HealthFeed = feed or NoHealthFeed()
        self._known: dict[str, BackendView] = {}
        self._down: dict[str, ReplicaState] = {}
        self._checker: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[bool]] = set()

    def is_up(self, url: str) -> bool:
        return url not in self._down

    def down(self) -> tuple[str, ...]:
        return tuple(self._down)

    def mark_down(self, url: str) -> None:
        if url in self._known and url not in self._down:
            log.warning("replica %s is down", url)
            state = self._down[url] = ReplicaState(url, False, self._clock())
            self.feed.publish(state)

    def mark_up(self, url: str) -> None:
        if self._down.pop(url, None) is not None:
            log.warning("replica %s is up again", url)
            self.feed.publish(ReplicaState(url, True, self._clock()))

    def apply(self, state: ReplicaState) -> None:
        """What another instance found (or a record read at start): taken as if found here, not
        shared again. A replica already down keeps the state it went down with; one this instance
        found down itself stays down until its own check answers, so instances that see a replica
        differently (a partition) do not flip each other every check."""
        if state.up:
            current = self._down.get(state.url)
            if current is not None and current.instance == "" and self._check_seconds is not None:
                return
            if self._down.pop(state.url, None) is not None:
                log.info("replica %s is up again (found by %s)", state.url, state.instance)
        elif state.url not in self._down:
            log.info("replica %s is down (found by %s)", state.url, state.instance)
            self._down[state.url] = state

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
                if url in self._down and self._check_seconds is not None:
                    self._check_soon(url)  # down by another instance's record, maybe long ago
        up = [url for url in urls if url not in self._down]
        if not up:
            raise NoReplicaAvailable(f"backend {backend.name}: all {len(urls)} replicas are down")
        if affinity is None:
            return random.choice(up)
        return max(up, key=lambda url: _rank(affinity, url))

    async def send(
        self, backend: BackendView, replica: str, method: str, headers: list[tuple[str, str]],
        body: bytes = b"", *, timeout: float, long_lived: bool | None = None,
    ) -> UpstreamReply:
        """`Upstream.send` that marks a replica down when it cannot be connected to."""
        try:
            return await self._upstream.send(backend, replica, method, headers, body, timeout=timeout,
                                             long_lived=long_lived)
        except ReplicaUnreachable:
            self.mark_down(replica)
            raise

    def _start_checks(self) -> None:
        if self._check_seconds is not None and (self._checker is None or self._checker.done()):
            self._checker = asyncio.ensure_future(self._check_forever(self._check_seconds))

    def _check_soon(self, url: str) -> None:
        task = asyncio.ensure_future(self.check(url))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _check_forever(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            urls = list(self._known)
            answered = await asyncio.gather(*(self.check(url) for url in urls))
            still_down = [self._down[url] for url, up in zip(urls, answered, strict=True) if not up and url in self._down]
            if still_down:
                self.feed.confirm(still_down)

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
