"""The MCP methods of a backend the gateway answers itself (`LocalTools`), through the forwarder,
with a fake tool server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import pytest

from apps.gateway.pipeline.concurrency import BackendGates
from apps.gateway.pipeline.listing import PageLimits
from apps.gateway.pipeline.ports import UpstreamUnavailable
from apps.gateway.pipeline.replies import Reply
from apps.gateway.pipeline.values import BackendInfo, BackendView, HttpRequest, VirtualHostView
from apps.gateway.protocol.jsonrpc import classify
from apps.kernel.identity import Principal
from tests.gateway.pipeline.test_gateway import PRINCIPAL, Audit, StatelessLeg, forwarder

LISTING = b'[{"name":"add","description":"Adds.","inputSchema":{"type":"object"}}]'
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class FakeTools:
    """A tool server with one tool, `add`, whose outcome each test sets."""

    info = BackendInfo(None, {}, (), {}, {"name": "rest", "version": "1"}, None)

    def __init__(self, answer: dict[str, Any] | BaseException | None = None) -> None:
        self.answer = answer if answer is not None else {"content": [{"type": "text", "text": "3"}], "isError": False}
        self.calls: list[tuple[str, dict[str, Any], list[tuple[str, str]]]] = []
        self.started = asyncio.Event()

    def tools_json(self) -> bytes:
        return LISTING

    def has_tool(self, name: str) -> bool:
        return name == "add"

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], *, headers: Sequence[tuple[str, str]] = (),
        principal: Principal | None = None,
    ) -> dict[str, Any]:
        self.calls.append((name, dict(arguments), list(headers)))
        self.started.set()
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


class Hanging(FakeTools):
    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], *, headers: Sequence[tuple[str, str]] = (),
        principal: Principal | None = None,
    ) -> dict[str, Any]:
        self.started.set()
        await asyncio.Event().wait()  # the service never answers
        raise AssertionError("unreachable")


async def _handle(
    server: FakeTools, message: dict[str, Any], *, audit: Audit | None = None, modern: bool = False,
    sse: bool = False, gates: BackendGates | None = None, max_concurrency: int = 0, pages: PageLimits | None = None,
    host: str = "main",
) -> Reply:
    backend = BackendView(id=3, name="rest", transport="", urls=(), timeout=2, kind="openapi", server=server,
                          max_concurrency=max_concurrency)
    vhost = VirtualHostView(1, "acme", host, MappingProxyType({"rest": backend}), MappingProxyType({}))
    headers = {"traceparent": TRACEPARENT, "accept": "text/event-stream" if sse else "application/json"}
    request = HttpRequest("POST", "acme", host, headers, json.dumps(message).encode())
    return await forwarder(audit=audit, gates=gates, pages=pages).direct(
        StatelessLeg(modern=modern), request, vhost, PRINCIPAL, classify(message), map_key="rest", wants_sse=sse)


def _request(method: str, params: dict[str, Any] | None = None, request_id: int = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def _call(name: str = "add", arguments: Any = None) -> dict[str, Any]:
    return _request("tools/call", {"name": name, "arguments": arguments})


async def _message(server: FakeTools, message: dict[str, Any], **options: Any) -> dict[str, Any]:
    reply = await _handle(server, message, **options)
    assert reply.status == 200
    return json.loads(reply.body)


async def test_ping() -> None:
    assert (await _message(FakeTools(), _request("ping")))["result"] == {}
    assert (await _message(FakeTools(), _request("ping"), modern=True))["result"] == {"resultType": "complete"}


async def test_tools_list_is_the_encoded_listing_as_is() -> None:
    reply = await _handle(FakeTools(), _request("tools/list", request_id=7))
    assert reply.body == b'{"jsonrpc":"2.0","id":7,"result":{"tools":' + LISTING + b"}}"
    result = (await _message(FakeTools(), _request("tools/list"), modern=True))["result"]
    assert result == {"resultType": "complete", "tools": json.loads(LISTING), "ttlMs": 0, "cacheScope": "private"}


async def test_a_listing_cursor_is_invalid_params() -> None:
    message = await _message(FakeTools(), _request("tools/list", {"cursor": "next"}))
    assert message["error"]["code"] == -32602


class ManyTools(FakeTools):
    """A tool server with 300 tools of about 1 KB each."""

    TOOLS = [{"name": f"op{i:03d}", "description": "d" * (900 + i % 50), "inputSchema": {"type": "object"}}
             for i in range(300)]
    LISTING = json.dumps(TOOLS).encode()

    def tools_json(self) -> bytes:
        return self.LISTING


@pytest.mark.parametrize("modern", [False, True])
async def test_a_list_bigger_than_a_page_is_paged_and_read_whole(modern: bool) -> None:
    server, limits = ManyTools(), PageLimits(items=1000, bytes=50_000)
    seen: list[Any] = []
    cursor, pages = None, 0
    while True:
        reply = await _handle(server, _request("tools/list", {"cursor": cursor} if cursor else None),
                              modern=modern, pages=limits)
        pages += 1
        assert len(reply.body) <= limits.bytes
        result = json.loads(reply.body)["result"]
        seen.extend(result["tools"])
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert seen == ManyTools.TOOLS and pages > len(ManyTools.LISTING) // limits.bytes
    few = await _handle(server, _request("tools/list"), pages=PageLimits(items=40))
    assert len(json.loads(few.body)["result"]["tools"]) == 40


async def test_a_cursor_of_another_host_or_a_tampered_one_is_refused() -> None:
    server, limits = ManyTools(), PageLimits(items=50)
    cursor = json.loads((await _handle(server, _request("tools/list"), pages=limits)).body)["result"]["nextCursor"]
    for host, token in (("other", cursor), ("main", cursor[:-2] + "AA")):
        message = json.loads((await _handle(server, _request("tools/list", {"cursor": token}), pages=limits,
                                            host=host)).body)
        assert message["error"]["code"] == -32602


async def test_tools_call_with_null_arguments_and_the_trace_context() -> None:
    server = FakeTools()
    message = await _message(server, _call(arguments=None))
    assert message["result"] == {"content": [{"type": "text", "text": "3"}], "isError": False}
    assert server.calls == [("add", {}, [("traceparent", TRACEPARENT)])]
    assert (await _message(server, _call(arguments={"a": 1}), modern=True))["result"]["resultType"] == "complete"


@pytest.mark.parametrize(("call", "words"), [
    (_call(arguments=[1, 2]), "'arguments' must be an object"),
    (_call(name="nope", arguments={}), "Unknown tool: nope"),
    (_request("tools/call", {"arguments": {}}), "needs the tool's 'name'"),
])
async def test_bad_tool_calls_are_invalid_params(call: dict[str, Any], words: str) -> None:
    server = FakeTools()
    message = await _message(server, call)
    assert message["error"]["code"] == -32602 and words in message["error"]["message"]
    assert server.calls == []


async def test_notifications_are_accepted_and_other_methods_not_found() -> None:
    reply = await _handle(FakeTools(), {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}})
    assert (reply.status, reply.body) == (202, b"")
    assert (await _message(FakeTools(), _request("prompts/list")))["error"]["code"] == -32601


async def test_a_result_can_be_one_sse_event() -> None:
    reply = await _handle(FakeTools(), _call(arguments={}), sse=True)
    assert ("content-type", "text/event-stream") in reply.headers
    assert reply.body.startswith(b"data: {") and b'"isError":false}}\n\n' in reply.body


async def test_every_call_is_audited_with_its_outcome() -> None:
    audit = Audit()
    await _handle(FakeTools(), _call(arguments={}), audit=audit)
    await _handle(FakeTools({"content": [], "isError": True}), _call(arguments={}), audit=audit)
    await _handle(FakeTools(), _call(name="nope", arguments={}), audit=audit)
    await _handle(FakeTools(), _request("tools/list"), audit=audit)  # not an audited method
    assert [(e.backend_kind, e.backend, e.exposed_name, e.outcome, e.error_code) for e in audit.entries] == [
        ("openapi", "rest", "add", "ok", None),
        ("openapi", "rest", "add", "tool_error", None),
        ("openapi", "rest", "nope", "error", -32602),
    ]
    assert all(e.trace_id == TRACEPARENT.split("-")[1] and e.bytes_out > 0 for e in audit.entries)


async def test_a_cancelled_call_is_audited_as_cancelled() -> None:
    audit = Audit()
    server = Hanging()
    task = asyncio.create_task(_handle(server, _call(arguments={}), audit=audit))
    await server.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [entry] = audit.entries
    assert (entry.outcome, entry.error_code, entry.bytes_out, entry.backend_kind) == ("cancelled", None, 0, "openapi")


@pytest.mark.parametrize("failure", [UpstreamUnavailable("cannot connect (ConnectionRefusedError)"), TimeoutError()])
async def test_a_service_that_cannot_answer_is_32004(failure: BaseException) -> None:
    audit = Audit()
    message = await _message(FakeTools(failure), _call(arguments={}), audit=audit)
    assert message["error"]["code"] == -32004 and message["error"]["data"] == {"backend": "rest"}
    assert "unavailable" in message["error"]["message"]
    [entry] = audit.entries
    assert (entry.outcome, entry.error_code) == ("error", -32004)


@pytest.mark.parametrize(("mode", "kept"), [
    ("off", None),
    ("full", {"a": 1, "b": [2]}),
])
def test_audited_arguments_follow_the_tenant_setting(mode: str, kept: object) -> None:
    from apps.gateway.pipeline.calls import arguments_kept

    assert arguments_kept(mode, {"a": 1, "b": [2]}, b"k" * 32) == kept


def test_hashed_arguments_are_keyed_and_stable() -> None:
    from apps.gateway.pipeline.calls import arguments_kept

    one = arguments_kept("hash", {"a": 1, "b": "secret"}, b"k" * 32)
    assert one == arguments_kept("hash", {"a": 1, "b": "secret"}, b"k" * 32)
    assert one is not None and set(one) == {"a", "b"} and len(one["a"]) == 64
    assert one != arguments_kept("hash", {"a": 1, "b": "secret"}, b"x" * 32)  # without the key, no match
    assert "secret" not in str(one)
    assert arguments_kept("hash", ["not", "a", "mapping"], b"k" * 32) is None


async def test_calls_to_a_service_at_its_concurrency_limit_wait_then_fail_as_busy_and_are_audited() -> None:
    server = Hanging()
    audit = Audit()
    gates = BackendGates(queue_seconds=0.05)

    def handle(request_id: int, method: str = "tools/call") -> Any:
        message = _request(method, {"name": "add", "arguments": {}} if method == "tools/call" else None, request_id)
        return _handle(server, message, audit=audit, gates=gates, max_concurrency=1)

    running = asyncio.ensure_future(handle(1))
    await server.started.wait()
    refused = json.loads((await handle(2)).body)
    assert refused["error"]["code"] == -32004 and "backend busy: 1 calls" in refused["error"]["message"]
    assert [(entry.outcome, entry.error_code) for entry in audit.entries] == [("error", -32004)]
    assert "tools" in json.loads((await handle(3, "tools/list")).body)["result"]  # only calls take a slot
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    server.started.clear()
    again = asyncio.ensure_future(handle(4))
    await asyncio.wait_for(server.started.wait(), 1)  # the cancelled call gave its slot back
    again.cancel()
