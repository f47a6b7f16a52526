"""MRTR for stateless clients (pipeline/input_required.py) with an in-process mailbox: what the
client sees of a backend's request, and how its retry continues the waiting call."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apps.gateway.pipeline.input_required import (
    ForeignRequestState,
    InputRequests,
    UnknownRequestState,
    caller_of,
    request_key,
)
from apps.gateway.pipeline.standalone import LocalMailbox
from apps.gateway.protocol.sse import SseEvent


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
    inputs = InputRequests(LocalMailbox(), wait_seconds=5)
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
    inputs = InputRequests(LocalMailbox())
    with pytest.raises(UnknownRequestState):
        await inputs.resume("no-such-key", caller=ALICE_HERE, responses={}, upstream_id="gw-1", timeout=5)


@pytest.mark.parametrize("other", [caller_of(1, "main", 2), caller_of(1, "other-host", 1), caller_of(2, "main", 1)])
async def test_another_caller_or_host_cannot_continue_the_call(other: str) -> None:
    box = LocalMailbox()
    inputs = InputRequests(box, secret=b"s" * 32, wait_seconds=5)
    call = BackendCall([SAMPLING])
    key = request_key((await _first_answer(inputs, call))["result"])
    assert key is not None
    posted = {key: list(inboxes) for key, inboxes in box.inboxes.items()}
    # Refused by its tag on any instance of the deployment, before anything is posted.
    with pytest.raises(ForeignRequestState):
        await InputRequests(box, secret=b"s" * 32).resume(key, caller=other, responses={key: {}}, upstream_id="gw-9",
                                                          timeout=5)
    assert box.inboxes == posted and all(inbox.queue.empty() for inboxes in posted.values() for inbox in inboxes)
    assert call.answers == [] and not call.closed  # nothing reached the backend, whose call still waits
    rest = await inputs.resume(key, caller=ALICE_HERE, responses={key: {"action": "accept"}}, upstream_id="gw-9",
                               timeout=5)
    assert [json.loads(event.data) async for event in rest.events()][-1]["id"] == "gw-9"


async def test_a_client_that_never_retries_ends_the_backend_call() -> None:
    inputs = InputRequests(LocalMailbox(), wait_seconds=0.05)
    call = BackendCall([SAMPLING])
    await _first_answer(inputs, call)
    await asyncio.sleep(0.2)
    assert call.closed and call.answers == []


def test_only_the_gateways_request_states_are_taken() -> None:
    assert request_key({"requestState": "gw-input.abc123def"}) == "abc123def"
    assert request_key({"requestState": "some-backend-state"}) is None
    assert request_key({"requestState": 7}) is None
    assert request_key({}) is None
