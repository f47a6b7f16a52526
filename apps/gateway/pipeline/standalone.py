"""Ports for a gateway that runs alone, without the services a deployment shares: one process, no
Redis, no tool index, no access tokens. `Gateway` takes every port it uses (none is optional), so a
gateway built without one of those gets these: each does what "there is none" means, and no code
path has to ask whether a port is there. `apps.gateway.wiring` plugs in the real adapters instead."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from apps.gateway.pipeline.ports import Admission, HookFailed, ReplicaState, UpstreamUnavailable
from apps.kernel.identity import Budget, InvalidToken, Limit
from apps.kernel.search_tool import Found


class NoChanges:
    """The `ChangeFeed` of a lone instance: there is no other instance to tell or to hear."""

    def publish(self, backend_id: int, notification: str) -> None:
        pass

    def start(self, on_change: Callable[[int, str], object]) -> None:
        pass


class NoHealthFeed:
    """The `HealthFeed` of a lone instance: what it finds of replicas stays its own."""

    def publish(self, state: ReplicaState) -> None:
        pass

    def confirm(self, states: Sequence[ReplicaState]) -> None:
        pass

    def start(self, on_state: Callable[[ReplicaState], object]) -> None:
        pass


class NoLimiter:
    """A `RateLimiter` that admits every call: no rate limit or budget is enforced."""

    async def admit(self, limits: Sequence[Limit], budgets: Sequence[Budget] = (), cost: int = 1) -> Admission:
        return Admission()


class NoTokens:
    """A `TokenVerifier` that accepts no access token (API keys still authenticate)."""

    async def verify(self, token: str, issuers: object) -> Any:
        raise InvalidToken("this gateway verifies no access tokens")


class NoHooks:
    """`InterceptorHooks` that reach no outside service: each webhook interceptor fails (open or
    closed, as configured)."""

    async def ask(self, webhook: Any, request: Any) -> Any:
        raise HookFailed("this gateway asks no outside services", kind="unavailable")


class NoFinder:
    """A `ToolFinder` with no index: `tool_search` answers that it cannot search."""

    async def find(self, **query: Any) -> Found:
        raise UpstreamUnavailable("no tool index is configured")

    def prepare(self) -> None:
        pass


class LocalInbox:
    """One open stream's inbox in this process (`Mailbox.open`)."""

    def __init__(self, mailbox: LocalMailbox, session_id: str) -> None:
        self.mailbox = mailbox
        self.session_id = session_id
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.ended = False

    async def get(self, timeout: float) -> bytes | None:
        if self.ended:
            return None
        try:
            message = await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            return None
        return None if self.ended else message

    def end(self) -> None:
        """Another stream of the session took over: wake the reader, and receive nothing more."""
        if not self.ended:
            self.ended = True
            self.queue.put_nowait(b"")  # wakes a reader waiting in `get`
            self.close()

    def close(self) -> None:
        self.mailbox.forget(self)


class LocalMailbox:
    """The `Mailbox` of a lone instance: a session's messages reach the streams open in this process
    (every one of them); posted while none is open, they are dropped, as the port says. The channel
    layer's mailbox delivers within its process through one of these too."""

    def __init__(self) -> None:
        self.inboxes: dict[str, list[LocalInbox]] = {}

    def deliver(self, session_id: str, messages: Sequence[bytes]) -> bool:
        """Hand `messages` to every stream of the session open here; False when there is none."""
        inboxes = self.inboxes.get(session_id)
        for inbox in inboxes or ():
            for message in messages:
                inbox.queue.put_nowait(message)
        return bool(inboxes)

    async def post(self, session_id: str, messages: Sequence[bytes]) -> None:
        self.deliver(session_id, messages)

    async def open(self, session_id: str, *, replace: bool = False) -> LocalInbox:
        if replace:
            self.replace(session_id)
        return self.hold(LocalInbox(self, session_id))

    def replace(self, session_id: str) -> None:
        """End the session's streams open here."""
        for old in list(self.inboxes.get(session_id, ())):
            old.end()

    def hold(self, inbox: LocalInbox) -> LocalInbox:
        self.inboxes.setdefault(inbox.session_id, []).append(inbox)
        return inbox

    def forget(self, inbox: LocalInbox) -> None:
        inboxes = self.inboxes.get(inbox.session_id, [])
        if inbox in inboxes:
            inboxes.remove(inbox)
        if not inboxes:
            self.inboxes.pop(inbox.session_id, None)
