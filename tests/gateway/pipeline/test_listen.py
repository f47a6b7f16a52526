"""`subscriptions/listen` on a composed host: the tasks extension's `taskIds` filter is routed to the
backends that run the tasks, each asked for its own ids, and what comes back is shown as the host
showed the tasks to this caller."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from apps.gateway.pipeline.listen import ComposedListen
from apps.gateway.pipeline.task_ids import TASKS_EXTENSION
from apps.gateway.pipeline.values import BackendInfo, BackendView, VirtualHostView
from apps.gateway.protocol.jsonrpc import classify
from apps.kernel.identity import Principal
from tests.gateway.pipeline.test_gateway import PRINCIPAL, KnownBackends, forwarder

TASKS_BACKEND = BackendInfo(None, {}, ("2026-07-28",), {"extensions": {TASKS_EXTENSION: {}}},
                            {"name": "backend", "version": "1"}, None)
EV = BackendView(id=1, name="ev", transport="streamable-http", urls=("http://ev/mcp",), timeout=1)
DEMO = BackendView(id=2, name="demo", transport="streamable-http", urls=("http://demo/mcp",), timeout=1)
VHOST = VirtualHostView(1, "acme", "main", MappingProxyType({"ev": EV, "demo": DEMO}), MappingProxyType({}))


class Backends:
    """Backends' `subscriptions/listen` streams: each acknowledges the first task id it is asked
    for, then says that task completed, and says so of a task nobody asked about."""

    def __init__(self) -> None:
        self.asked: dict[str, tuple[dict[str, Any], dict[str, Any] | None, Principal | None]] = {}

    async def listen(self, backend: BackendView, notifications: dict[str, Any], *, on_acknowledged: Any,
                     on_message: Any, principal: Principal | None = None,
                     capabilities: dict[str, Any] | None = None) -> None:
        self.asked[backend.name] = (notifications, capabilities, principal)
        first = notifications["taskIds"][0]
        on_acknowledged({"notifications": {"taskIds": [first]}})
        link = {"type": "resource_link", "name": "r", "uri": "file:///r"}
        for task_id in ("someone-elses", first):
            on_message({"jsonrpc": "2.0", "method": "notifications/tasks", "params": {
                "taskId": task_id, "status": "completed", "result": {"content": [link]}}})
        await asyncio.Event().wait()


async def test_task_ids_are_routed_to_the_backends_that_run_them_and_come_back_as_shown() -> None:
    relay = forwarder(info=TASKS_BACKEND)
    vhost = VHOST
    mine = [relay.backend_messages(vhost, PRINCIPAL, "ev")({"jsonrpc": "2.0", "id": 1, "result": {
        "resultType": "task", "taskId": upstream, "status": "working"}})["result"]["taskId"] for upstream in ("t1", "t2")]
    stranger = replace(PRINCIPAL, key_id=2)
    theirs = relay.backend_messages(vhost, stranger, "ev")({"jsonrpc": "2.0", "id": 1, "result": {
        "resultType": "task", "taskId": "t3", "status": "working"}})["result"]["taskId"]
    backends = Backends()
    listen = ComposedListen(backends, relay._lists, KnownBackends(TASKS_BACKEND), timeout=1.0,  # type: ignore[arg-type]
                            task_of=relay.task_of, messages=relay.backend_messages)
    message = classify({"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen",
                        "params": {"notifications": {"taskIds": [*mine, theirs, "made-up"]}}})
    reply = await listen.handle(vhost, PRINCIPAL, message)
    assert reply.stream is not None
    events = [json.loads(chunk.decode().removeprefix("data: ")) async for chunk in _first(reply.stream, 2)]
    await reply.stream.aclose()
    assert backends.asked == {"ev": ({"taskIds": ["t1", "t2"]}, {"extensions": {TASKS_EXTENSION: {}}}, PRINCIPAL)}
    acknowledged, status = events
    assert acknowledged["params"]["notifications"] == {"taskIds": [mine[0]]}  # what the backend took
    assert status["method"] == "notifications/tasks" and status["params"]["taskId"] == mine[0]
    assert status["params"]["result"]["content"][0]["uri"] == VHOST.naming.expose_uri("ev", "file:///r")
    assert status["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "sub-1"}


async def _first(stream: Any, count: int) -> Any:
    async for chunk in stream:
        yield chunk.strip()
        count -= 1
        if not count:
            return
