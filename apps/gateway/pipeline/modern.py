"""The stateless era (2026-07-28): every request carries its own envelope; the gateway answers
`server/discover` and forwards the rest. A backend that also speaks this era gets the request
byte for byte; one that speaks only the handshake era gets it through a backend session the gateway
keeps per caller, since the client holds none."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from apps.gateway.pipeline.backends import (
    CONTENT_JSON,
    GATEWAY_INFO,
    BackendCatalog,
    HeldSessions,
    egress_headers,
    open_session,
    session_headers,
)
from apps.gateway.pipeline.calls import Call, Outbound
from apps.gateway.pipeline.forwarder import Forwarder
from apps.gateway.pipeline.host_lists import HostLists
from apps.gateway.pipeline.input_required import (
    ForeignRequestState,
    InputRequests,
    UnknownRequestState,
    caller_of,
    request_key,
)
from apps.gateway.pipeline.listen import ComposedListen
from apps.gateway.pipeline.listing import LIST_METHODS
from apps.gateway.pipeline.mounts import merge_capabilities, single_backend
from apps.gateway.pipeline.ports import Upstream, UpstreamReply
from apps.gateway.pipeline.replies import Reply, accepted, error_reply, result_reply
from apps.gateway.pipeline.task_ids import EXTENSION_TASK_METHODS, TASKS_EXTENSION, offers_tasks
from apps.gateway.pipeline.values import BackendInfo, BackendSession, BackendView, HttpRequest, VirtualHostView
from apps.gateway.protocol.envelope import (
    NAME_BEARING,
    ModernEnvelope,
    check_modern_request,
    decode_header_value,
    encode_header_value,
    url_elicitation_supported,
)
from apps.gateway.protocol.errors import (
    GatewayError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    MissingClientCapability,
)
from apps.gateway.protocol.jsonrpc import Kind, Message, dumps
from apps.gateway.protocol.versions import (
    LATEST_LEGACY,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    MODERN_VERSIONS,
    DiscoverResult,
)
from apps.kernel.identity import Principal
from apps.kernel.names import ROUTED_METHODS

#: Requests whose backend may ask the client for input mid-call; a stateless client answers by retrying.
_INTERACTIVE = frozenset({"tools/call", "prompts/get", "resources/read"})
#: Results that must carry caching hints in the stateless era (SEP-2549).
_CACHEABLE = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"})

_upstream_ids = itertools.count(1)
_ENVELOPE_KEYS = frozenset({META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL})

#: Methods 2026-07-28 removed that a composed host would otherwise route by their `uri`
#: (`subscriptions/listen` replaces them): unknown methods, HTTP 404 + -32601, as on any server.
_REMOVED_ROUTED = frozenset({"resources/subscribe", "resources/unsubscribe"})

#: Request headers a stateless backend needs to see as the client sent them.
_FORWARDED = ("mcp-protocol-version", "mcp-method", "mcp-name")


class ModernEra:
    def __init__(
        self,
        *,
        upstream: Upstream,
        backends: BackendCatalog,
        forwarder: Forwarder,
        lists: HostLists,
        listen: ComposedListen,
        inputs: InputRequests,
    ) -> None:
        #: Backend requests answered by retrying (MRTR).
        self._inputs = inputs
        self._lists = lists
        self._listen = listen
        self._upstream = upstream
        self._backends = backends
        self._forwarder = forwarder
        self.replicas = backends.replicas
        self._held = HeldSessions()

    async def handle(
        self, request: HttpRequest, vhost: VirtualHostView, principal: Principal, message: Message, wants_sse: bool
    ) -> Reply:
        if message.kind is Kind.RESPONSE:
            return error_reply(None, InvalidRequest("Invalid Request: stateless clients do not send responses"))
        if message.kind is Kind.NOTIFICATION:
            # No client notification means anything on this transport (cancelling is closing the stream).
            return accepted()
        try:
            envelope = check_modern_request(message, request.headers)
            if message.method == "server/discover":
                return await self._discover(vhost, principal, message)
            leg = _Leg(self, request, principal, envelope)
            if vhost.composed:
                return await self._composed(leg, request, vhost, principal, message, envelope, wants_sse)
        except GatewayError as error:
            return error_reply(message.id, error)
        map_key, _ = single_backend(vhost)
        return await self._forwarder.direct(leg, request, vhost, principal, message, map_key=map_key, wants_sse=wants_sse)

    async def _composed(
        self, leg: _Leg, request: HttpRequest, vhost: VirtualHostView, principal: Principal, message: Message,
        envelope: ModernEnvelope, wants_sse: bool,
    ) -> Reply:
        """A host whose names are rewritten: lists merged, routed requests to one backend."""
        method = message.method or ""
        if method in LIST_METHODS:
            result = await self._lists.result(vhost, principal, method, message.params, modern=True)
            return result_reply(message.id, result, sse=_sse_only(request, wants_sse))
        if method == "subscriptions/listen":
            return await self._listen.handle(vhost, principal, message)
        if method in ROUTED_METHODS and method not in _REMOVED_ROUTED:
            return await self._forwarder.routed(leg, request, vhost, principal, message, wants_sse=wants_sse)
        if method in EXTENSION_TASK_METHODS and vhost.naming.single_key is None:
            await self._check_tasks(vhost, principal, method, envelope)
            return await self._forwarder.tasked(leg, request, vhost, principal, message, wants_sse=wants_sse)
        single = vhost.naming.single_key
        if single is None or method in _REMOVED_ROUTED:
            raise MethodNotFound(f"Method not found: {method}", http_status=404)
        # One backend (aliases or a policy): what names nothing passes through.
        return await self._forwarder.direct(leg, request, vhost, principal, message, map_key=single, wants_sse=wants_sse)

    async def _check_tasks(
        self, vhost: VirtualHostView, principal: Principal, method: str, envelope: ModernEnvelope
    ) -> None:
        """A request of the tasks extension on a composed host: an unknown method where no backend
        offers the extension (HTTP 404 + -32601; a backend that cannot be reached now may, and the
        task id decides), -32021 when its client does not declare it."""
        infos = await self._infos(vhost, principal)
        reached_all = len(infos) == len(vhost.mounts)
        if reached_all and not any(offers_tasks(info.modern_capabilities) for info in infos if info.modern_versions):
            raise MethodNotFound(f"Method not found: {method}", http_status=404)
        if not offers_tasks(envelope.client_capabilities):
            raise MissingClientCapability(
                f"{method} belongs to the {TASKS_EXTENSION} extension, which this request's client capabilities do "
                "not declare", data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})

    async def _infos(self, vhost: VirtualHostView, principal: Principal) -> list[BackendInfo]:
        """What the host's backends told about themselves (those that cannot be reached left out)."""
        found = await asyncio.gather(
            *(self._backends.info(backend, principal) for backend in vhost.mounts.values()),
            return_exceptions=True,
        )
        return [info for info in found if isinstance(info, BackendInfo)]

    async def _discover(self, vhost: VirtualHostView, principal: Principal, message: Message) -> Reply:
        infos = await self._infos(vhost, principal)
        capabilities = merge_capabilities(
            info.modern_capabilities if info.modern_versions else _stateless_view(info.legacy_capabilities)
            for info in infos
        )
        result: DiscoverResult = {
            "resultType": "complete",
            "supportedVersions": list(MODERN_VERSIONS),
            "capabilities": capabilities,
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {META_SERVER_INFO: GATEWAY_INFO},
        }
        instructions = "\n\n".join(info.instructions for info in infos if info.instructions)
        if instructions:
            result["instructions"] = instructions
        return result_reply(message.id, result)

    async def to_handshake_era(
        self, call: Call, request: HttpRequest, envelope: ModernEnvelope, lost: Outbound | None
    ) -> Outbound:
        """A backend that speaks only the handshake era: the request goes in a backend session the
        gateway holds per key. Every caller of the key shares it, so ids and progress tokens become
        the gateway's own there (two callers' `id: 1` never meet) and are restored on the way back."""
        backend, principal = call.backend, call.principal
        if lost is not None:
            self._held.forget((backend.id, principal.key_id))  # forgotten, or its replica is down
        upstream_id = f"gw-{next(_upstream_ids)}"
        restore = _Restore(call.message, upstream_id, cacheable=call.message.method in _CACHEABLE)
        interactive = call.message.method in _INTERACTIVE
        key = request_key(call.message.params) if interactive else None
        caller = caller_of(principal.tenant_id, call.vhost.slug, principal.key_id)
        if key is not None:
            try:
                continued = await self._inputs.resume(
                    key, caller=caller, responses=call.message.params.get("inputResponses"),
                    upstream_id=upstream_id, timeout=backend.timeout,
                )
            except ForeignRequestState:
                raise InvalidParams(
                    "Invalid params: this requestState was not issued to this caller on this virtual host; "
                    "continue the call with the credential and on the virtual host that made it") from None
            except UnknownRequestState:
                raise InvalidParams("Invalid params: unknown or expired requestState") from None
            return Outbound([], b"", pick=str, upstream_id=upstream_id, restore=restore, resumed=continued)
        session = await self._held_session(backend, principal, envelope)
        return Outbound(
            [CONTENT_JSON, ("accept", "application/json, text/event-stream"), *session_headers(session)],
            _without_envelope(call.message, upstream_id), pick=lambda: session.replica, session=session,
            upstream_id=upstream_id, restore=restore,
            intercept=self._intercept(backend, session, principal, upstream_id, caller) if interactive else None,
        )

    def _intercept(
        self, backend: BackendView, session: BackendSession, principal: Principal, upstream_id: str, caller: str
    ) -> Callable[[UpstreamReply], UpstreamReply]:
        """What turns the backend's requests in this call into `InputRequiredResult`s."""
        inputs = self._inputs

        async def respond(message: bytes) -> None:
            headers = [CONTENT_JSON, ("accept", "application/json, text/event-stream"), *session_headers(session),
                       *await egress_headers(backend, principal)]
            reply = await self._upstream.send(backend, session.replica, "POST", headers, message, timeout=backend.timeout)
            try:
                await reply.read()
            finally:
                reply.close()

        return lambda reply: inputs.intercept(reply, upstream_id=upstream_id, caller=caller, respond=respond)

    async def _held_session(self, backend: BackendView, principal: Principal, envelope: ModernEnvelope) -> BackendSession:
        key = (backend.id, principal.key_id)
        affinity = f"held:{backend.id}:{principal.key_id}"

        async def open_one() -> BackendSession:
            session, _ = await open_session(
                self._upstream, backend, self._backends.replicas.pick(backend, affinity), version=LATEST_LEGACY,
                capabilities=envelope.client_capabilities, client_info=envelope.client_info or GATEWAY_INFO,
                principal=principal, affinity=affinity,
            )
            return session

        return await self._held.get(key, open_one, is_up=self._backends.replicas.is_up)


class _Leg:
    """How one stateless request reaches its backend."""

    session_id = ""
    modern = True

    def __init__(self, era: ModernEra, request: HttpRequest, principal: Principal, envelope: ModernEnvelope) -> None:
        self._era = era
        self._request = request
        self._envelope = envelope

    @property
    def url_elicitation(self) -> bool:
        return url_elicitation_supported(self._envelope.protocol_version, self._envelope.client_capabilities)

    async def outbound(self, call: Call, info: BackendInfo, lost: Outbound | None) -> Outbound:
        if not info.modern_versions:
            return await self._era.to_handshake_era(call, self._request, self._envelope, lost)
        # A backend of this era gets the request as it came, at any replica that is up.
        request = self._request
        headers = [CONTENT_JSON, ("accept", request.headers.get("accept", "application/json, text/event-stream"))]
        headers.extend((name, request.headers[name]) for name in _FORWARDED if name in request.headers)
        if call.exposed_name is not None:  # the backend knows the target by its own name
            field = NAME_BEARING.get(call.message.method or "")
            value = call.message.params.get(field) if field else None
            headers = [h for h in headers if h[0] != "mcp-name"]
            if isinstance(value, str):
                headers.append(("mcp-name", encode_header_value(value)))
        mirrored = [(name, value) for name, value in request.headers.items() if name.startswith("mcp-param-")]
        if mirrored and call.params_before is not None:
            mirrored = _mirrors_rewritten(mirrored, call.params_before, call.message.params)
        headers.extend(mirrored)
        replicas, backend = self._era.replicas, call.backend
        return Outbound(headers, call.body, pick=lambda: replicas.pick(backend, None))


def _mirrors_rewritten(
    mirrored: list[tuple[str, str]], before: Mapping[str, Any], after: Mapping[str, Any],
) -> list[tuple[str, str]]:
    """The request's `Mcp-Param-*` headers after an interceptor rewrote its arguments: a header
    mirroring an argument that changed carries the new value (or goes, with the argument), so the
    backend's header/body check still holds and a masked value does not travel in a header. A
    header is matched to its argument by value (the schema's `x-mcp-header` is the backend's),
    read as the client encoded it; when several arguments had the value and one of them changed,
    the header follows the change: better a header the backend refuses than a masked value sent."""
    old = before.get("arguments")
    new = after.get("arguments")
    if not isinstance(old, dict):
        return mirrored
    new = new if isinstance(new, dict) else {}
    changed: dict[str, object] = {}  # a changed argument's old header form -> its new value
    for key, value in old.items():
        form = _header_form(value)
        if form is not None and new.get(key, _GONE) != value:
            changed.setdefault(form, new.get(key, _GONE))
    if not changed:
        return mirrored
    kept = []
    for name, value in mirrored:
        decoded = decode_header_value(value)
        if decoded not in changed:
            kept.append((name, value))
        elif (form := _header_form(changed[decoded])) is not None:
            kept.append((name, encode_header_value(form)))
    return kept


_GONE = object()


def _header_form(value: object) -> str | None:
    """A primitive argument as a header mirrors it (None: an object or array is never mirrored)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _stateless_view(capabilities: Mapping[str, Any]) -> Mapping[str, Any]:
    """A handshake-era backend's capabilities as a stateless client is offered them: without the
    2025-11-25 `tasks` member, which 2026-07-28 replaced by an extension the gateway does not make
    of a handshake-era backend's tasks."""
    return {name: value for name, value in capabilities.items() if name != "tasks"} if "tasks" in capabilities else capabilities


def _sse_only(request: HttpRequest, wants_sse: bool) -> bool:
    """Whether a locally made answer goes as SSE: the client accepts it and not JSON."""
    return wants_sse and "application/json" not in request.headers.get("accept", "*/*")


def _without_envelope(message: Message, upstream_id: str) -> bytes:
    """The request as a handshake-era server expects it: the per-request envelope means nothing
    there (the held session carries it), and a dual-use server would take it for a stateless call."""
    params = dict(message.params)
    meta = {key: value for key, value in params.get("_meta", {}).items() if key not in _ENVELOPE_KEYS}
    if "progressToken" in meta:
        meta["progressToken"] = upstream_id
    if meta:
        params["_meta"] = meta
    else:
        params.pop("_meta", None)
    return dumps({**message.raw, "id": upstream_id, "params": params})


class _Restore:
    """Messages from a held session as the stateless client expects them: its own request id and
    progress token, a result type, and caching hints on cacheable results."""

    def __init__(self, message: Message, upstream_id: str, *, cacheable: bool) -> None:
        meta = message.params.get("_meta")
        self._id = message.id
        self._token = meta.get("progressToken") if isinstance(meta, dict) else None
        self._upstream_id = upstream_id
        self._cacheable = cacheable

    def __call__(self, message: dict[str, Any]) -> dict[str, Any]:
        if "method" in message:
            params = message.get("params")
            if isinstance(params, dict) and params.get("progressToken") == self._upstream_id:
                return {**message, "params": {**params, "progressToken": self._token}}
            return message
        if message.get("id") != self._upstream_id:
            return message
        message = {**message, "id": self._id}
        if "result" in message:
            message = _as_modern_result(message) if self._cacheable else _with_result_type(message)
        return message


def _with_result_type(response: dict[str, Any]) -> dict[str, Any]:
    """A handshake-era result as the stateless era shapes it."""
    result = response["result"]
    if isinstance(result, dict) and "resultType" not in result:
        response = {**response, "result": {**result, "resultType": "complete"}}
    return response


def _as_modern_result(response: dict[str, Any]) -> dict[str, Any]:
    """...and, for cacheable results, with caching hints: private (the gateway's answer may depend
    on who asks) and not to be reused without asking again."""
    response = _with_result_type(response)
    result = response["result"]
    if isinstance(result, dict) and ("ttlMs" not in result or "cacheScope" not in result):
        response = {**response, "result": {"ttlMs": 0, "cacheScope": "private", **result}}
    return response
