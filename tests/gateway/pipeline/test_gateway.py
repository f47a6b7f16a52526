"""The pipeline on its own, with its ports faked: what no live backend or Redis can be made to do."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import pytest

from apps.gateway.pipeline.backend_client import BackendClient
from apps.gateway.pipeline.calls import Call, Outbound
from apps.gateway.pipeline.concurrency import BackendGates
from apps.gateway.pipeline.cursors import CursorCodec
from apps.gateway.pipeline.forwarder import Forwarder
from apps.gateway.pipeline.gateway import Gateway, GatewaySettings
from apps.gateway.pipeline.host_lists import HostLists, ListSettings
from apps.gateway.pipeline.list_pieces import ListPieces
from apps.gateway.pipeline.listing import PageLimits
from apps.gateway.pipeline.local import LocalTools
from apps.gateway.pipeline.metrics import Counters
from apps.gateway.pipeline.ports import ReplicaState, StoreUnavailable, UpstreamUnavailable
from apps.gateway.pipeline.standalone import (
    LocalMailbox,
    NoChanges,
    NoFinder,
    NoHealthFeed,
    NoHooks,
    NoLimiter,
    NoTokens,
)
from apps.gateway.pipeline.tool_search import ToolSearch
from apps.gateway.pipeline.tracing import NoTracing, Tracer
from apps.gateway.pipeline.values import BackendInfo, BackendView, HttpRequest, SessionState, VirtualHostView
from apps.kernel.audit_entry import AuditEntry, TaskEnd
from apps.kernel.identity import Principal

PRINCIPAL = Principal(tenant_id=1, tenant_slug="acme", key_id=1, key_name="agent", team=None)
BACKEND = BackendView(id=1, name="demo", transport="streamable-http", urls=("http://127.0.0.1:1/mcp",), timeout=1)
VHOST = VirtualHostView(1, "acme", "main", MappingProxyType({"demo": BACKEND}), MappingProxyType({}))


class Tenant:
    issuers = ()
    own_issuer = None

    def virtual_host(self, slug: str) -> VirtualHostView | None:
        return VHOST if slug == "main" else None

    def principal_for_credential(self, credential: str) -> Principal | None:
        return PRINCIPAL if credential == "good-key-0123456789" else None

    def principal_for_key(self, key_id: int) -> Principal | None:
        return None


class Directory:
    async def tenant(self, slug: str) -> Tenant | None:
        return Tenant() if slug == "acme" else None


class DownSessions:
    def new_id(self) -> str:
        return "gw.x.y"

    def is_well_formed(self, session_id: str) -> bool:
        return True

    async def save(self, state: SessionState, *, create: bool) -> bool:
        raise StoreUnavailable("ConnectionError")

    async def load(
        self, session_id: str, *, tenant_id: int, key_id: int | None = None, fresh: bool = False
    ) -> SessionState | None:
        raise StoreUnavailable("ConnectionError")

    async def delete(self, session_id: str) -> None:
        raise StoreUnavailable("ConnectionError")


class DownUpstream:
    async def send(self, *args: Any, **kwargs: Any) -> Any:
        raise UpstreamUnavailable("connection refused")


class Audit:
    def __init__(self) -> None:
        self.entries: list[AuditEntry] = []
        self.ends: list[TaskEnd] = []

    def record(self, entry: AuditEntry) -> None:
        self.entries.append(entry)

    def task_ended(self, end: TaskEnd) -> None:
        self.ends.append(end)


def standalone_gateway(**ports: Any) -> Gateway:
    """A gateway on faked ports (`Directory`, `DownSessions`, `DownUpstream`, `Audit`) and the
    stand-ins of the shared services; `ports` replace any of them."""
    settings = GatewaySettings(max_body_bytes=1000, allowed_origins=frozenset(), allowed_hosts=frozenset())
    return Gateway(**{
        "directory": Directory(), "sessions": DownSessions(), "upstream": DownUpstream(), "audit": Audit(),
        "settings": settings, "changes": NoChanges(), "health": NoHealthFeed(), "limiter": NoLimiter(),
        "tokens": NoTokens(), "finder": NoFinder(), "mailbox": LocalMailbox(), "tracing": NoTracing(),
        "counters": Counters(), "hooks": NoHooks(), **ports,
    })


def _gateway(audit: Audit | None = None) -> Gateway:
    return standalone_gateway(audit=audit or Audit())


def _request(body: dict[str, Any], **headers: str) -> HttpRequest:
    return HttpRequest("POST", "acme", "main", {"content-type": "application/json", "accept": "application/json",
                                               "authorization": "Bearer good-key-0123456789", **headers},
                       json.dumps(body).encode())


async def test_an_unreachable_session_store_is_503_not_a_crash() -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    reply = await _gateway().handle(_request(init))
    assert reply.status == 503 and ("retry-after", "1") in reply.headers
    reply = await _gateway().handle(_request({"jsonrpc": "2.0", "id": 2, "method": "ping"}, **{"mcp-session-id": "gw.x.y"}))
    assert reply.status == 503


async def test_an_unreachable_backend_is_32004_and_audited() -> None:
    audit = Audit()
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "add", "_meta": meta}}
    reply = await _gateway(audit).handle(
        _request(call, **{"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "add"}))
    message = json.loads(reply.body)
    assert message["id"] == 5 and message["error"]["code"] == -32004
    assert message["error"]["data"] == {"backend": "demo"}
    [entry] = audit.entries
    assert (entry.outcome, entry.error_code, entry.exposed_name) == ("error", -32004, "add")


async def test_a_transport_the_gateway_does_not_speak_is_refused_clearly() -> None:
    from apps.gateway.pipeline.backends import BackendRefused, probe

    other = BackendView(id=2, name="old", transport="websocket", urls=("http://127.0.0.1:1/ws",), timeout=1)
    with pytest.raises(BackendRefused, match="'websocket' transport is not supported"):
        await probe(DownUpstream(), other, other.urls[0])


class Health:
    """A `HealthFeed` that hands the gateway whatever the test says another instance found."""

    def __init__(self) -> None:
        self.on_state: Any = None
        self.published: list[ReplicaState] = []

    def publish(self, state: ReplicaState) -> None:
        self.published.append(state)

    def confirm(self, states: Any) -> None:
        pass

    def start(self, on_state: Any) -> None:
        assert self.on_state is None, "started once"
        self.on_state = on_state


async def test_replica_health_is_shared_through_the_feed_the_gateway_starts() -> None:
    health = Health()
    gateway = standalone_gateway(health=health)
    await gateway.handle(_request({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
    assert health.on_state is None  # nothing runs in the background before `start`
    gateway.start()
    await gateway.handle(_request({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
    replicas = gateway.backends.replicas
    health.on_state(ReplicaState("http://10.0.0.9/mcp", False, 5.0, "gw-b"))
    assert not replicas.is_up("http://10.0.0.9/mcp")
    two = BackendView(id=3, name="two", transport="streamable-http", urls=("http://10.0.0.8/mcp", "http://10.0.0.9/mcp"),
                      timeout=1)
    assert {replicas.pick(two, f"s{i}") for i in range(50)} == {"http://10.0.0.8/mcp"}
    replicas.mark_down("http://10.0.0.8/mcp")
    assert [state.url for state in health.published] == ["http://10.0.0.8/mcp"]  # this instance's own finding


class KnownBackends:
    """A backend catalog whose every backend answers as `info` says (nothing probed)."""

    def __init__(self, info: BackendInfo) -> None:
        self._info = info

    async def info(self, backend: BackendView, principal: object = None) -> BackendInfo:
        return backend.server.info if backend.server is not None else self._info


class StatelessLeg:
    """A leg that sends each message as it is to `replica` (no session)."""

    session_id = ""
    url_elicitation = False

    def __init__(self, *, modern: bool = False, replica: str = "http://127.0.0.1:1/mcp") -> None:
        self.modern = modern
        self._replica = replica

    async def outbound(self, call: Call, info: BackendInfo, lost: Outbound | None) -> Outbound:
        return Outbound([], call.body, pick=lambda: self._replica)


HANDSHAKE_ERA = BackendInfo("2025-11-25", {}, (), {}, {"name": "backend", "version": "1"}, None)


def forwarder(
    upstream: Any = None, audit: Audit | None = None, *, gates: BackendGates | None = None,  # None: no waiting
    info: BackendInfo = HANDSHAKE_ERA, pages: PageLimits | None = None, codec: CursorCodec | None = None,
    hooks: Any = None, counters: Counters | None = None,
) -> Forwarder:
    """The forwarder of a gateway whose ports are faked: every backend speaks `info`'s eras."""
    upstream = upstream or DownUpstream()
    pages = pages or PageLimits()
    tracer = Tracer()
    codec = codec or CursorCodec(b"c" * 32)
    lists = HostLists(BackendClient(upstream, KnownBackends(info)), codec, ListSettings(pages=pages), Counters())
    return Forwarder(upstream=upstream, backends=KnownBackends(info), lists=lists, pieces=ListPieces(codec, pages),
                     local=LocalTools(tracer, ToolSearch(lists, NoFinder()), codec, pages), limiter=NoLimiter(),
                     audit=audit or Audit(), counters=counters or Counters(), tracer=tracer,
                     gates=gates or BackendGates(queue_seconds=0.0), hooks=hooks)
