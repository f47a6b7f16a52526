"""MRTR for stateless clients (pipeline/input_required.py) with an in-process mailbox: what the
client sees of a backend's request, and how its retry continues the waiting call."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from apps.gateway.pipeline.input_required import (
    ForeignRequestState,
    InputRequests,
    UnknownRequestState,
    caller_of,
    request_key,
)
from apps.gateway.protocol.sse import SseEvent


class Box:
    """The Mailbox port in one process: what is posted reaches the open inboxes of that key."""

    def __init__(self) -> None:
        self.inboxes: dict[str, list[asyncio.Queue[bytes]]] = {}

    async def post(self, session_id: str, messages: Sequence[bytes]) -> None:
        for queue in self.inboxes.get(session_id, []):
            for message in messages:
                queue.put_nowait(message)

    async def open(self, session_id: str, *, replace: bool = False) -> Any:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.inboxes.setdefault(session_id, []).append(queue)
        box = self

        class Inbox:
            ended = False

            async def get(self, timeout: float) -> bytes | None:
                try:
                    return await asyncio.wait_for(queue.get(), timeout)
                except TimeoutError:
                    return None

            def close(self) -> None:
                if queue in box.inboxes.get(session_id, []):
                    box.inboxes[session_id].remove(queue)

        return Inbox()


class BackendCall:
    """A backend's answer to one call as events; what the gateway sends back is fed in by `respond`."""

    status = 200
    headers: dict[str, str] = {"content-type": "text/event-stream"}
    content_type = "text/event-stream"

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self._queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        for message in script:
            self._queue.put_nowait(message)
        self.answers: list[dict[str, Any]] = []
        self.closed = False

    async def respond(self, body: bytes) -> None:
        answer = json.loads(body)
        self.answers.append(answer)
        # The backend goes on once answered: progress, then its response.
        self._queue.put_nowait({"jsonrpc": "2.0", "method": "notifications/progress",
                                "params": {"progressToken": "gw-7", "progress": 1}})
        self._queue.put_nowait({"jsonrpc": "2.0", "id": "gw-7", "result": {"content": [], "echo": answer["result"]}})

    async def read(self, limit: int = 0) -> bytes:
        return b""

    async def events(self) -> AsyncIterator[SseEvent]:
        while (message := await self._queue.get()) is not None:
            yield SseEvent(json.dumps(message).encode())

    def close(self) -> None:
        self.closed = True


SAMPLING = {"jsonrpc": "2.0", "id": 0, "method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}


ALICE_HERE = caller_of(1, "main", 1)


async def _first_answer(inputs: InputRequests, call: BackendCall, caller: str = ALICE_HERE) -> dict[str, Any]:
    reply = inputs.intercept(call, upstream_id="gw-7", caller=caller, respond=call.respond)
    events = [json.loads(event.data) async for event in reply.events()]
    assert len(events) == 1
    return events[0]


async def test_a_backend_request_becomes_an_input_required_result_and_the_retry_continues_the_call() -> None:
    inputs = InputRequests(Box(), wait_seconds=5)
    call = BackendCall([SAMPLING])
    required = await _first_answer(inputs, call)
    result = required["result"]
    assert required["id"] == "gw-7" and result["resultType"] == "input_required"
    [(key, request)] = result["inputRequests"].items()
    assert request == {"method": "sampling/createMessage", "params": SAMPLING["params"]}
    assert request_key({"requestState": result["requestState"]}) == key
    assert not call.closed  # the backend's call waits

    answer = {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}
    rest = await inputs.resume(key, caller=ALICE_HERE, responses={key: answer}, upstream_id="gw-9", timeout=5)
    messages = [json.loads(event.data) async for event in rest.events()]
    assert call.answers == [{"jsonrpc": "2.0", "id": 0, "result": answer}]  # to the backend's own request id
    assert messages[0]["params"]["progressToken"] == "gw-9"  # the retry's terms
    assert messages[-1]["id"] == "gw-9" and messages[-1]["result"]["echo"] == answer
    await asyncio.sleep(0)
    assert call.closed


async def test_a_request_state_nobody_holds_is_refused_quickly() -> None:
    inputs = InputRequests(Box())
    with pytest.raises(UnknownRequestState):
        await inputs.resume("no-such-key", caller=ALICE_HERE, responses={}, upstream_id="gw-1", timeout=5)


@pytest.mark.parametrize("other", [caller_of(1, "main", 2), caller_of(1, "other-host", 1), caller_of(2, "main", 1)])
async def test_another_caller_or_host_cannot_continue_the_call(other: str) -> None:
    box = Box()
    inputs = InputRequests(box, secret=b"s" * 32, wait_seconds=5)
    call = BackendCall([SAMPLING])
    key = request_key((await _first_answer(inputs, call))["result"])
    assert key is not None
    posted = dict(box.inboxes)
    # Refused by its tag on any instance of the deployment, before anything is posted.
    with pytest.raises(ForeignRequestState):
        await InputRequests(box, secret=b"s" * 32).resume(key, caller=other, responses={key: {}}, upstream_id="gw-9",
                                                          timeout=5)
    assert box.inboxes == posted
    assert call.answers == [] and not call.closed  # nothing reached the backend, whose call still waits
    rest = await inputs.resume(key, caller=ALICE_HERE, responses={key: {"action": "accept"}}, upstream_id="gw-9",
                               timeout=5)
    assert [json.loads(event.data) async for event in rest.events()][-1]["id"] == "gw-9"


async def test_a_client_that_never_retries_ends_the_backend_call() -> None:
    inputs = InputRequests(Box(), wait_seconds=0.05)
    call = BackendCall([SAMPLING])
    await _first_answer(inputs, call)
    await asyncio.sleep(0.2)
    assert call.closed and call.answers == []


def test_only_the_gateways_request_states_are_taken() -> None:
    assert request_key({"requestState": "gw-input.abc123def"}) == "abc123def"
    assert request_key({"requestState": "some-backend-state"}) is None
    assert request_key({"requestState": 7}) is None
    assert request_key({}) is None
