"""The MCP endpoint's request pipeline (docs/architecture.md): check the HTTP envelope, authenticate,
resolve the virtual host, then hand the message to the era it belongs to."""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from apps.gateway.pipeline.answers import StreamCaps
from apps.gateway.pipeline.backend_client import BackendClient
from apps.gateway.pipeline.backends import BackendCatalog
from apps.gateway.pipeline.concurrency import BackendGates
from apps.gateway.pipeline.cursors import CursorCodec
from apps.gateway.pipeline.forwarder import Forwarder
from apps.gateway.pipeline.host_lists import HostLists, ListSettings
from apps.gateway.pipeline.http_sse import HttpSseTransport
from apps.gateway.pipeline.input_required import InputRequests
from apps.gateway.pipeline.legacy import LegacyEra
from apps.gateway.pipeline.list_pieces import ListPieces
from apps.gateway.pipeline.listen import ComposedListen
from apps.gateway.pipeline.local import LocalTools
from apps.gateway.pipeline.metrics import Counters, note_method
from apps.gateway.pipeline.modern import ModernEra
from apps.gateway.pipeline.ports import (
    AuditSink,
    ChangeFeed,
    Directory,
    HealthFeed,
    InterceptorHooks,
    Mailbox,
    RateLimiter,
    SessionStore,
    StoreUnavailable,
    TenantDirectory,
    TokenVerifier,
    ToolFinder,
    Upstream,
)
from apps.gateway.pipeline.propagation import TracedUpstream
from apps.gateway.pipeline.replies import Reply, error_reply, http_error_reply
from apps.gateway.pipeline.task_ids import TaskIds
from apps.gateway.pipeline.tool_search import ToolSearch
from apps.gateway.pipeline.tracing import RequestTrace, Tracer, Tracing
from apps.gateway.pipeline.values import HttpRequest, VirtualHostView
from apps.gateway.protocol.envelope import NAME_BEARING, encode_header_value, is_modern_message
from apps.gateway.protocol.errors import GatewayError, HttpError, InvalidRequest
from apps.gateway.protocol.jsonrpc import Message, dumps, error_message, loads, parse_body
from apps.gateway.protocol.versions import META_PROTOCOL_VERSION, MODERN_VERSIONS
from apps.kernel.identity import InvalidToken, Principal, TokenIssuerView

log = logging.getLogger(__name__)

#: Where RFC 9728 protected-resource metadata is served; the MCP path follows.
PROTECTED_RESOURCE_PATH = "/.well-known/oauth-protected-resource"
#: The one protocol revision whose clients may send JSON-RPC batches.
BATCH_VERSION = "2025-03-26"
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    max_body_bytes: int
    allowed_origins: frozenset[str]
    allowed_hosts: frozenset[str]  # empty: any Host header
    #: Signs list cursors; every instance of a deployment must have the same (>= 16 bytes).
    cursor_secret: bytes = field(repr=False, default=b"")
    #: Keys the hashes of audited arguments (tenants with `audit_arguments: hash`).
    audit_hash_key: bytes = field(repr=False, default=b"")
    lists: ListSettings = ListSettings()
    #: How often this instance looks for sessions idle past their expiry, to close their backend
    #: sessions (None: never).
    session_sweep_seconds: float | None = None
    #: How long a call waits for a free slot of a backend at its concurrency limit before -32004.
    backend_queue_seconds: float = 5.0
    #: What a backend's event stream answering one request may bring before the call ends.
    stream_caps: StreamCaps = StreamCaps()
    #: Tags the requestStates of calls waiting for a stateless client's input (MRTR), binding each
    #: to its caller; every instance of a deployment must have the same (empty: this instance's own).
    request_state_secret: bytes = field(repr=False, default=b"")
    #: Most messages in one JSON-RPC batch; a longer batch is refused whole, nothing forwarded.
    max_batch_items: int = 50
    #: Most messages of one batch handled at once; the others wait their turn.
    batch_concurrency: int = 8
    #: Largest `capabilities` and `clientInfo` (each, encoded as JSON) a client's `initialize` may
    #: send: the gateway keeps both for the session's lifetime.
    max_client_metadata_bytes: int = 8192


#: Django's syntax of a Host header (django.http.request.host_validation_re), on the lower-cased
#: value: a name or a bracketed IPv6 address, then at most a numeric port.
_HOST_SYNTAX = re.compile(r"([a-z0-9.-]+|\[[a-f0-9]*:[a-f0-9.:]+\])(:[0-9]+)?")


def _host_of(value: str) -> str:
    """`Host` header or origin authority without the port (IPv6 keeps its brackets)."""
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _host_allowed(host: str, allowed: frozenset[str]) -> bool:
    """Django's ALLOWED_HOSTS rules: exact names, or `.example.com` for the domain and its subdomains."""
    return host in allowed or any(
        pattern.startswith(".") and (host.endswith(pattern) or host == pattern[1:]) for pattern in allowed
    )


_NO_HEADERS: Mapping[str, str] = MappingProxyType({})


def _stateless_headers(message: Message) -> dict[str, str]:
    """The headers a stateless-era request carries beside its body (the era checks they agree)."""
    meta = message.params.get("_meta")
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    headers = {"mcp-method": message.method or ""}
    if isinstance(version, str):
        headers["mcp-protocol-version"] = version
    field = NAME_BEARING.get(message.method or "")
    if field is not None and isinstance(name := message.params.get(field), str):
        headers["mcp-name"] = encode_header_value(name)
    return headers


def _credential(request: HttpRequest) -> str | None:
    authorization = request.headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("x-api-key") or None


class Gateway:
    def __init__(
        self,
        *,
        directory: Directory,
        sessions: SessionStore,
        upstream: Upstream,
        audit: AuditSink,
        settings: GatewaySettings,
        changes: ChangeFeed,
        health: HealthFeed,
        limiter: RateLimiter,
        tokens: TokenVerifier,
        finder: ToolFinder,
        mailbox: Mailbox,
        tracing: Tracing,
        counters: Counters,
        hooks: InterceptorHooks,
    ) -> None:
        """Every port is required: a gateway that runs without one of the shared services gets its
        stand-in from `standalone.py`. Nothing runs in the background until `start()`."""
        self.settings = settings
        self.tracer = Tracer(tracing)
        self._sessions = sessions
        self._sweeper: asyncio.Task[None] | None = None
        self._tokens = tokens
        self._changes = changes
        self._health = health
        self.directory = directory
        # Every exchange with a backend carries the trace context (and is a span, when tracing is on).
        # What one instance notices of replicas, every instance knows (`health`).
        self.backends = BackendCatalog(TracedUpstream(upstream, self.tracer), health=health)
        upstream = self.backends.replicas  # every request to a backend notices replicas that are down
        self.counters = counters
        # Without a shared secret, cursors are valid on this instance only.
        cursor_secret = settings.cursor_secret or secrets.token_bytes(32)
        codec = CursorCodec(cursor_secret)
        client = BackendClient(upstream, self.backends)
        lists = HostLists(client, codec, settings.lists, self.counters, share=changes.publish,
                          search_listed=finder.prepare)
        self.lists = lists
        pages = settings.lists.pages
        forwarder = Forwarder(
            upstream=upstream, backends=self.backends, lists=lists, pieces=ListPieces(codec, pages), audit=audit,
            counters=self.counters, tracer=self.tracer,
            local=LocalTools(self.tracer, ToolSearch(lists, finder, self.counters), codec, pages),
            limiter=limiter, gates=BackendGates(queue_seconds=settings.backend_queue_seconds),
            hash_key=settings.audit_hash_key, stream_caps=settings.stream_caps, task_ids=TaskIds(cursor_secret),
            hooks=hooks,
        )
        listen = ComposedListen(client, lists, self.backends, timeout=settings.lists.timeout,
                                task_of=forwarder.task_of, messages=forwarder.backend_messages)
        self.legacy = LegacyEra(
            sessions=sessions, upstream=upstream, backends=self.backends, forwarder=forwarder, lists=lists,
            max_client_metadata_bytes=settings.max_client_metadata_bytes,
        )
        self.modern = ModernEra(
            upstream=upstream, backends=self.backends, forwarder=forwarder, lists=lists, listen=listen,
            inputs=InputRequests(mailbox, secret=settings.request_state_secret or None),
        )
        self.http_sse = HttpSseTransport(legacy=self.legacy, sessions=sessions, mailbox=mailbox, counters=self.counters)

    def start(self) -> None:
        """Start what runs beside the requests, on the running event loop (the one that will serve):
        hearing list changes and replica health from the other instances, and the session sweep.
        Call it once, before the first request."""
        self._changes.start(self._changed_elsewhere)
        self._health.start(self.backends.replicas.apply)  # the current records, then news
        if self.settings.session_sweep_seconds is not None:
            self._sweeper = asyncio.ensure_future(self._sweep_forever(self.settings.session_sweep_seconds))

    def _changed_elsewhere(self, backend_id: int, notification: str) -> None:
        # The change may come with new configuration (a new spec version): look for it at once.
        self.directory.recheck()
        self.lists.invalidate(backend_id, notification, shared=True)

    async def handle(self, request: HttpRequest) -> Reply:
        trace = RequestTrace(self.tracer, request.headers, **{
            "gateway.tenant": request.tenant, "gateway.virtual_host": request.vhost, "http.request.method": request.method,
        })
        reply: Reply | None = None
        try:
            reply = await self._handle(request, trace)
            return reply
        except HttpError as error:
            reply = http_error_reply(error)
            return reply
        except StoreUnavailable as exc:
            reply = http_error_reply(HttpError(
                503, f"Service Unavailable: the session store cannot be reached ({exc})",
                headers=(("retry-after", "1"),), code=-32603,
            ))
            return reply
        except BaseException as error:
            trace.finish(None, error)
            raise
        finally:
            if reply is not None:
                trace.finish(reply.status)

    async def call_as(
        self, vhost: VirtualHostView, principal: Principal, message: Message, *, headers: Mapping[str, str] = _NO_HEADERS,
    ) -> Reply:
        """One request of the stateless era (`message`, with its `_meta` envelope) by a caller known
        already, on `vhost`: the console's tool tester, calling as a key it chose or as its user's
        test identity. It walks the path a POSTed request walks once authenticated — its trace, the
        envelope check, routing and the access policy, rate limits and budgets, the backend's slots,
        the audit row — with the headers the era checks made from the message; the reply is JSON,
        never a stream (a backend that answers with one is read to its response, as for a client
        that accepts both). `headers`: more request headers (a `traceparent`)."""
        body = dumps(message.raw)
        request = HttpRequest("POST", vhost.tenant_slug, vhost.slug, {
            **headers, "content-type": "application/json", "accept": "application/json, text/event-stream",
            **_stateless_headers(message),
        }, body)
        trace = RequestTrace(self.tracer, request.headers, **{
            "gateway.tenant": request.tenant, "gateway.virtual_host": request.vhost, "http.request.method": "POST",
        })
        reply: Reply | None = None
        try:
            if len(body) > self.settings.max_body_bytes:
                reply = error_reply(message.id, InvalidRequest(
                    f"Invalid Request: the request is {len(body)} bytes, the limit is {self.settings.max_body_bytes}"))
                return reply
            trace.begin(message)
            note_method(message.method)
            reply = await self.modern.handle(request, vhost, principal, message, wants_sse=False)
            return reply
        except BaseException as error:
            trace.finish(None, error)
            raise
        finally:
            if reply is not None:
                trace.finish(reply.status)

    async def _sweep_forever(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await self.sweep_sessions()
            except StoreUnavailable as exc:
                log.warning("could not sweep expired sessions: %s", exc)
            except Exception:
                log.exception("sweeping expired sessions failed")

    async def sweep_sessions(self) -> int:
        """End the sessions idle past their expiry (any instance's): close their backend sessions
        and forget them. Returns how many ended."""
        expired = await self._sessions.take_expired()
        for state in expired:
            tenant = await self.directory.tenant(state.tenant_slug) if state.tenant_slug else None
            vhost = tenant.virtual_host(state.vhost) if tenant is not None else None
            if vhost is not None and vhost.tenant_id == state.tenant_id:
                principal = tenant.principal_for_key(state.key_id) if tenant is not None else None
                await self.legacy.backend_sessions.close_all(state, vhost, principal)
            await self._sessions.delete(state.id)
        return len(expired)

    def check_origin(self, request: HttpRequest) -> None:
        """DNS-rebinding protection: a browser page from another origin must not reach us."""
        host = request.headers.get("host", "")
        if host and _HOST_SYNTAX.fullmatch(host.lower()) is None:
            # `127.0.0.1:evil.example` would pass as 127.0.0.1 below and then name another site.
            raise HttpError(400, f"Bad Request: the Host header {host[:100]!r} is not a host name or address "
                            "with an optional numeric port", code=-32600)
        if self.settings.allowed_hosts and not _host_allowed(_host_of(host).lower(), self.settings.allowed_hosts):
            raise HttpError(403, f"Forbidden: host {host!r} is not served here", code=-32600)
        origin = request.headers.get("origin")
        if origin is None or origin in self.settings.allowed_origins:
            return
        scheme, _, authority = origin.lower().partition("://")
        origin_host = _host_of(authority)
        if origin_host in _LOOPBACK_HOSTS and _host_of(host).lower() in _LOOPBACK_HOSTS:
            return
        if scheme in {"http", "https"} and authority == host.lower():
            return
        raise HttpError(403, f"Forbidden: origin {origin!r} is not allowed", code=-32600)

    async def authenticate(
        self, request: HttpRequest, tenant: TenantDirectory | None, vhost: VirtualHostView | None
    ) -> Principal:
        """The caller: an API key, a JWT access token of one of the tenant's issuers, or the host's
        anonymous key. Otherwise 401 with a challenge that names the protected-resource metadata
        (RFC 9728) when the tenant accepts tokens."""
        credential = _credential(request)
        if credential is not None:
            principal = tenant.principal_for_credential(credential) if tenant is not None else None
            if principal is not None:
                return principal
            own = self._own_issuer(request, tenant)
            issuers = self._issuers(request, tenant)
            if tenant is not None and issuers and credential.count(".") == 2:
                try:
                    issuer, claims = await self._tokens.verify(credential, issuers)
                    is_own = own is not None and issuer.issuer == own.issuer
                    if (is_own and tenant.own_issuer is not None
                            and str(claims.get("gid")) in tenant.own_issuer.revoked_grants):
                        raise InvalidToken("the token's grant was revoked")
                except InvalidToken as exc:
                    raise HttpError(401, f"Unauthorized: {exc}", headers=self._challenge(request, tenant, True)) from None
                # The gateway's own tokens are never exchanged elsewhere (`own`: they are people's).
                return tenant.principal_for_token(issuer, claims, token=credential, own=is_own)
            raise HttpError(401, "Unauthorized: invalid API key", headers=self._challenge(request, tenant, True))
        if tenant is not None and vhost is not None and vhost.anonymous_key_id is not None:
            principal = tenant.principal_for_key(vhost.anonymous_key_id)
            if principal is not None:
                return principal
        raise HttpError(
            401, "Unauthorized: send an API key as 'Authorization: Bearer <key>' or 'X-API-Key'"
            + (", or an access token of a trusted issuer" if self._issuers(request, tenant) else ""),
            headers=self._challenge(request, tenant, False),
        )

    @staticmethod
    def _origin(request: HttpRequest) -> str | None:
        # Nothing of the request is used unchecked: the host as check_origin validated it, the
        # scheme one of two (a proxy's X-Forwarded-Proto is free text).
        host = request.headers.get("host", "").lower()
        scheme = "https" if request.scheme == "https" else "http"
        return f"{scheme}://{host}" if _HOST_SYNTAX.fullmatch(host) is not None else None

    def _own_issuer(self, request: HttpRequest, tenant: TenantDirectory | None) -> TokenIssuerView | None:
        """The gateway's own authorization server as the issuer of tokens for this host, at the
        origin the request came to; None when the tenant's is off."""
        own, origin = (tenant.own_issuer if tenant is not None else None), self._origin(request)
        if own is None or origin is None:
            return None
        return own.issuer_for(origin=origin, tenant=request.tenant, vhost=request.vhost)

    def _issuers(self, request: HttpRequest, tenant: TenantDirectory | None) -> tuple[TokenIssuerView, ...]:
        """The issuers whose tokens this request may carry: the gateway's own (first: an issuer
        configured with its URL is never taken for it), then the tenant's."""
        if tenant is None:
            return ()
        own = self._own_issuer(request, tenant)
        return (own, *tenant.issuers) if own is not None else tenant.issuers

    def _challenge(self, request: HttpRequest, tenant: TenantDirectory | None, invalid: bool) -> tuple[tuple[str, str], ...]:
        parts = ['Bearer realm="mcp-gateway"']
        origin = self._origin(request)
        if tenant is not None and (tenant.issuers or tenant.own_issuer is not None) and origin is not None:
            parts.append(f'resource_metadata="{origin}{PROTECTED_RESOURCE_PATH}/mcp/{request.tenant}/{request.vhost}"')
        if invalid:
            parts.append('error="invalid_token"')
        return (("www-authenticate", ", ".join(parts)),)

    async def _handle(self, request: HttpRequest, trace: RequestTrace) -> Reply:
        self.check_origin(request)
        started = trace.clock()
        try:
            tenant = await self.directory.tenant(request.tenant)
            vhost = tenant.virtual_host(request.vhost) if tenant is not None else None
            principal = await self.authenticate(request, tenant, vhost)
        except BaseException as error:
            trace.stage("gateway.authenticate", started, error)
            raise
        trace.stage("gateway.authenticate", started)
        if vhost is None:
            raise HttpError(404, f"Not Found: no virtual host {request.tenant}/{request.vhost}")
        if request.endpoint:
            return await self.http_sse.handle(request, vhost, principal)
        session_id = request.headers.get("mcp-session-id")
        if session_id:
            trace.note_session(session_id)
        if request.method == "POST":
            return await self._post(request, vhost, principal, session_id, trace)
        trace.begin(None)
        if request.method in {"GET", "DELETE"} and session_id:
            state = await self.legacy.session_for(session_id, principal, vhost)
            if request.method == "GET":
                return await self.legacy.open_stream(request, vhost, principal, state)
            return await self.legacy.terminate(state, vhost, principal)
        # Stateless clients have no GET stream and nothing to delete (2026-07-28: 405).
        raise HttpError(405, "Method Not Allowed", headers=(("allow", "POST"),))

    async def _post(
        self, request: HttpRequest, vhost: VirtualHostView, principal: Principal, session_id: str | None,
        trace: RequestTrace,
    ) -> Reply:
        if len(request.body) > self.settings.max_body_bytes:
            raise HttpError(413, f"Payload Too Large: the limit is {self.settings.max_body_bytes} bytes")
        content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            raise HttpError(415, "Unsupported Media Type: POST bodies must be application/json", code=-32600)
        accept = request.headers.get("accept", "*/*")
        wants_sse = "text/event-stream" in accept or "*/*" in accept
        if not wants_sse and "application/json" not in accept:
            raise HttpError(406, "Not Acceptable: accept application/json or text/event-stream", code=-32600)
        started = trace.clock()
        try:
            parsed = parse_body(request.body)
        except GatewayError as error:
            trace.stage("gateway.parse", started, error)
            return error_reply(None, error)
        trace.stage("gateway.parse", started)
        if isinstance(parsed, list):
            trace.begin(None)
            return await self._batch(request, vhost, principal, session_id, parsed)
        message = parsed
        trace.begin(message)
        note_method(message.method)
        header_version = request.headers.get("mcp-protocol-version")
        if is_modern_message(message) or (header_version in MODERN_VERSIONS and not session_id):
            return await self.modern.handle(request, vhost, principal, message, wants_sse)
        if message.method == "initialize" and message.id is not None:
            return await self.legacy.initialize(request, vhost, principal, message)
        if not session_id:
            return error_reply(
                message.id, InvalidRequest("Bad Request: Mcp-Session-Id header is required; send initialize first")
            )
        state = await self.legacy.session_for(session_id, principal, vhost)
        return await self.legacy.handle(request, vhost, principal, state, message, wants_sse)

    async def _batch(
        self,
        request: HttpRequest,
        vhost: VirtualHostView,
        principal: Principal,
        session_id: str | None,
        batch: list[Message | InvalidRequest],
    ) -> Reply:
        """A JSON-RPC batch: part of protocol revision 2025-03-26 only (later ones removed it). Each
        message is handled as if posted alone (authorized, limited and audited on its own), at most
        `batch_concurrency` at once; the responses come back as one JSON array. A batch of more than
        `max_batch_items` is refused whole before anything is looked up or forwarded."""
        limit = self.settings.max_batch_items
        if len(batch) > limit:
            return error_reply(None, InvalidRequest(
                f"Invalid Request: a batch may hold at most {limit} messages, this one holds {len(batch)}; "
                "send them in smaller batches", data={"max_batch_items": limit}))
        if not session_id:
            return error_reply(None, InvalidRequest("Invalid Request: a batch can only be sent in a session"))
        state = await self.legacy.session_for(session_id, principal, vhost)
        if state.protocol_version != BATCH_VERSION:
            return error_reply(None, InvalidRequest(
                f"Invalid Request: protocol version {state.protocol_version} does not allow batches"))

        turns = asyncio.Semaphore(max(1, self.settings.batch_concurrency))

        async def one(item: Message | InvalidRequest) -> object | None:
            async with turns:
                return await handled(item)

        async def handled(item: Message | InvalidRequest) -> object | None:
            if isinstance(item, InvalidRequest):
                return error_message(None, item.to_error())
            if item.method == "initialize":
                error = InvalidRequest("Invalid Request: initialize must not be part of a batch")
                return error_message(item.id, error.to_error())
            alone = replace(request, body=dumps(item.raw))
            reply = await self.legacy.handle(alone, vhost, principal, state, item, wants_sse=False)
            try:
                return loads(reply.body) if reply.body else None
            except ValueError:
                return error_message(item.id, {"code": -32603, "message": "the backend answered with invalid JSON"})

        responses = [r for r in await asyncio.gather(*(one(item) for item in batch)) if r is not None]
        if not responses:
            return Reply(202, (("mcp-session-id", state.id),))
        return Reply(200, (("content-type", "application/json"), ("mcp-session-id", state.id)), dumps(responses))
