"""The tenant's active MCP sessions as the console and the API list them: the session store's
per-tenant index in Redis (`apps.gateway.sessions.session_list`), with each key's name."""

from __future__ import annotations

from dataclasses import dataclass

from apps.common.redis import redis_client
from apps.gateway.sessions import TENANT_INDEX, session_list
from apps.tenants.models import ApiKey, Tenant


@dataclass(frozen=True)
class BackendSessionRow:
    map_key: str
    replica: str
    version: str
    session_id: str


@dataclass(frozen=True)
class SessionRow:
    id: str
    instance: str
    protocol_version: str
    transport: str
    key_id: int
    key_name: str
    virtual_host: str
    idle_seconds: float | None  # None: past its idle expiry, being closed
    backends: list[BackendSessionRow]

    @property
    def short_id(self) -> str:
        """The owner and the first characters of the random part: enough to tell sessions apart."""
        instance, _, rest = self.id.partition(".")
        return f"{instance}.{rest[:8]}…"


def session_row_list(*, tenant: Tenant, offset: int, limit: int) -> list[SessionRow]:
    """One page of the tenant's sessions, newest first: two Redis round trips and one query."""
    sessions, _ = session_list(redis_client(), tenant_id=tenant.pk, offset=offset, limit=limit)
    key_ids = {s.state.key_id for s in sessions}
    names = dict(ApiKey.objects.filter(tenant=tenant, pk__in=key_ids).values_list("pk", "name")) if key_ids else {}
    return [
        SessionRow(
            id=s.state.id, instance=s.instance, protocol_version=s.state.protocol_version,
            transport=s.state.transport, key_id=s.state.key_id, key_name=names.get(s.state.key_id, ""),
            virtual_host=s.state.vhost,
            idle_seconds=None if s.idle_seconds == float("inf") else round(s.idle_seconds, 1),
            backends=[
                BackendSessionRow(key, b.replica, b.version, b.session_id or "")
                for key, b in sorted(s.state.backends.items())
            ],
        )
        for s in sessions
    ]


def session_count(*, tenant: Tenant) -> int:
    return int(redis_client().zcard(TENANT_INDEX.format(tenant.pk)))


class SessionSequence:
    """The tenant's sessions as a sequence a Paginator (or DRF's LimitOffsetPagination) pages
    through: `len` counts them, a slice reads that page only."""

    def __init__(self, *, tenant: Tenant) -> None:
        self._tenant = tenant

    def __len__(self) -> int:
        return session_count(tenant=self._tenant)

    def __getitem__(self, index: slice) -> list[SessionRow]:
        if not isinstance(index, slice) or index.step not in (None, 1):
            raise TypeError("sessions are read a page (a slice) at a time")
        start = index.start or 0
        stop = index.stop if index.stop is not None else start + 50
        return session_row_list(tenant=self._tenant, offset=start, limit=max(0, stop - start))
