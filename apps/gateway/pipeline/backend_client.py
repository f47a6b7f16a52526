"""The gateway as an MCP client of its backends, for requests it makes on its own behalf — the
list pages it merges for multi-backend virtual hosts — rather than on behalf of one caller.

A backend that speaks the stateless era gets each request with the gateway's own envelope. One that
speaks only the handshake era gets it in a session this process opens once per backend and keeps
(re-opened when the backend forgets it). A backend the gateway answers itself (`ToolServer`) is
asked directly."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from apps.gateway.pipeline.backends import (
    ACCEPT,
    CONTENT_JSON,
    GATEWAY_INFO,
    BackendCatalog,
    BackendRefused,
    HeldSessions,
    egress_headers,
    first_response,
    open_session,
    session_headers,
    sized_response,
)
from apps.gateway.pipeline.ports import ReplicaUnreachable, Upstream
from apps.gateway.pipeline.values import BackendInfo, BackendSession, BackendView
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.versions import (
    LATEST_LEGACY,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
)
from apps.kernel.identity import Principal

_ids = itertools.count(1)
#: The capability each list needs the backend to declare (`initialize` or `server/discover`).
LIST_CAPABILITY = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources",
                   "resources/templates/list": "resources"}


class RemoteError(BackendRefused):
    """The backend answered the request with a JSON-RPC error."""

    def __init__(self, method: str, error: object) -> None:
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        super().__init__(f"{method} failed: {code} {message}")
        self.code = code


def _capabilities(info: BackendInfo) -> Any:
    return info.modern_capabilities if info.modern_versions else info.legacy_capabilities


def offers(info: BackendInfo, method: str) -> bool:
    """Whether the backend declared the capability a list method belongs to."""
    return LIST_CAPABILITY.get(method, "") in _capabilities(info)


def announces_changes(info: BackendInfo) -> bool:
    """Whether a stateless-era backend tells subscribers when its lists change (`listChanged`)."""
    capabilities = info.modern_capabilities
    return bool(info.modern_versions) and any(
        isinstance(capabilities.get(name), dict) and capabilities[name].get("listChanged") is True
        for name in ("tools", "prompts", "resources")
    )


class BackendClient:
    def __init__(self, upstream: Upstream, backends: BackendCatalog) -> None:
        self._upstream = upstream
        self._backends = backends
        self._sessions = HeldSessions()

    async def info(self, backend: BackendView) -> BackendInfo:
        return await self._backends.info(backend)

    async def request(self, backend: BackendView, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The result of `method`; raises RemoteError for a JSON-RPC error, BackendRefused for an
        answer that is not one, UpstreamUnavailable or TimeoutError when there is no answer."""
        return (await self.sized_request(backend, method, params))[0]

    async def sized_request(
        self, backend: BackendView, method: str, params: dict[str, Any], *, max_bytes: int | None = None
    ) -> tuple[dict[str, Any], int]:
        """`request`, and how many bytes the answer took; an answer over `max_bytes` raises
        ResponseTooLarge before it is read whole (a list page: `listing.collect_all_pages`)."""
        info = await self._backends.info(backend)
        if info.modern_versions:
            version = next(v for v in reversed(MODERN_VERSIONS) if v in info.modern_versions)
            envelope = {META_PROTOCOL_VERSION: version, META_CLIENT_CAPABILITIES: {}, META_CLIENT_INFO: GATEWAY_INFO}
            body = {"jsonrpc": "2.0", "id": f"gw-own-{next(_ids)}", "method": method,
                    "params": {**params, "_meta": envelope}}
            headers = [CONTENT_JSON, ACCEPT, ("mcp-protocol-version", version), ("mcp-method", method),
                       *await egress_headers(backend, None)]
            reply = await self._upstream.send(
                backend, self._backends.replicas.pick(backend, None), "POST", headers, jsonrpc.dumps(body),
                timeout=backend.timeout,
            )
            return _sized_result(method, await sized_response(reply, max_bytes))
        body = {"jsonrpc": "2.0", "id": f"gw-own-{next(_ids)}", "method": method, "params": params}
        for _ in range(2):
            session = await self._session(backend)
            headers = [CONTENT_JSON, ACCEPT, *session_headers(session), *await egress_headers(backend, None)]
            try:
                reply = await self._upstream.send(
                    backend, session.replica, "POST", headers, jsonrpc.dumps(body), timeout=backend.timeout
                )
            except ReplicaUnreachable:  # nothing was sent, and the replica is now marked down
                self._sessions.forget((backend.id, backend.urls))
                continue
            if reply.status == 404 and session.session_id:
                reply.close()  # the backend forgot the session (restarted, idle expiry): open another
                self._sessions.forget((backend.id, backend.urls))
                continue
            return _sized_result(method, await sized_response(reply, max_bytes))
        raise BackendRefused("the backend keeps losing the gateway's session")

    async def listen(
        self,
        backend: BackendView,
        notifications: dict[str, Any],
        *,
        on_acknowledged: Callable[[dict[str, Any]], object],
        on_message: Callable[[dict[str, Any]], object],
        principal: Principal | None = None,
        capabilities: dict[str, Any] | None = None,
    ) -> None:
        """Hold a `subscriptions/listen` stream (2026-07-28) asking for `notifications` (the filter)
        until it ends: `on_acknowledged(params)` hears the acknowledgement (what the backend honours),
        `on_message(message)` every notification after it. `principal`: whom it listens for (the
        backend's credentials may be the caller's); `capabilities`: the client's it declares."""
        info = await self._backends.info(backend)
        version = next(v for v in reversed(MODERN_VERSIONS) if v in info.modern_versions)
        envelope = {META_PROTOCOL_VERSION: version, META_CLIENT_CAPABILITIES: capabilities or {},
                    META_CLIENT_INFO: GATEWAY_INFO}
        params = {"notifications": notifications, "_meta": envelope}
        body = {"jsonrpc": "2.0", "id": f"gw-listen-{next(_ids)}", "method": "subscriptions/listen", "params": params}
        headers = [CONTENT_JSON, ACCEPT, ("mcp-protocol-version", version), ("mcp-method", "subscriptions/listen"),
                   *await egress_headers(backend, principal)]
        reply = await self._upstream.send(
            backend, self._backends.replicas.pick(backend, None), "POST", headers, jsonrpc.dumps(body),
            timeout=backend.timeout,
        )
        try:
            if reply.content_type != "text/event-stream":
                _result("subscriptions/listen", await first_response(reply))  # raises its error
                raise BackendRefused("subscriptions/listen answered without a stream")
            async for event in reply.events():
                try:
                    message = jsonrpc.loads(event.data) if event.data else None
                except ValueError:
                    continue
                if not isinstance(message, dict):
                    continue
                method = message.get("method")
                if method == "notifications/subscriptions/acknowledged":
                    acknowledged = message.get("params")
                    on_acknowledged(acknowledged if isinstance(acknowledged, dict) else {})
                elif isinstance(method, str):
                    on_message(message)
                elif "error" in message:
                    raise RemoteError("subscriptions/listen", message["error"])
        finally:
            reply.close()

    async def _session(self, backend: BackendView) -> BackendSession:
        key = (backend.id, backend.urls)

        async def open_one() -> BackendSession:
            session, _ = await open_session(
                self._upstream, backend, self._backends.replicas.pick(backend, None), version=LATEST_LEGACY,
                capabilities={}, client_info=GATEWAY_INFO,
            )
            return session

        return await self._sessions.get(key, open_one, is_up=self._backends.replicas.is_up)


def _result(method: str, message: dict[str, Any]) -> dict[str, Any]:
    result = message.get("result")
    if isinstance(result, dict):
        return result
    raise RemoteError(method, message.get("error"))


def _sized_result(method: str, answer: tuple[dict[str, Any], int]) -> tuple[dict[str, Any], int]:
    return _result(method, answer[0]), answer[1]
