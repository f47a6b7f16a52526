"""The `InterceptorHooks` port: webhook interceptors asked over the gateway's pooled HTTP client,
each request signed (`apps.kernel.interceptors.webhook`), the SSRF guard applied as for backends
(the tenant's private-networks setting; link-local and metadata addresses never)."""

from __future__ import annotations

import asyncio
import time

import orjson

from apps.gateway.adapters.http_pool import AddressNotAllowed, BodyTooLarge, HttpPool, Target, UpstreamHttpError
from apps.gateway.pipeline.ports import HookFailed
from apps.kernel.interceptors import Webhook
from apps.kernel.interceptors.base import Decision
from apps.kernel.interceptors.webhook import SIGNATURE_HEADER, BadAnswer, HookRequest, decision_of, signature

#: The most of a service's answer the gateway reads (a rewritten result comes back whole).
MAX_ANSWER_BYTES = 16 * 1024 * 1024


class HttpHooks:
    """One keep-alive pool per webhook origin (and private-networks setting), bound to the event
    loop of the gateway that owns it."""

    def __init__(self, *, max_answer_bytes: int = MAX_ANSWER_BYTES) -> None:
        self._pools: dict[tuple[str, str, int, bool], HttpPool] = {}
        self._max_answer = max_answer_bytes

    def _pool(self, webhook: Webhook) -> tuple[HttpPool, str]:
        target = Target.from_url(webhook.url)
        key = (target.scheme, target.host, target.port, webhook.allow_private)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = HttpPool(target, allow_private=webhook.allow_private)
        return pool, target.path

    async def ask(self, webhook: Webhook, request: HookRequest) -> Decision:
        body = orjson.dumps(request)
        headers = [
            ("content-type", "application/json"),
            ("accept", "application/json"),
            (SIGNATURE_HEADER, signature(webhook.key, int(time.time()), body)),
        ]
        try:
            pool, path = self._pool(webhook)
        except ValueError as exc:  # checked when configured; a URL Python reads otherwise now still fails here
            raise HookFailed(f"its URL cannot be used: {exc}", kind="error") from None
        response = None
        try:
            async with asyncio.timeout(webhook.timeout):
                response = await pool.request("POST", path, headers, body, timeout=webhook.timeout)
                answer = await response.read(self._max_answer)
        except TimeoutError:
            if response is not None:
                response.aclose()
            raise HookFailed(f"no answer within {webhook.timeout:g} s", kind="timeout") from None
        except AddressNotAllowed as exc:
            raise HookFailed(f"its address is not allowed: {exc}", kind="unavailable") from None
        except BodyTooLarge:
            raise HookFailed(f"its answer is over {self._max_answer:,} bytes", kind="bad_answer") from None
        except (UpstreamHttpError, OSError) as exc:
            raise HookFailed(f"unreachable: {exc}", kind="unavailable") from None
        if response.status != 200:
            raise HookFailed(f"it answered HTTP {response.status}", kind="bad_answer")
        try:
            return decision_of(orjson.loads(answer), request["phase"])
        except orjson.JSONDecodeError:
            raise HookFailed("its answer is not JSON", kind="bad_answer") from None
        except BadAnswer as exc:
            raise HookFailed(f"its answer is not a decision: {exc}", kind="bad_answer") from None

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
