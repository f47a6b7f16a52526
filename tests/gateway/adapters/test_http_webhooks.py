"""The webhook port (`adapters/http_webhooks.py`) against a real service on loopback: requests are
signed so that the service's documented check passes, its decisions come back as decisions, and
everything else — a timeout, an HTTP error, a body that is not a decision, an address the SSRF
guard refuses — is HookFailed saying which."""

from __future__ import annotations

import httpx
import pytest

from apps.gateway.adapters.http_webhooks import HttpHooks
from apps.gateway.pipeline.ports import HookFailed
from apps.kernel.interceptors import Webhook
from apps.kernel.interceptors.webhook import HookRequest
from tests.backends.webhook_service import KEY

REQUEST: HookRequest = {
    "interceptor": "review", "phase": "request", "method": "tools/call", "target": "echo", "virtual_host": "main",
    "caller": {"tenant": "acme", "key": "agent"}, "trace_id": "",
    "payload": {"name": "echo", "arguments": {"text": "hello"}},
}


def _hook(url: str, *, key: bytes = KEY.encode(), timeout: float = 2.0, allow_private: bool = True) -> Webhook:
    return Webhook(url, key, timeout, False, allow_private)


async def test_a_signed_request_gets_the_services_decision(webhook_service_url: str) -> None:
    httpx.post(f"{webhook_service_url}/__reset")
    hooks = HttpHooks()
    rewrite = await hooks.ask(_hook(f"{webhook_service_url}/rewrite"), REQUEST)
    refuse = await hooks.ask(_hook(f"{webhook_service_url}/refuse"), REQUEST)
    passed = await hooks.ask(_hook(f"{webhook_service_url}/pass"), REQUEST)
    hooks.close()
    assert rewrite.action == "rewrite" and rewrite.payload is not None
    assert rewrite.payload.value == {"name": "echo", "arguments": {"text": "checked"}}
    assert (refuse.action, refuse.reason) == ("refuse", "the service says no")
    assert passed.action == "pass"
    recorded = httpx.get(f"{webhook_service_url}/__recorded").json()
    assert [r["signature_valid"] for r in recorded] == [True, True, True]
    assert recorded[0]["body"] == REQUEST


@pytest.mark.parametrize(("path", "kind", "words"), [
    ("/slow/1", "timeout", "no answer within 0.2 s"),
    ("/garbage", "bad_answer", "its answer is not JSON"),
    ("/pass", "bad_answer", "it answered HTTP 401"),  # signed with another key: the service refuses it
])
async def test_no_usable_answer_is_hook_failed_saying_why(webhook_service_url: str, path: str, kind: str,
                                                          words: str) -> None:
    key = b"another key" if path == "/pass" else KEY.encode()
    with pytest.raises(HookFailed) as failed:
        await HttpHooks().ask(_hook(f"{webhook_service_url}{path}", key=key, timeout=0.2), REQUEST)
    assert failed.value.kind == kind and words in str(failed.value)


async def test_the_ssrf_guard_applies() -> None:
    hooks = HttpHooks()
    with pytest.raises(HookFailed) as metadata:  # link-local: never, whatever the tenant allows
        await hooks.ask(_hook("https://169.254.169.254/latest/meta-data/"), REQUEST)
    with pytest.raises(HookFailed) as loopback:  # private: only for a tenant that allows private networks
        await hooks.ask(_hook("http://127.0.0.1:9/hook", allow_private=False), REQUEST)
    assert metadata.value.kind == loopback.value.kind == "unavailable"
    assert "not allowed" in str(metadata.value) and "not allowed" in str(loopback.value)
