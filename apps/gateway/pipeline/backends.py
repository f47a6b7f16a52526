"""Talking to a backend as an MCP client: learning what it speaks (probed once per process and
cached) and opening the legacy sessions the gateway keeps with it."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from apps.gateway.pipeline.ports import (
    CredentialUnavailable,
    HealthFeed,
    ResponseTooLarge,
    Upstream,
    UpstreamReply,
    UpstreamUnavailable,
)
from apps.gateway.pipeline.replicas import ROUTING_HASH_HEADER, ReplicaHealth, routing_hash
from apps.gateway.pipeline.values import BackendInfo, BackendSession, BackendView
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.versions import (
    LATEST_LEGACY,
    LATEST_MODERN,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    MODERN_VERSIONS,
    Implementation,
)
from apps.kernel.identity import Principal
from apps.kernel.singleflight import SingleFlight

log = logging.getLogger(__name__)

GATEWAY_INFO: Implementation = {"name": "mcp-gateway", "title": "MCP Gateway", "version": "0.1.0"}
ACCEPT = ("accept", "application/json, text/event-stream")
CONTENT_JSON = ("content-type", "application/json")
_ids = itertools.count(1)


class BackendRefused(Exception):
    """The backend answered, but not with what the gateway asked for."""


async def egress_headers(backend: BackendView, principal: Principal | None) -> tuple[tuple[str, str], ...]:
    """The headers that authenticate a request to `backend` on behalf of `principal` (None: the
    gateway's own); raises CredentialUnavailable (an UpstreamUnavailable). Every request to a
    backend carries these and no credential of the caller's: inbound tokens are never forwarded."""
    return () if backend.egress is None else await backend.egress.headers(principal)


async def first_response(reply: UpstreamReply) -> dict[str, Any]:
    """The JSON-RPC response carried by a reply, JSON or SSE. Notifications before it are dropped:
    only the gateway's own requests (probes, initialize, list pages) come through here."""
    return (await sized_response(reply))[0]


async def sized_response(reply: UpstreamReply, limit: int | None = None) -> tuple[dict[str, Any], int]:
    """`first_response`, and how many bytes the answer took (a stream: the data of its events up
    to the response). With `limit`, an answer over that many bytes raises ResponseTooLarge as soon
    as it is known, before the rest is read."""
    size = 0
    try:
        if reply.content_type == "text/event-stream":
            async for event in reply.events():
                size += len(event.data)
                if limit is not None and size > limit:
                    raise ResponseTooLarge(f"response over {limit:,} bytes, the gateway's limit", limit)
                if not event.data:
                    continue
                try:
                    message = jsonrpc.loads(event.data)
                except ValueError:
                    raise BackendRefused("the stream carries an event that is not JSON") from None
                if isinstance(message, dict) and ("result" in message or "error" in message):
                    return message, size
            raise BackendRefused("the stream ended without a response")
        body = await (reply.read() if limit is None else reply.read(limit))
    finally:
        reply.close()
    if reply.status >= 300 and not body.startswith(b"{"):
        raise BackendRefused(f"HTTP {reply.status}")
    try:
        message = jsonrpc.loads(body)
    except ValueError:
        raise BackendRefused(f"HTTP {reply.status} with a body that is not JSON") from None
    if not isinstance(message, dict):
        raise BackendRefused("the response is not a JSON object")
    return message, len(body)


async def open_session(
    upstream: Upstream,
    backend: BackendView,
    replica: str,
    *,
    version: str,
    capabilities: Any,
    client_info: Any,
    principal: Principal | None = None,
    affinity: str | None = None,
) -> tuple[BackendSession, dict[str, Any]]:
    """Run the initialize handshake with a backend replica on behalf of `principal` (None: the
    gateway itself); returns the session and its result. `affinity` (a downstream session id, or
    what the gateway's own session is kept for) gives the session its routing hash."""
    auth = await egress_headers(backend, principal)
    hashed = routing_hash(affinity) if affinity is not None else ""
    if hashed:
        auth = (*auth, (ROUTING_HASH_HEADER, hashed))
    request = {
        "jsonrpc": "2.0",
        "id": f"gw-init-{next(_ids)}",
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": client_info},
    }
    reply = await upstream.send(
        backend, replica, "POST", [CONTENT_JSON, ACCEPT, *auth], jsonrpc.dumps(request), timeout=backend.timeout
    )
    session_id = reply.headers.get("mcp-session-id")
    message = await first_response(reply)
    result = message.get("result")
    if not isinstance(result, dict):
        raise BackendRefused(f"initialize failed: {message.get('error')}")
    negotiated = result.get("protocolVersion")
    if not isinstance(negotiated, str):
        raise BackendRefused("initialize result carries no protocolVersion")
    headers = [CONTENT_JSON, ACCEPT, ("mcp-protocol-version", negotiated), *auth]
    if session_id:
        headers.append(("mcp-session-id", session_id))
    ack = await upstream.send(
        backend, replica, "POST", headers,
        jsonrpc.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), timeout=backend.timeout,
    )
    await ack.read()
    return BackendSession(session_id, negotiated, replica, hashed), result


def session_headers(session: BackendSession) -> list[tuple[str, str]]:
    """What every request in a backend session carries: the negotiated version, the session id
    (when the backend gave one) and the routing hash."""
    headers = [("mcp-protocol-version", session.version)]
    if session.session_id:
        headers.append(("mcp-session-id", session.session_id))
    if session.routing_hash:
        headers.append((ROUTING_HASH_HEADER, session.routing_hash))
    return headers


class HeldSessions:
    """Backend sessions this process opened for itself and keeps, one per key: concurrent first
    users wait for the one `initialize`; a session the backend forgot is `forget`-ten and re-opened."""

    def __init__(self) -> None:
        self._sessions: dict[Hashable, BackendSession] = {}
        self._opening: dict[Hashable, asyncio.Lock] = {}

    async def get(
        self, key: Hashable, open_one: Callable[[], Awaitable[BackendSession]],
        *, is_up: Callable[[str], bool] | None = None,
    ) -> BackendSession:
        """The key's session, opened by `open_one` if there is none; with `is_up`, a session whose
        replica is down is forgotten and opened again (on a replica that is up)."""
        session = self._sessions.get(key)
        if session is not None and is_up is not None and not is_up(session.replica):
            self.forget(key)
            session = None
        if session is not None:
            return session
        async with self._opening.setdefault(key, asyncio.Lock()):
            session = self._sessions.get(key)
            if session is None:
                session = self._sessions[key] = await open_one()
        return session

    def forget(self, key: Hashable) -> None:
        self._sessions.pop(key, None)


async def close_session(
    upstream: Upstream, backend: BackendView, session: BackendSession, principal: Principal | None = None
) -> None:
    """End a backend session (opened for `principal`); a backend that is gone or refuses (405) is
    not an error here."""
    if not session.session_id:
        return
    headers = session_headers(session)
    try:
        headers.extend(await egress_headers(backend, principal))
        reply = await upstream.send(backend, session.replica, "DELETE", headers, timeout=5.0)
        await reply.read()
    except (UpstreamUnavailable, TimeoutError):
        log.info("could not close session on backend %s", backend.name)


async def _discover(
    upstream: Upstream, backend: BackendView, replica: str, principal: Principal | None
) -> dict[str, Any] | None:
    request = {
        "jsonrpc": "2.0",
        "id": f"gw-discover-{next(_ids)}",
        "method": "server/discover",
        "params": {
            "_meta": {
                META_PROTOCOL_VERSION: LATEST_MODERN,
                META_CLIENT_CAPABILITIES: {},
                META_CLIENT_INFO: GATEWAY_INFO,
            }
        },
    }
    headers = [CONTENT_JSON, ACCEPT, ("mcp-protocol-version", LATEST_MODERN), ("mcp-method", "server/discover"),
               *await egress_headers(backend, principal)]
    reply = await upstream.send(backend, replica, "POST", headers, jsonrpc.dumps(request), timeout=backend.timeout)
    try:
        message = await first_response(reply)
    except BackendRefused:
        return None
    result = message.get("result")
    if not isinstance(result, dict):
        return None
    supported = result.get("supportedVersions")
    if not isinstance(supported, list) or not any(v in MODERN_VERSIONS for v in supported):
        return None
    return result


async def probe(upstream: Upstream, backend: BackendView, replica: str, principal: Principal | None = None) -> BackendInfo:
    """Ask a backend (at one of its replicas) which eras it speaks and what it offers in each, with
    the credential of `principal` (None: the gateway's own)."""
    if backend.transport not in {"streamable-http", "sse"}:
        raise BackendRefused(f"the {backend.transport!r} transport is not supported")
    # HTTP+SSE predates the stateless era: nothing to discover there.
    discovered = await _discover(upstream, backend, replica, principal) if backend.transport == "streamable-http" else None
    legacy: dict[str, Any] | None = None
    legacy_version: str | None = None
    try:
        session, legacy = await open_session(
            upstream, backend, replica, version=LATEST_LEGACY, capabilities={}, client_info=GATEWAY_INFO,
            principal=principal,
        )
        legacy_version = session.version
        await close_session(upstream, backend, session, principal)
    except BackendRefused:
        if discovered is None:
            raise
    modern_versions = tuple(v for v in (discovered or {}).get("supportedVersions", ()) if v in MODERN_VERSIONS)
    server_info: Any = (legacy or {}).get("serverInfo") or ((discovered or {}).get("_meta") or {}).get(
        META_SERVER_INFO
    )
    instructions = (legacy or discovered or {}).get("instructions")
    return BackendInfo(
        legacy_version=legacy_version,
        legacy_capabilities=(legacy or {}).get("capabilities") or {},
        modern_versions=modern_versions,
        modern_capabilities=(discovered or {}).get("capabilities") or {},
        server_info=server_info if isinstance(server_info, dict) else {},
        instructions=instructions if isinstance(instructions, str) else None,
    )


class BackendCatalog:
    """Probe results per backend, shared by every request of this process. A failed probe is
    remembered for `retry_seconds`, so a backend that is down costs its callers no connection
    attempt each, and one that comes up is found within that time."""

    def __init__(self, upstream: Upstream, *, health: HealthFeed | None = None, retry_seconds: float = 1.0) -> None:
        #: Which replicas are up; sending through it marks one down when it cannot be reached, and
        #: what one instance finds, `health` (when given) tells every instance.
        self.replicas = ReplicaHealth(upstream, feed=health)
        self._upstream: Upstream = self.replicas
        self._retry_seconds = retry_seconds
        self._infos: dict[tuple[int, tuple[str, ...]], BackendInfo] = {}
        self._failures: dict[tuple[int, tuple[str, ...]], tuple[float, Exception]] = {}
        self._flights: SingleFlight[BackendInfo] = SingleFlight()

    async def info(self, backend: BackendView, principal: Principal | None = None) -> BackendInfo:
        """What the backend speaks, asked once (and again after a failure's retry time). `principal`:
        the caller it is first asked for, whose credential the asking carries (a backend that takes
        each caller's own has none of the gateway's); a caller without one is no backend failure."""
        if backend.server is not None:
            return backend.server.info
        key = (backend.id, backend.urls)
        info = self._infos.get(key)
        if info is not None:
            return info
        failure = self._failures.get(key)
        if failure is not None and time.monotonic() - failure[0] < self._retry_seconds:
            raise type(failure[1])(str(failure[1]))  # a fresh exception: no traceback piling up
        per_caller = principal is not None and backend.egress is not None and backend.egress.per_caller
        # Callers with credentials of their own each ask for themselves: one's refusal is not another's.
        flight = (key, principal.key_id, principal.person) if per_caller and principal is not None else key
        return await self._flights.run(flight, lambda: self._probe(key, backend, principal if per_caller else None))

    async def _probe(
        self, key: tuple[int, tuple[str, ...]], backend: BackendView, principal: Principal | None
    ) -> BackendInfo:
        try:
            info = await probe(self._upstream, backend, self.replicas.pick(backend, None), principal)
        except CredentialUnavailable:
            raise  # this caller's, not the backend's
        except BackendRefused as exc:
            # A backend whose callers bring credentials of their own refuses one (or the gateway,
            # which may have none for it) for reasons that are not the next caller's.
            if backend.egress is None or not backend.egress.per_caller:
                self._failures[key] = (time.monotonic(), exc)
            raise
        except (UpstreamUnavailable, TimeoutError) as exc:
            self._failures[key] = (time.monotonic(), exc)
            raise
        self._failures.pop(key, None)
        self._infos[key] = info
        return info
