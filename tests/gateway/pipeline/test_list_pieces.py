"""A pass-through host's lists (`list_pieces.py`), through the forwarder with a scripted backend: a
page within the limits goes as it is; a bigger one is handed out in pieces that each fit, with the
backend's own cursor carried across; a page that changed meanwhile makes the cursor stale."""

from __future__ import annotations

import json
import time
from types import MappingProxyType
from typing import Any

import pytest

from apps.gateway.pipeline.cursors import KEY_BUDGET, CursorCodec, ListScope
from apps.gateway.pipeline.forwarder import Forwarder
from apps.gateway.pipeline.listing import PageLimits
from apps.gateway.pipeline.replies import Reply
from apps.gateway.pipeline.values import HttpRequest, VirtualHostView
from apps.gateway.protocol.jsonrpc import classify
from apps.gateway.protocol.sse import SseEvent, SseParser
from tests.gateway.pipeline.test_forwarder import REMOTE, Answer, Scripted
from tests.gateway.pipeline.test_gateway import PRINCIPAL, StatelessLeg, forwarder

LIMITS = PageLimits(items=1000, bytes=20_000)
VHOST = VirtualHostView(1, "acme", "main", MappingProxyType({"calc": REMOTE}), MappingProxyType({}))
OTHER = VirtualHostView(1, "acme", "other", MappingProxyType({"calc": REMOTE}), MappingProxyType({}))


def tools(count: int, size: int = 500) -> list[dict[str, Any]]:
    return [{"name": f"tool{i:03d}", "description": "é" * (size + i % 7), "inputSchema": {"type": "object"}}
            for i in range(count)]


def page(items: list[dict[str, Any]], request_id: int = 1, **result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"tools": items, **result}}


async def list_once(relay: Forwarder, cursor: str | None = None, *, vhost: VirtualHostView = VHOST,
                    sse: bool = False, request_id: int = 1) -> tuple[Reply, dict[str, Any]]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}
    if cursor is not None:
        message["params"] = {"cursor": cursor}
    headers = {"accept": "text/event-stream" if sse else "application/json"}
    request = HttpRequest("POST", "acme", vhost.slug, headers, json.dumps(message).encode())
    reply = await relay.direct(StatelessLeg(), request, vhost, PRINCIPAL, classify(message), map_key="calc",
                               wants_sse=sse)
    body = reply.body
    if sse:
        (event,) = [event for event in SseParser().feed(body) if event.data]
        body = event.data
    return reply, json.loads(body)


def sent_cursors(upstream: Scripted) -> list[object]:
    return [json.loads(body).get("params", {}).get("cursor") for _, body in upstream.sent]


async def test_a_page_within_the_limits_goes_as_the_backend_sent_it() -> None:
    answer = Answer(page(tools(10, size=50), nextCursor="b2", _meta={"x": 1}))
    relay = forwarder(Scripted(answer), pages=LIMITS)
    reply, _ = await list_once(relay)
    assert reply.body == answer.body


@pytest.mark.parametrize("sse", [False, True])
async def test_a_page_too_big_is_handed_out_in_pieces_that_fit(sse: bool) -> None:
    items = tools(120)
    answers = []
    for _ in range(20):
        answer = Answer(page(items, ttlMs=5000, _meta={"kept": True}),
                        content_type="text/event-stream" if sse else "application/json")
        if sse:
            answer.queue.put_nowait(SseEvent(json.dumps(page(items, ttlMs=5000, _meta={"kept": True})).encode()))
            answer.queue.put_nowait(None)
        answers.append(answer)
    upstream = Scripted(*answers)
    relay = forwarder(upstream, pages=LIMITS)
    seen: list[Any] = []
    cursor = None
    pieces = 0
    while True:
        reply, message = await list_once(relay, cursor, sse=sse)
        assert len(reply.body) <= LIMITS.bytes
        result = message["result"]
        assert result["ttlMs"] == 5000 and result["_meta"] == {"kept": True}
        seen.extend(result["tools"])
        pieces += 1
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert seen == items and pieces > 2
    assert sent_cursors(upstream) == [None] * pieces  # the backend's first page, each time


class Pages(Scripted):
    """A backend that answers each list request with the page its cursor names."""

    def __init__(self, pages: dict[object, dict[str, Any]]) -> None:
        super().__init__()
        self.pages = pages

    async def send(self, backend: Any, replica: str, method: str, headers: Any, body: bytes = b"",
                   *, timeout: float, long_lived: bool | None = None) -> Answer:
        self.sent.append((replica, body))
        request = json.loads(body)
        return Answer({**self.pages[request.get("params", {}).get("cursor")], "id": request["id"]})


async def test_the_last_piece_carries_the_backends_cursor_which_goes_back_as_it_is() -> None:
    first, second = tools(100), [{"name": "zzz"}]
    upstream = Pages({None: page(first, nextCursor="b2"), "b2": page(second)})
    relay = forwarder(upstream, pages=LIMITS)
    cursor, seen = None, []
    while True:
        _, message = await list_once(relay, cursor)
        seen.extend(message["result"]["tools"])
        cursor = message["result"].get("nextCursor")
        if cursor == "b2":
            break
    assert seen == first
    _, message = await list_once(relay, cursor)
    assert message["result"] == {"tools": second}
    assert sent_cursors(upstream)[-1] == "b2"
    assert set(sent_cursors(upstream)[:-1]) == {None}


async def test_pieces_of_a_later_page_ask_the_backend_with_its_cursor() -> None:
    items = tools(100)
    upstream = Scripted(*[Answer(page(items)) for _ in range(2)])
    relay = forwarder(upstream, pages=LIMITS)
    _, message = await list_once(relay, "backend-cursor-7")
    await list_once(relay, message["result"]["nextCursor"])
    assert sent_cursors(upstream) == ["backend-cursor-7", "backend-cursor-7"]


async def test_a_page_that_changed_between_pieces_makes_the_cursor_stale() -> None:
    items = tools(100)
    changed = [*items[:50], {"name": "new"}, *items[50:]]
    relay = forwarder(Scripted(Answer(page(items)), Answer(page(changed, request_id=2))), pages=LIMITS)
    _, message = await list_once(relay)
    _, message = await list_once(relay, message["result"]["nextCursor"], request_id=2)
    assert message["id"] == 2
    assert message["error"]["code"] == -32602 and message["error"]["data"] == {"cursor": "stale"}


async def test_a_cursor_this_gateway_signed_for_another_host_is_the_backends_own() -> None:
    """The backend may be another host of the same deployment (a host mounting another's URL): its
    cursors, merged or piece, are signed with the same secret and go back to it as they are."""
    items = tools(100)
    upstream = Scripted(Answer(page(items)), Answer(page(items[:3])), Answer(page(items[:3])))
    relay = forwarder(upstream, pages=LIMITS)
    _, message = await list_once(relay, vhost=OTHER)
    inner_piece = message["result"]["nextCursor"]
    inner_merged = CursorCodec(b"c" * 32).encode(ListScope("tools", 1, "other", b"\0" * 8), 3, "x")
    for cursor in (inner_piece, inner_merged):
        _, answered = await list_once(relay, cursor)
        assert answered["result"]["tools"] == items[:3]
    assert sent_cursors(upstream) == [None, inner_piece, inner_merged]


async def test_an_expired_piece_cursor_is_refused_without_asking_the_backend() -> None:
    upstream = Scripted(Answer(page(tools(100))))
    _, message = await list_once(forwarder(upstream, pages=LIMITS))
    later = CursorCodec(b"c" * 32, ttl=60, clock=lambda: time.time() + 120)
    _, answer = await list_once(forwarder(upstream, pages=LIMITS, codec=later), message["result"]["nextCursor"])
    assert answer["error"]["code"] == -32602 and answer["error"]["data"] == {"cursor": "expired"}
    assert len(upstream.sent) == 1


async def test_a_backend_cursor_too_long_to_carry_leaves_the_page_whole(caplog: pytest.LogCaptureFixture) -> None:
    items = tools(100)
    answer = Answer(page(items))
    relay = forwarder(Scripted(answer), pages=LIMITS)
    reply, message = await list_once(relay, "c" * (KEY_BUDGET + 1))
    assert reply.body == answer.body and message["result"]["tools"] == items
    assert "relayed whole" in caplog.text


async def test_errors_and_answers_without_a_list_go_as_they_are() -> None:
    error = Answer({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "x" * 30_000}})
    relay = forwarder(Scripted(error), pages=LIMITS)
    reply, _ = await list_once(relay)
    assert reply.body == error.body


async def test_a_backends_tasks_are_handed_out_in_pieces_too() -> None:
    """2025-11-25 `tasks/list`, passed through: a page of tasks too big goes in pieces like any list."""
    tasks = [{"taskId": f"t{i:03d}", "status": "working", "statusMessage": "é" * 400, "createdAt": "now"}
             for i in range(60)]
    answer = {"jsonrpc": "2.0", "id": 1, "result": {"tasks": tasks}}
    upstream = Scripted(*(Answer(answer) for _ in range(10)))
    relay = forwarder(upstream, pages=LIMITS)
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "tasks/list",
                                   "params": {} if cursor is None else {"cursor": cursor}}
        request = HttpRequest("POST", "acme", "main", {"accept": "application/json"}, json.dumps(message).encode())
        reply = await relay.direct(StatelessLeg(), request, VHOST, PRINCIPAL, classify(message), map_key="calc",
                                   wants_sse=False)
        assert len(reply.body) <= LIMITS.bytes
        result = json.loads(reply.body)["result"]
        seen.extend(task["taskId"] for task in result["tasks"])
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert seen == [task["taskId"] for task in tasks] and len(upstream.sent) > 1
