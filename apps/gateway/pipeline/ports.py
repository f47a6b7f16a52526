"""The outside world as the pipeline needs it. `apps.gateway.wiring` plugs in the implementations
(configuration snapshots, Redis sessions, the pooled HTTP client, the batched audit writer)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from apps.gateway.pipeline.values import BackendInfo, BackendSession, BackendView, SessionState, VirtualHostView
from apps.gateway.protocol.sse import SseEvent
from apps.kernel.audit_entry import AuditEntry, TaskEnd
from apps.kernel.identity import Budget, Limit, OwnIssuerView, Principal, TokenIssuerView
from apps.kernel.interceptors import Webhook
from apps.kernel.interceptors.base import Decision
from apps.kernel.interceptors.webhook import HookRequest
from apps.kernel.search_tool import Found


class UpstreamUnavailable(Exception):
    """The backend could not be reached or broke the exchange (not: it answered with an error)."""


class ResponseTooLarge(UpstreamUnavailable):
    """A backend's response (or one event of its stream) is over `limit` bytes, the most the
    gateway reads of it; the connection is dropped."""

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class ReplicaUnreachable(UpstreamUnavailable):
    """No connection to the replica could be made: nothing was sent, so sending elsewhere is safe."""


class StoreUnavailable(Exception):
    """The shared session store cannot be reached; the request cannot be served right now."""


class SessionLimitReached(Exception):
    """The caller's key already holds `limit` usable sessions: no new one until one ends."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the key holds {limit} open sessions already")
        self.limit = limit


class CredentialUnavailable(UpstreamUnavailable):
    """The gateway has no credential to send to a backend for this caller (none is mapped to it,
    or the token endpoint failed): the backend cannot be used, as if unreachable (-32004). The
    message says why, naming no secret."""


class ConnectionRequired(CredentialUnavailable):
    """The backend takes each person's own account, and the caller has not connected theirs (or
    is no person): the call is answered with where to connect it (`path`, on the gateway's site)."""

    def __init__(self, message: str, *, backend: str, path: str) -> None:
        super().__init__(message)
        self.backend = backend
        self.path = path


class Egress(Protocol):
    """How the gateway authenticates to one backend (`BackendView.egress`)."""

    #: Whether callers send different credentials (a backend's answer to one then says nothing of
    #: what it would answer another: a refusal is that caller's, not the backend's).
    per_caller: bool

    async def headers(self, principal: Principal | None) -> tuple[tuple[str, str], ...]:
        """The headers that authenticate a request on behalf of `principal` (None: the gateway's
        own requests: probing, lists, change subscriptions). Raises CredentialUnavailable."""


class TokenVerifier(Protocol):
    async def verify(
        self, token: str, issuers: Sequence[TokenIssuerView]
    ) -> tuple[TokenIssuerView, Mapping[str, Any]]:
        """The issuer that signed `token` and its verified claims (signature, `iss`, `aud`, `exp`,
        `nbf`); raises InvalidToken."""


class TenantDirectory(Protocol):
    """One tenant's configuration as of some version: read without I/O."""

    @property
    def issuers(self) -> tuple[TokenIssuerView, ...]:
        """Authorization servers whose JWT access tokens the tenant accepts."""

    @property
    def own_issuer(self) -> OwnIssuerView | None:
        """The gateway's own authorization server for the tenant, when it is on."""

    def principal_for_token(
        self, issuer: TokenIssuerView, claims: Mapping[str, Any], *, token: str = "", own: bool = False
    ) -> Principal:
        """The principal a verified token stands for (subject, team and scopes from its claims);
        `token`: the token itself, kept on the principal for an egress token exchange; `own`: the
        gateway's own authorization server issued it, so its subject is a person (a username)."""

    def virtual_host(self, slug: str) -> VirtualHostView | None: ...

    def principal_for_credential(self, credential: str) -> Principal | None:
        """The principal a presented API key stands for, or None (unknown, revoked or expired)."""

    def principal_for_key(self, key_id: int) -> Principal | None: ...


class Directory(Protocol):
    async def tenant(self, slug: str) -> TenantDirectory | None: ...

    def recheck(self) -> None:
        """Look for a configuration change on the next request, however recently it last looked."""


class ChangeFeed(Protocol):
    """Backend list changes shared by every gateway instance."""

    def publish(self, backend_id: int, notification: str) -> None:
        """Tell the other instances, without waiting; never raises."""

    def start(self, on_change: Callable[[int, str], object]) -> None:
        """Call `on_change(backend id, notification)` for each change another instance shares."""


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """A replica found down or up again by some gateway instance: since when (Unix time) and which
    instance (its name; empty: this one)."""

    url: str
    up: bool
    since: float
    instance: str = ""


class HealthFeed(Protocol):
    """Which backend replicas are down, shared by every gateway instance and recorded for readers
    (the console, a newly started instance)."""

    def publish(self, state: ReplicaState) -> None:
        """Record this instance's transition as the replica's current state and tell the other
        instances, without waiting; never raises."""

    def confirm(self, states: Sequence[ReplicaState]) -> None:
        """Record that a check has just found these replicas still down (a record nobody confirms
        for long is stale), without waiting; never raises."""

    def start(self, on_state: Callable[[ReplicaState], object]) -> None:
        """Call `on_state` with each current record (read once, without waiting), then with every
        transition another instance shares."""


class SessionStore(Protocol):
    """Raises StoreUnavailable when the store cannot be reached."""

    def new_id(self) -> str: ...

    def is_well_formed(self, session_id: str) -> bool:
        """True when the id carries a valid tag from some gateway instance (a hash, no I/O)."""

    async def save(self, state: SessionState, *, create: bool) -> bool:
        """Store the state: a new session (`create`), or an update of one that must still exist.
        False when an update found the session gone (ended meanwhile, maybe on another instance).
        Raises SessionLimitReached when a new session's key holds as many as it may (counted
        across all instances, and the new one entered, in one step: never more than the cap)."""

    async def load(
        self, session_id: str, *, tenant_id: int, key_id: int | None = None, fresh: bool = False
    ) -> SessionState | None:
        """The state, from a short-lived cache unless `fresh`. `tenant_id` and `key_id`: the tenant
        and key the caller expects it to be of (the store keeps each tenant's and each key's
        sessions in order of use, the latter for the per-key cap: callers that know the key pass
        it); a session of another tenant or key is still returned, for the caller to refuse."""

    async def save_backend(self, session_id: str, map_key: str, session: BackendSession) -> bool:
        """Record the session's backend session for `map_key` (replacing any), leaving the others
        as they are. False when the session is gone."""

    async def delete(self, session_id: str) -> None: ...

    async def claim(self, session_id: str, part: str, *, seconds: float) -> bool:
        """Whether this caller may create `part` of the session now: True for exactly one caller
        across all instances until `release` or `seconds` pass."""

    async def release(self, session_id: str, part: str) -> None: ...

    async def take_expired(self, *, limit: int = 100) -> list[SessionState]:
        """Sessions idle past their expiry, each handed to one caller across all instances; they
        are gone for clients already, and stay stored until `delete`."""


class Inbox(Protocol):
    """The messages posted to one session while its stream is open here."""

    #: True once a stream of the session opened with `replace` took over: `get` answers None at once.
    ended: bool

    async def get(self, timeout: float) -> bytes | None:
        """The next message (None when `timeout` seconds pass without one, or when ended)."""

    def close(self) -> None:
        """Stop receiving; never raises."""


class Mailbox(Protocol):
    """Delivers a session's outgoing messages to the event stream that the client holds open,
    on whichever gateway instance holds it (HTTP+SSE answers every POST on that stream)."""

    async def post(self, session_id: str, messages: Sequence[bytes]) -> None:
        """Deliver in order; dropped when no instance holds the stream (the client reconnects and
        asks again). Raises StoreUnavailable when the relay cannot be reached."""

    async def open(self, session_id: str, *, replace: bool = False) -> Inbox:
        """Start receiving the session's messages here (the stream now lives on this instance).
        `replace`: the session has one stream; those open before, on any instance, end."""


@dataclass(frozen=True, slots=True)
class Admission:
    """A limiter's answer. `refused_by`: the rate limit or budget that refused (None: admitted);
    for a budget, `period` says which of its caps ("day" or "month"). `checked`: False when the
    store could not be asked and the configured fail mode decided."""

    refused_by: Limit | Budget | None = None
    retry_after: float = 0.0  # seconds until the refused call would pass (a budget: its period resets)
    checked: bool = True
    period: str = ""


class RateLimiter(Protocol):
    async def admit(self, limits: Sequence[Limit], budgets: Sequence[Budget] = (), cost: int = 1) -> Admission:
        """Count one call against every rate limit and `cost` units against every budget, atomically
        across all instances: either all of them have room and each is charged, or one without room
        refuses and none is charged."""


class UpstreamReply(Protocol):
    status: int
    headers: Mapping[str, str]

    @property
    def content_type(self) -> str: ...

    async def read(self, limit: int = ...) -> bytes:
        """The whole body; over `limit` bytes is UpstreamUnavailable."""

    def events(self) -> AsyncIterator[SseEvent]: ...

    def close(self) -> None: ...


class Upstream(Protocol):
    async def send(
        self,
        backend: BackendView,
        replica: str,
        method: str,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        *,
        timeout: float,
        long_lived: bool | None = None,
    ) -> UpstreamReply:
        """One HTTP exchange with a backend replica; raises UpstreamUnavailable or TimeoutError.
        `long_lived`: whether the answer may stay silent past `timeout` (a backend's own channel);
        None: a GET or a `subscriptions/listen` may, the answer to any other request may not."""


class ToolServer(Protocol):
    """A backend the gateway answers itself, such as an OpenAPI service compiled to tools: it lists
    its tools and runs calls; no MCP exchange with the backend takes place."""

    @property
    def info(self) -> BackendInfo: ...

    def tools_json(self) -> bytes:
        """The `tools/list` entries as one encoded JSON array, in a stable order."""

    def has_tool(self, name: str) -> bool: ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        headers: Sequence[tuple[str, str]] = (),
        principal: Principal | None = None,
    ) -> dict[str, Any]:
        """Run the tool `name` (which exists) on behalf of `principal` and return its
        `CallToolResult`: bad arguments and failed operations are results with `isError`. `headers`
        go along to the service (trace context). Raises UpstreamUnavailable or TimeoutError when
        the service cannot answer, CredentialUnavailable when there is no credential to send."""


class ToolFinder(Protocol):
    """The tool index behind `tool_search` (docs/tool-search.md)."""

    async def find(
        self,
        *,
        tenant_id: int,
        backends: Sequence[int],
        restricted: Sequence[tuple[int, Sequence[str]]],
        query: str,
        k: int,
        also: Sequence[str] = (),
    ) -> Found:
        """The best `k` tools for `query` among every tool of `backends` and, of each backend in
        `restricted`, the names listed only; never any other (prerequisites may name others).
        `also`: other phrasings of the same need, searched too and counting less than `query`.
        Raises UpstreamUnavailable when the index cannot be searched."""

    def prepare(self) -> None:
        """Start, in the background, what the first search needs (the embedding model); returns
        at once, and costs nothing once started."""


class AuditSink(Protocol):
    def record(self, entry: AuditEntry) -> None:
        """Queue one row; never blocks and never raises on the request path."""

    def task_ended(self, end: TaskEnd) -> None:
        """Queue the final outcome of the row of the call that created the task; the same terms as
        `record`. Seen again (every later `tasks/get` of an ended task shows it), it changes nothing."""


class HookFailed(Exception):
    """A webhook interceptor gave no usable answer (timed out, unreachable, refused by the SSRF
    guard, or answered something that is not a decision); `kind` is timeout | unavailable | bad_answer
    | error (it could not be asked at all)."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class InterceptorHooks(Protocol):
    """Asks webhook interceptors (docs/interceptors.md#webhooks)."""

    async def ask(self, webhook: Webhook, request: HookRequest) -> Decision:
        """The outside service's decision on `request`, posted signed to `webhook.url` and waited
        for at most `webhook.timeout`; raises HookFailed when there is none."""
        ...
