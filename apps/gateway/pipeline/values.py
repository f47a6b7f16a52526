"""Plain values the pipeline works on. Built by the gateway's adapters from configuration snapshots,
sessions and HTTP requests; nothing here knows where they came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from apps.kernel.names import Naming

if TYPE_CHECKING:
    from apps.gateway.pipeline.ports import Egress, ToolServer
    from apps.kernel.costs import ToolCosts
    from apps.kernel.curation import Curation
    from apps.kernel.interceptors import Interceptors
    from apps.kernel.policy import Policy


@dataclass(frozen=True, slots=True)
class BackendView:
    """A backend as a virtual host mounts it. `server` is set for backends the gateway answers
    itself (OpenAPI services); the others are MCP servers reached at `urls`."""

    id: int
    name: str
    transport: str
    urls: tuple[str, ...]
    timeout: float
    kind: str = "mcp"
    server: ToolServer | None = field(default=None, compare=False, repr=False)
    #: How the gateway authenticates to the backend (None: it sends no credential).
    egress: Egress | None = field(default=None, compare=False, repr=False)
    #: Most calls this instance forwards to the backend at once, over all its replicas (0: no limit).
    max_concurrency: int = 0
    #: Whether the backend may be reached at private addresses (its tenant's setting; link-local
    #: and metadata addresses never are).
    allow_private: bool = False


@dataclass(frozen=True, slots=True)
class ToolSearchConfig:
    """A host's `tool_search` tool (`tool_search.py`): the name it is listed and called by, and whether
    `tools/list` shows it alone (`only`; the other tools stay callable by name)."""

    name: str = "tool_search"
    only: bool = False


@dataclass(frozen=True, slots=True)
class VirtualHostView:
    tenant_id: int
    tenant_slug: str
    slug: str
    mounts: Mapping[str, BackendView]  # map key -> backend
    aliases: Mapping[str, tuple[str, str]]  # exposed alias -> (map key, upstream name)
    anonymous_key_id: int | None = None
    audit_arguments: str = "off"  # what audit rows keep of arguments: off | hash | full
    #: Which tools the host serves, with which description (`apps.kernel.curation`); None: every tool as is.
    curation: Curation | None = field(default=None, compare=False, repr=False)
    #: The naming contract (`apps.kernel.names.Naming`), built from `mounts`, `aliases` and `curation` when not given.
    naming: Naming = field(default=None, compare=False, repr=False)  # type: ignore[assignment]
    #: Who may see and call which tool (`apps.kernel.policy.Policy`); None: every key of the tenant, everything.
    policy: Policy | None = field(default=None, compare=False, repr=False)
    #: What a `tools/call` costs against budgets (`apps.kernel.costs.ToolCosts`); None: every call costs 1 unit.
    costs: ToolCosts | None = field(default=None, compare=False, repr=False)
    #: The host's `tool_search` tool; None: it has none.
    tool_search: ToolSearchConfig | None = None
    #: What inspects each call's request and result (`apps.kernel.interceptors`); None: nothing.
    interceptors: Interceptors | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.naming is None:
            object.__setattr__(self, "naming", Naming.build(self.mounts, self.aliases, self.curation))

    @property
    def composed(self) -> bool:
        """Whether the gateway looks into messages: names rewritten (several backends, or aliases),
        tools filtered by a policy, or a `tool_search` tool added. Otherwise every message passes
        through to the one backend."""
        return self.policy is not None or self.tool_search is not None or self.naming.composed


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """What a backend told the gateway about itself, probed once per process.

    `legacy_version` is the newest handshake revision it accepted (None: it refused `initialize`);
    `modern_versions` the stateless revisions from `server/discover` (empty: it has none)."""

    legacy_version: str | None
    legacy_capabilities: Mapping[str, Any]
    modern_versions: tuple[str, ...]
    modern_capabilities: Mapping[str, Any]
    server_info: Mapping[str, Any]
    instructions: str | None


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One downstream HTTP request to the MCP endpoint. Header names are lower-case."""

    method: str
    tenant: str
    vhost: str
    headers: Mapping[str, str]
    body: bytes
    raw_header_names: tuple[str, ...] = ()
    client: str = ""
    scheme: str = "http"
    #: Which endpoint of the host: "" (Streamable HTTP), "sse" or "messages" (HTTP+SSE, 2024-11-05).
    endpoint: str = ""
    #: The raw query string (HTTP+SSE carries the session id there).
    query: str = ""


@dataclass(slots=True)
class BackendSession:
    session_id: str | None
    version: str
    replica: str
    #: Sent with each of its requests (`replicas.ROUTING_HASH_HEADER`); "" for none.
    routing_hash: str = ""


@dataclass(slots=True)
class SessionState:
    """A downstream legacy session. Stored in the session store; any instance can serve it."""

    id: str
    tenant_id: int
    vhost: str
    key_id: int
    protocol_version: str
    client_capabilities: Any
    client_info: Any
    backends: dict[str, BackendSession] = field(default_factory=dict)
    #: How the client reaches the session: "streamable-http", or "sse" (HTTP+SSE: the answers go
    #: to the session's event stream, wherever it is held).
    transport: str = "streamable-http"
    #: The tenant's slug, so a sweep of expired sessions finds the host's backends.
    tenant_slug: str = ""
