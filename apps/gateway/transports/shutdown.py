"""Graceful shutdown of a gateway instance under Daphne.

On SIGTERM (an orchestrator stopping the instance) the process:
1. stops listening: new connections go to the other instances; `/readyz` answers 503;
2. lets the requests in flight finish, for at most GATEWAY_SHUTDOWN_GRACE_SECONDS (answers sent
   meanwhile carry `Connection: close`, so kept-alive clients move on too);
3. cuts what still runs at that deadline: an answer not begun becomes a 503, a stream is ended;
4. ends the long-lived downstream streams (Streamable HTTP GET, HTTP+SSE, `subscriptions/listen`)
   cleanly, so their clients reconnect elsewhere — their sessions live in Redis and go on there;
5. writes the queued audit rows, closes the pooled backend connections, and stops the reactor:
   the process exits 0.

A second SIGTERM stops at once. Daphne itself would cancel every request on the first one; the
handler is replaced once the reactor runs (Twisted installs its own while starting)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

from apps.common import lifecycle

log = logging.getLogger(__name__)

#: How long ended streams and cut requests get to send their last bytes.
_ENDING_SECONDS = 2.0
_POLL_SECONDS = 0.05
_CLOSE = (b"connection", b"close")

#: Every HTTP request this process is serving (the task that runs it).
requests: set[asyncio.Task[Any]] = set()
#: The requests among them that are long-lived streams, ended rather than waited for.
streams: set[asyncio.Task[Any]] = set()
#: Requests the drain cut or ended: their handler finishes the response instead of dropping it.
ending: set[asyncio.Task[Any]] = set()


def stream_opened() -> None:
    """The current request is a long-lived stream: a drain ends it instead of waiting for it."""
    task = asyncio.current_task()
    if task is not None:
        streams.add(task)


def is_ending() -> bool:
    """Whether the current task was cancelled by the drain (not by its client going away)."""
    return asyncio.current_task() in ending


class DrainTracking:
    """ASGI middleware: keeps `requests` up to date, and adds `Connection: close` to answers that
    start while the process drains."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        task = asyncio.current_task()
        assert task is not None

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and lifecycle.draining():
                message = {**message, "headers": [*message.get("headers", ()), _CLOSE]}
            await send(message)

        requests.add(task)
        try:
            await self.app(scope, receive, sending)
        finally:
            requests.discard(task)
            streams.discard(task)
            ending.discard(task)


def install(*, grace_seconds: float) -> None:
    """Drain on SIGTERM when running under Daphne (elsewhere: nothing)."""
    if "daphne.server" not in sys.modules:  # importing the reactor elsewhere would install one
        return
    from twisted.internet import reactor

    def on_sigterm(signum: int, frame: object) -> None:
        # A fresh context: the signal lands in whatever request was running, whose ids the drain's
        # log lines must not carry.
        reactor.callFromThread(contextvars.Context().run, begin, grace_seconds, http_sse_answering, audit_and_pools_closed)

    reactor.callWhenRunning(signal.signal, signal.SIGTERM, on_sigterm)


def begin(grace_seconds: float, answering: Callable[[], set[asyncio.Task[Any]]], finish: Callable[[], Any]) -> None:
    """Start draining (on the reactor's thread); on a second call, stop at once. `answering()`:
    work in flight that is no request of its own (HTTP+SSE answers); `finish()`: awaited last."""
    from twisted.internet import reactor
    from twisted.internet.interfaces import IListeningPort

    if not lifecycle.draining_begin():
        log.warning("second SIGTERM: stopping without waiting")
        reactor.stop()
        return
    for reader in reactor.getReaders():
        if IListeningPort.providedBy(reader):
            reader.stopListening()
    task = asyncio.ensure_future(drain(grace_seconds, answering, finish))
    task.add_done_callback(lambda _: reactor.stop())


async def drain(grace_seconds: float, answering: Callable[[], set[asyncio.Task[Any]]], finish: Callable[[], Any]) -> None:
    """Steps 2-5 of the module's contract, up to stopping the reactor (the caller's)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_seconds
    log.info("SIGTERM: draining %d requests in flight (at most %g s)", len(requests - streams), grace_seconds)
    while (requests - streams or answering()) and loop.time() < deadline:
        await asyncio.sleep(_POLL_SECONDS)
    late = requests - streams
    if late or answering():
        log.warning("shutdown grace of %g s over: cutting %d requests", grace_seconds, len(late) + len(answering()))
    for task in answering():
        task.cancel()
    _cancel(late)
    _cancel(set(streams))  # the long-lived streams: ended cleanly
    pending = [task for task in requests if not task.done()]
    if pending:
        await asyncio.wait(pending, timeout=_ENDING_SECONDS)
    try:
        async with asyncio.timeout(max(deadline - loop.time(), 0) + _ENDING_SECONDS):
            await finish()
    except Exception:
        log.exception("finishing the shutdown failed")
    log.info("drained; stopping")


def _cancel(tasks: set[asyncio.Task[Any]]) -> None:
    for task in tasks:
        if not task.done():
            ending.add(task)
            task.cancel()


async def audit_and_pools_closed() -> None:
    """The usual `finish`: queued audit rows written, pooled backend connections closed."""
    from apps.gateway.wiring import audit_writer, upstreams_close

    await audit_writer().flush()
    with contextlib.suppress(Exception):
        upstreams_close()


def http_sse_answering() -> set[asyncio.Task[Any]]:
    """The HTTP+SSE answers still being worked on, over every gateway of the process."""
    from apps.gateway.wiring import all_gateways

    return {task for gateway in all_gateways() for task in gateway.http_sse.answering}
