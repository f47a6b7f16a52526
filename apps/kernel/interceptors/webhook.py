"""What a webhook interceptor sends and what its answer may say (docs/interceptors.md#webhooks).
Pure: the pipeline's port posts the request; this module shapes it, signs it and reads the answer.

The request is JSON (`HookRequest`), signed like this: the header
`Gateway-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" under the tenant secret>`.
A service checks the signature and that `t` is recent, then answers 200 with a `HookAnswer`:
`{"action": "pass"}`, `{"action": "refuse", "reason": "..."}` or `{"action": "rewrite", "payload": …}`
(the whole payload as it goes on: the request's `params`, or the JSON-RPC response)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, NotRequired, TypedDict

from apps.kernel.interceptors.base import PASS, Decision, Payload

SIGNATURE_HEADER = "gateway-signature"
#: The longest reason a refusal keeps from a service's answer.
MAX_REASON = 500


class HookCaller(TypedDict):
    tenant: str
    key: str  # the API key's name, or the access token's subject
    team: NotRequired[str]


class HookRequest(TypedDict):
    """What a webhook receives."""

    interceptor: str
    phase: str  # request | result
    method: str  # tools/call | resources/read | prompts/get
    target: str  # the tool or prompt name as the client called it, or the resource URI
    virtual_host: str
    caller: HookCaller
    trace_id: str
    payload: Any  # request: the call's params; result: the JSON-RPC response


class HookAnswer(TypedDict):
    action: str  # pass | rewrite | refuse
    reason: NotRequired[str]
    payload: NotRequired[Any]


def signature(key: bytes, timestamp: int, body: bytes) -> str:
    """The `Gateway-Signature` header value of `body`, sent at `timestamp`."""
    digest = hmac.new(key, b"%d." % timestamp + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


class BadAnswer(ValueError):
    """The service's answer is not a decision (the words say why)."""


def decision_of(answer: object, phase: str) -> Decision:
    """The decision a service's parsed answer states; BadAnswer for anything else. A rewrite must
    give a payload of the same shape: an object, and on the result side a JSON-RPC response (a
    `result` or an `error`, not both), so a service cannot make the client read something that is
    not an answer to its call."""
    if not isinstance(answer, dict):
        raise BadAnswer("the answer is not a JSON object")
    action = answer.get("action")
    if action == "pass":
        return PASS
    if action == "refuse":
        reason = answer.get("reason")
        reason = reason[:MAX_REASON] if isinstance(reason, str) and reason.strip() else "refused by an outside service"
        return Decision("refuse", reason=reason)
    if action != "rewrite":
        raise BadAnswer(f"action must be pass, rewrite or refuse, not {str(action)[:40]!r}")
    payload = answer.get("payload")
    if not isinstance(payload, dict):
        raise BadAnswer("a rewrite must give the payload as a JSON object")
    if phase == "result" and ("result" in payload) == ("error" in payload):
        raise BadAnswer("a rewritten result must hold a result or an error")
    if phase == "result" and "result" in payload and not isinstance(payload["result"], dict):
        raise BadAnswer("a rewritten result's result must be an object")
    if phase == "result" and "error" in payload and not (
            isinstance(payload["error"], dict) and isinstance(payload["error"].get("code"), int)
            and isinstance(payload["error"].get("message"), str)):
        raise BadAnswer("a rewritten error must have an integer code and a message")
    reason = answer.get("reason")
    return Decision("rewrite", payload=Payload(value=payload),
                    reason=reason[:MAX_REASON] if isinstance(reason, str) else "")
