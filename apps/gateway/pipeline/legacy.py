"""The handshake era (2024-11-05 … 2025-11-25) over Streamable HTTP: the gateway answers
`initialize` itself, mints the session, and keeps one backend session per downstream session so
server→client traffic (progress, logging, sampling, elicitation) flows back to the right client."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from apps.gateway.pipeline.backends import (
    ACCEPT,
    CONTENT_JSON,
    GATEWAY_INFO,
    BackendCatalog,
    BackendRefused,
    session_headers,
)
from apps.gateway.pipeline.calls import Call, Outbound
from apps.gateway.pipeline.forwarder import Forwarder
from apps.gateway.pipeline.host_lists import HostLists
from apps.gateway.pipeline.interception import stream_event_kept
from apps.gateway.pipeline.legacy_composed import ComposedLegacy, InFlight
from apps.gateway.pipeline.mounts import merge_capabilities, single_backend
from apps.gateway.pipeline.ports import SessionLimitReached, SessionStore, Upstream, UpstreamReply, UpstreamUnavailable
from apps.gateway.pipeline.replicas import ROUTING_HASH_HEADER, routing_hash
from apps.gateway.pipeline.replies import SSE_HEADERS, Reply, Stream, accepted, error_reply, result_reply
from apps.gateway.pipeline.session_backends import SessionBackends
from apps.gateway.pipeline.tracing import note_session
from apps.gateway.pipeline.values import BackendInfo, HttpRequest, SessionState, VirtualHostView
from apps.gateway.protocol.envelope import (
    NAME_BEARING,
    check_initialize_params,
    encode_header_value,
    url_elicitation_supported,
)
from apps.gateway.protocol.errors import GatewayError, HttpError, InvalidParams, InvalidRequest, RateLimited
from apps.gateway.protocol.jsonrpc import Kind, Message, dumps
from apps.gateway.protocol.sse import encode_event
from apps.gateway.protocol.versions import (
    LATEST_MODERN,
    LEGACY_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    InitializeResult,
    negotiate_legacy,
)
from apps.kernel.identity import Principal

log = logging.getLogger(__name__)


def session_limit_error(limit: int) -> RateLimited:
    """The refusal of a new session to a key that holds `limit` usable sessions already."""
    return RateLimited(
        f"Too many sessions: this key already holds {limit} open sessions, the most it may; end one "
        "(DELETE with its Mcp-Session-Id) or wait until one expires", data={"limit_scope": "sessions", "limit": limit},
    )


class LegacyEra:
    def __init__(
        self,
        *,
        sessions: SessionStore,
        upstream: Upstream,
        backends: BackendCatalog,
        forwarder: Forwarder,
        lists: HostLists,
        max_client_metadata_bytes: int = 0,
    ):
        """`max_client_metadata_bytes`: the most an `initialize` may send as `capabilities`, and
        as `clientInfo` (each, as JSON), both kept with the session (0: any size)."""
        self._max_client_metadata = max_client_metadata_bytes
        self._sessions = sessions
        self._upstream = upstream
        self._backends = backends
        self._forwarder = forwarder
        #: The backend sessions each downstream session keeps (opened on first use).
        self.backend_sessions = SessionBackends(sessions=sessions, upstream=upstream, backends=backends)
        self._composed = ComposedLegacy(
            forwarder=forwarder, lists=lists, backends=backends, backend_sessions=self.backend_sessions
        )

    async def session_for(
        self, session_id: str, principal: Principal, vhost: VirtualHostView, *, handshake_pending: bool = False,
        fresh: bool = False,
    ) -> SessionState:
        """The session, if it exists and belongs to this caller on this virtual host. Any other case
        is 404, so a session id is useless with another credential. An HTTP+SSE session whose
        `initialize` has not come yet is found only with `handshake_pending`; `fresh`: not from
        this instance's short-lived cache."""
        well_formed = self._sessions.is_well_formed(session_id)
        state = (
            await self._sessions.load(session_id, tenant_id=vhost.tenant_id, key_id=principal.key_id, fresh=fresh)
            if well_formed else None
        )
        if (
            state is None
            or not (state.protocol_version or handshake_pending)
            or state.key_id != principal.key_id
            or state.tenant_id != vhost.tenant_id
            or state.vhost != vhost.slug
        ):
            raise HttpError(404, "Not Found: unknown or expired session; send initialize again", code=-32600)
        return state

    async def initialize(
        self,
        request: HttpRequest,
        vhost: VirtualHostView,
        principal: Principal,
        message: Message,
        *,
        session: SessionState | None = None,
    ) -> Reply:
        """Answer `initialize`: a new session, or the handshake of `session`, one that an HTTP+SSE
        stream opened. A client whose stream broke opens it again on the same session and may
        start over with `initialize`: it gets the same answer, and the session keeps its backend
        sessions (with their state) as long as it asks for the same protocol version."""
        params = message.params
        try:
            check_initialize_params(params, max_value_bytes=self._max_client_metadata)
        except InvalidParams as error:
            return error_reply(message.id, error)
        version = negotiate_legacy(params.get("protocolVersion"))
        again = session is not None and bool(session.protocol_version)
        if session is not None and again and version != session.protocol_version:
            return error_reply(message.id, InvalidRequest(
                f"Invalid Request: the session is initialized with protocol version {session.protocol_version}"))
        infos = await self._infos(vhost, principal)
        capabilities = merge_capabilities(
            info.legacy_capabilities if info.legacy_version else info.modern_capabilities for info in infos
        )
        state = session or SessionState(
            id=self._sessions.new_id(),
            tenant_id=vhost.tenant_id,
            vhost=vhost.slug,
            key_id=principal.key_id,
            protocol_version=version,
            client_capabilities={},
            client_info={},
            tenant_slug=vhost.tenant_slug,
        )
        if not again:
            state.protocol_version = version
            state.client_capabilities = params.get("capabilities") or {}
            state.client_info = params.get("clientInfo") or {}
            try:
                saved = await self._sessions.save(state, create=session is None)
            except SessionLimitReached as reached:
                return error_reply(message.id, session_limit_error(reached.limit))
            if not saved:
                raise HttpError(404, "Not Found: the session has ended", code=-32600)
        result: InitializeResult = {
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": GATEWAY_INFO,
        }
        instructions = "\n\n".join(info.instructions for info in infos if info.instructions)
        if instructions:
            result["instructions"] = instructions
        note_session(state.id)
        return result_reply(message.id, result, headers=(("mcp-session-id", state.id),))

    async def _infos(self, vhost: VirtualHostView, principal: Principal) -> list[BackendInfo]:
        results = await asyncio.gather(
            *(self._backends.info(backend, principal) for backend in vhost.mounts.values()), return_exceptions=True
        )
        infos: list[BackendInfo] = []
        for backend, result in zip(vhost.mounts.values(), results, strict=True):
            if isinstance(result, BaseException):
                log.warning("backend %s left out of initialize: %s", backend.name, result)
            else:
                infos.append(result)
        return infos

    async def handle(
        self,
        request: HttpRequest,
        vhost: VirtualHostView,
        principal: Principal,
        state: SessionState,
        message: Message,
        wants_sse: bool,
    ) -> Reply:
        session_header = (("mcp-session-id", state.id),)
        header_version = request.headers.get("mcp-protocol-version")
        if header_version is not None and header_version not in LEGACY_VERSIONS:
            return error_reply(
                message.id,
                InvalidRequest(f"Bad Request: unsupported MCP-Protocol-Version {header_version!r}"),
                session_header,
            )
        if message.kind is Kind.REQUEST and message.method == "ping":
            return result_reply(message.id, {}, headers=session_header)
        if message.kind is Kind.NOTIFICATION and message.method == "notifications/initialized":
            return accepted().with_headers(session_header)
        if vhost.composed:
            leg = _Leg(self.backend_sessions, self._backends, state, self._composed.in_flight)
            return await self._composed.handle(leg, request, vhost, principal, state, message, wants_sse)
        map_key, _ = single_backend(vhost)
        leg = _Leg(self.backend_sessions, self._backends, state, None)
        return await self._forwarder.direct(leg, request, vhost, principal, message, map_key=map_key, wants_sse=wants_sse)

    async def open_stream(
        self, request: HttpRequest, vhost: VirtualHostView, principal: Principal, state: SessionState
    ) -> Reply:
        """The GET stream of a session: the backend's own stream, relayed event by event (ids kept,
        so a client resuming with Last-Event-ID resumes at the backend). Hosts with several
        backends merge theirs (`ComposedLegacy.open_stream`)."""
        if vhost.composed:
            return await self._composed.open_stream(request, vhost, principal, state)
        session_header = (("mcp-session-id", state.id),)
        try:
            map_key, backend = single_backend(vhost)
            info = await self._backends.info(backend, principal)
            if info.legacy_version is None or backend.server is not None:
                raise HttpError(405, "Method Not Allowed: this backend has no server stream", headers=(("allow", "POST, DELETE"),))
            reply = await self.backend_sessions.stream(
                state, map_key, backend, info, principal, request.headers.get("last-event-id")
            )
        except (UpstreamUnavailable, BackendRefused, TimeoutError, GatewayError) as exc:
            raise HttpError(502, f"Bad Gateway: backend stream unavailable: {exc}") from None
        if reply.status == 200 and reply.content_type == "text/event-stream":
            return Reply(200, SSE_HEADERS + session_header, stream=Stream(_events(reply, vhost), reply.close))
        try:
            body = await reply.read(limit=64 * 1024)
        except UpstreamUnavailable:
            body = b""
        reply_headers = tuple((k, v) for k, v in reply.headers.items() if k in {"content-type", "allow"})
        return Reply(reply.status, reply_headers + session_header, body)

    async def terminate(self, state: SessionState, vhost: VirtualHostView, principal: Principal) -> Reply:
        await self._sessions.delete(state.id)
        await self.backend_sessions.close_all(state, vhost, principal)
        return Reply(200)


class _Leg:
    """How the messages of one handshake-era session reach their backends."""

    modern = False

    def __init__(
        self, backend_sessions: SessionBackends, backends: BackendCatalog, state: SessionState,
        in_flight: InFlight | None,
    ) -> None:
        self._backend_sessions = backend_sessions
        self._replicas = backends.replicas
        self._state = state
        self._in_flight = in_flight
        self.session_id = state.id

    @property
    def url_elicitation(self) -> bool:
        return url_elicitation_supported(self._state.protocol_version, self._state.client_capabilities)

    async def outbound(self, call: Call, info: BackendInfo, lost: Outbound | None) -> Outbound | Reply:
        state = self._state
        if info.legacy_version is None:
            return self._to_stateless(call)
        if lost is not None:
            # Forgotten by the backend, or its replica is down: a new one, where one is up.
            log.info("backend %s lost session of %s; opening a new one", call.backend.name, state.id)
        session = await self._backend_sessions.get(
            state, call.map_key, call.backend, info, call.principal, lost=None if lost is None else lost.session
        )
        if self._in_flight is not None and call.message.kind is Kind.REQUEST:
            self._in_flight.remember(state.id, call.message.id, call.map_key)
        return Outbound([CONTENT_JSON, ACCEPT, *session_headers(session)], call.body, pick=lambda: session.replica,
                        session=session)

    def _to_stateless(self, call: Call) -> Outbound | Reply:
        """A backend that speaks only the stateless era: each message gets the envelope the
        session's handshake established, at any replica that is up (by the session's affinity)."""
        state, message = self._state, call.message
        if message.kind is not Kind.REQUEST:
            return accepted().with_headers(call.headers)
        raw = dict(message.raw)
        params = dict(message.params)
        meta = params.get("_meta")
        params["_meta"] = {
            **(meta if isinstance(meta, dict) else {}),
            META_PROTOCOL_VERSION: LATEST_MODERN,
            META_CLIENT_CAPABILITIES: state.client_capabilities,
            META_CLIENT_INFO: state.client_info,
        }
        raw["params"] = params
        headers = [CONTENT_JSON, ACCEPT, ("mcp-protocol-version", LATEST_MODERN), ("mcp-method", message.method or "")]
        field = NAME_BEARING.get(message.method or "")
        if field and isinstance(params.get(field), str):
            headers.append(("mcp-name", encode_header_value(params[field])))
        headers.append((ROUTING_HASH_HEADER, routing_hash(state.id)))
        replicas, backend = self._replicas, call.backend
        return Outbound(headers, dumps(raw), pick=lambda: replicas.pick(backend, state.id))


async def _events(reply: UpstreamReply, vhost: VirtualHostView) -> AsyncIterator[bytes]:
    try:
        async for event in reply.events():
            if stream_event_kept(vhost, event.data):
                yield encode_event(event)
    except UpstreamUnavailable:
        pass
