"""A composed host's handshake-era session (`legacy_composed.py`): a client's answer to a request a
backend made during a task goes to that backend with the backend's own ids — the request's, and the
task's it names in `_meta`."""

from __future__ import annotations

import json
from typing import Any

from apps.gateway.pipeline.legacy_composed import ComposedLegacy
from apps.gateway.pipeline.task_ids import RELATED_TASK
from apps.gateway.pipeline.values import HttpRequest, SessionState
from apps.gateway.protocol.jsonrpc import classify
from tests.gateway.pipeline.test_forwarder import VHOST, Answer, Scripted
from tests.gateway.pipeline.test_gateway import PRINCIPAL, StatelessLeg, forwarder


async def test_an_answer_to_a_tasks_request_names_the_task_as_the_backend_knows_it() -> None:
    upstream = Scripted(Answer(status=202, content_type=""))
    relay = forwarder(upstream)
    composed = ComposedLegacy(forwarder=relay, lists=relay._lists, backends=relay._backends,
                              backend_sessions=None)  # type: ignore[arg-type]  # answers open no session
    # What the backend under "calc" sends shows its task "t-7" under the host's id for this caller.
    shown = relay.backend_messages(VHOST, PRINCIPAL, "calc")({"jsonrpc": "2.0", "id": 3, "method": "elicitation/create",
                                                              "params": {"_meta": {RELATED_TASK: {"taskId": "t-7"}}}})
    exposed = shown["params"]["_meta"][RELATED_TASK]["taskId"]
    assert exposed != "t-7"
    answer: dict[str, Any] = {"jsonrpc": "2.0", "id": shown["id"], "result": {
        "action": "accept", "content": {}, "_meta": {RELATED_TASK: {"taskId": exposed}}}}
    request = HttpRequest("POST", "acme", "main", {}, json.dumps(answer).encode())
    state = SessionState("s-1", 1, "main", 1, "2025-11-25", {}, {})
    leg = StatelessLeg()
    leg.session_id = "s-1"
    reply = await composed.handle(leg, request, VHOST, PRINCIPAL, state, classify(answer), False)
    assert reply.status == 202
    (sent,) = [json.loads(body) for _, body in upstream.sent]
    assert sent["id"] == 3 and sent["result"]["_meta"][RELATED_TASK] == {"taskId": "t-7"}
