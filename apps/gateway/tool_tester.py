"""The console's tool tester (docs/console.md, "Trying a tool"): one `tools/call` of a tool, made by
a console user on a virtual host that serves it, as one of the tenant's API keys or as the user's
own test identity, through the gateway's own call path (`Gateway.call_as`, on the event loop that
serves MCP clients): the access policy, rate limits, budgets, the backend's concurrency limit and
the audit row apply to it as to any client's call, and the row says it came from the console.

What an OpenAPI tool sent is caught on its way out (`apps.catalog.openapi.outgoing.exchanges`,
which only this module sets), credentials redacted."""

from __future__ import annotations

import datetime
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from apps.catalog.models import EgressIdentity, VirtualHost
from apps.catalog.openapi.outgoing import Exchange, exchanges
from apps.catalog.selectors import virtual_host_naming_get
from apps.gateway.pipeline.ports import StoreUnavailable
from apps.gateway.protocol import jsonrpc
from apps.gateway.protocol.versions import (
    LATEST_MODERN,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
)
from apps.gateway.wiring import gateway
from apps.kernel.identity import CONSOLE_KEY_PREFIX, Principal
from apps.policies.selectors import budgets_effective
from apps.tenants.models import ApiKey, Tenant

#: A test identity's key name is this and the user's username.
TEST_IDENTITY_PREFIX = CONSOLE_KEY_PREFIX
#: The budget scope of test identities (only the plan's caps apply: no budget can be stored for it).
TEST_IDENTITY_SCOPE = "console"
#: Test identities' key ids lie below this: never an API key's (positive) nor an access token's
#: (from -1 down to -2**56).
_TEST_IDENTITY_IDS = -(2**62)
_CLIENT_INFO = {"name": "mcp-gateway-console", "version": "1"}


class TryRefused(Exception):
    """The call cannot be made (nothing was sent, nothing audited); the message says why, for the
    person trying."""


@dataclass(frozen=True, slots=True)
class TryHost:
    """A virtual host that serves the tool: under `map_key`, by the name `exposed_name`."""

    virtual_host: str
    map_key: str
    exposed_name: str

    @property
    def value(self) -> str:
        """What names this choice in a form (slugs hold no colon)."""
        return f"{self.virtual_host}:{self.map_key}"


@dataclass(frozen=True, slots=True)
class TryResult:
    """One tried call: where and as whom, the JSON-RPC response (None when the reply was not one),
    the HTTP status the reply carried, how long it took, the trace that names its audit row, and
    what an OpenAPI tool sent (empty for an MCP tool, and when nothing was sent)."""

    virtual_host: str
    exposed_name: str
    caller: str
    status: int
    response: Mapping[str, Any] | None
    latency_ms: float
    trace_id: str
    started_at: datetime.datetime
    exchanges: tuple[Exchange, ...] = ()

    @property
    def result(self) -> Mapping[str, Any] | None:
        found = (self.response or {}).get("result")
        return found if isinstance(found, Mapping) else None

    @property
    def error(self) -> Mapping[str, Any] | None:
        found = (self.response or {}).get("error")
        return found if isinstance(found, Mapping) else None


def tool_try_hosts_list(*, tenant: Tenant, backend_id: int, upstream_name: str) -> list[TryHost]:
    """The tenant's virtual hosts that mount the backend, with the name the tool has on each (by
    the gateway's naming contract, curation included; a host whose names leave the tool out is left
    out), by host slug. From the stored configuration: the call itself asks the gateway's."""
    found = []
    for host in VirtualHost.objects.filter(tenant=tenant, mounts__backend_id=backend_id).distinct().order_by("slug"):
        naming = virtual_host_naming_get(virtual_host=host)
        for map_key in sorted(host.mounts.filter(backend_id=backend_id).values_list("map_key", flat=True)):
            if (exposed := naming.expose_tool(map_key, upstream_name)) is not None:
                found.append(TryHost(host.slug, map_key, exposed))
    return found


def console_principal(*, tenant: Tenant, username: str, user_id: int) -> Principal:
    """A console user's own caller for trying tools: key name `console:<username>`, no team, no
    scopes and no rate limit; the tenant's plan caps its budget (scope `console`); the access rules
    for the whole tenant (and any naming the key `console:<username>`) apply. Reads the tenant's
    budgets (call from a thread)."""
    budget = budgets_effective(tenant=tenant).of(TEST_IDENTITY_SCOPE, username)
    return Principal(
        tenant_id=tenant.pk, tenant_slug=tenant.slug, key_id=_TEST_IDENTITY_IDS - user_id,
        key_name=f"{TEST_IDENTITY_PREFIX}{username}", team=None, budgets=(budget,) if budget else (),
        console_user=username, person=username,
    )


def _key_refusal(key: ApiKey, tenant: Tenant, *, backend_id: int, user_id: int) -> str | None:
    if key.tenant_id != tenant.pk:
        return "That key belongs to another tenant."
    if key.revoked_at is not None:
        return f"The key {key.name!r} is revoked: it cannot call."
    if key.expires_at is not None and key.expires_at <= timezone.now():
        return f"The key {key.name!r} has expired: it cannot call."
    # A key with its own secret for the backend (one per caller: a person's token) sends that secret:
    # only the key's owner may try tools with it.
    if key.owner_id != user_id and EgressIdentity.objects.filter(
        credential__backend_id=backend_id, subject_kind=EgressIdentity.Subject.KEY, subject_name=key.name,
    ).exists():
        return (f"The key {key.name!r} has its own credential for this backend: only its owner may try tools "
                "with it. Try as yourself, or as another key.")
    if key.acts_as_owner and key.owner_id != user_id:
        return (f"Calls with the key {key.name!r} are its owner's (their own accounts at backends): only its owner "
                "may try tools with it. Try as yourself, or as another key.")
    return None


async def tool_call_try(
    *,
    tenant: Tenant,
    virtual_host: str,
    map_key: str,
    backend_id: int,
    upstream_name: str,
    arguments: Mapping[str, Any],
    key: ApiKey | None,
    username: str,
    user_id: int,
) -> TryResult:
    """Call the tool `upstream_name` of the backend under `map_key` of `virtual_host`, by the name
    the gateway gives it there, with `arguments`, as `key` (neither revoked nor expired) or, without
    one, as the test identity of the console user `username` (`console_principal`). Runs on the event
    loop of the gateway that serves MCP clients in this process (an async view's). TryRefused when
    the call cannot be made: the host, the mount or the tool is not served (as the gateway sees the
    configuration now), or the key may not call."""
    if key is not None and (refusal := await sync_to_async(_key_refusal)(
            key, tenant, backend_id=backend_id, user_id=user_id)) is not None:
        raise TryRefused(refusal)
    instance = gateway()
    try:
        directory = await instance.directory.tenant(tenant.slug)
    except StoreUnavailable as exc:
        raise TryRefused(f"The gateway cannot read its configuration now ({exc}); try again.") from None
    vhost = directory.virtual_host(virtual_host) if directory is not None else None
    if directory is None or vhost is None:
        raise TryRefused(f"The gateway does not serve the virtual host {virtual_host!r}.")
    backend = vhost.mounts.get(map_key)
    if backend is None or backend.id != backend_id:
        raise TryRefused(f"The virtual host {virtual_host!r} does not mount the tool's backend under {map_key!r}.")
    exposed = vhost.naming.expose_tool(map_key, upstream_name)
    if exposed is None:
        raise TryRefused(f"The virtual host {virtual_host!r} does not serve the tool {upstream_name!r}.")
    if key is not None:
        principal = directory.principal_for_key(key.pk)
        if principal is None:
            raise TryRefused(f"The key {key.name!r} is revoked or expired: it cannot call.")
        principal = replace(principal, anonymous=False, console_user=username)
    else:
        principal = await sync_to_async(console_principal)(tenant=tenant, username=username, user_id=user_id)
    message = jsonrpc.classify({
        "jsonrpc": "2.0", "id": f"console-{secrets.token_hex(6)}", "method": "tools/call",
        "params": {"name": exposed, "arguments": dict(arguments), "_meta": {
            META_PROTOCOL_VERSION: LATEST_MODERN, META_CLIENT_CAPABILITIES: {}, META_CLIENT_INFO: _CLIENT_INFO,
        }},
    })
    trace_id = secrets.token_hex(16)
    sent: list[Exchange] = []
    token = exchanges.set(sent)
    started_at, started = timezone.now(), time.perf_counter()
    try:
        reply = await instance.call_as(vhost, principal, message,
                                       headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"})
    finally:
        exchanges.reset(token)
    latency_ms = (time.perf_counter() - started) * 1000.0
    try:
        response = jsonrpc.loads(reply.body) if reply.body else None
    except ValueError:
        response = None
    return TryResult(
        virtual_host=virtual_host, exposed_name=exposed, caller=principal.label, status=reply.status,
        response=response if isinstance(response, dict) else None, latency_ms=latency_ms, trace_id=trace_id,
        started_at=started_at, exchanges=tuple(sent),
    )
