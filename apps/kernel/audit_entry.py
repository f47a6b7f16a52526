"""What one call leaves behind: the audit row the gateway writes and the audit app stores and shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from apps.kernel.identity import Principal


class Interception(TypedDict):
    """One interceptor's decision on a call, as its audit row keeps it (docs/interceptors.md): every
    decision but a built-in's plain pass. `findings` name what was found by type, never the values."""

    interceptor: str
    kind: str
    phase: str  # request | result
    action: str  # pass (a webhook's) | rewrite | refuse | flag | failed_open | failed_closed
    findings: NotRequired[list[str]]
    ms: NotRequired[float]  # a webhook's round trip
    reason: NotRequired[str]


@dataclass(frozen=True, slots=True)
class AuditEntry:
    principal: Principal
    virtual_host: str
    backend: str
    method: str
    exposed_name: str
    upstream_name: str
    outcome: str  # ok | tool_error | error | cancelled | denied | rate_limited | over_budget | working
    error_code: int | None
    latency_ms: float
    bytes_in: int
    bytes_out: int
    session_id: str
    trace_id: str
    at: float  # unix time the call started
    backend_kind: str = "mcp"  # mcp | openapi
    rule: str = ""  # the access rule that decided the call, if one did
    limit_state: str = ""  # "" no limit applies | ok | limited | unchecked (store unreachable)
    arguments: Any = None  # as the tenant's audit setting keeps them (None: not kept)
    cost: int = 0  # budget units the call costs (charged at admission); 0 when it was refused
    #: The backend's id of the task the call created (outcome `working` until a `TaskEnd` comes).
    task_id: str = ""
    #: What the host's interceptors decided on the call (empty: nothing but plain passes).
    interceptions: tuple[Interception, ...] = ()

    @property
    def api_key_id(self) -> int | None:
        """The API key the call was made with; None for an access token's call and for a console
        user's test identity (neither is a key: their ids are negative)."""
        principal = self.principal
        return principal.key_id if principal.issuer is None and principal.key_id >= 0 else None

    @property
    def origin(self) -> str:
        """Where the call came from: `mcp` (an MCP client) or `console` (the console's tool tester,
        run by `principal.console_user`)."""
        return "console" if self.principal.console_user else "mcp"


@dataclass(frozen=True, slots=True)
class TaskEnd:
    """A task the gateway saw end (in the answer to a request that follows it): the final outcome
    of the audit row of the call that created it, found by tenant, virtual host, backend and the
    backend's task id. `outcome` is ok | tool_error | error | cancelled."""

    tenant_id: int
    virtual_host: str
    backend: str
    task_id: str
    outcome: str
    error_code: int | None
    at: float  # unix time the end was seen
