"""The tenant's active MCP sessions as the console and the API list them: the sessions the store
still serves (`apps.gateway.adapters.redis_session_store.session_list`, read from Redis), with each key's name."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from apps.common.redis import redis_client
from apps.gateway.adapters.redis_session_store import ActiveSession, session_count, session_list
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
    idle_seconds: float
    backends: list[BackendSessionRow]

    @property
    def short_id(self) -> str:
        """The owner and the first characters of the random part: enough to tell sessions apart."""
        instance, _, rest = self.id.partition(".")
        return f"{instance}.{rest[:8]}…"


def session_rows(*, tenant: Tenant, sessions: list[ActiveSession]) -> list[SessionRow]:
    """The sessions as rows, with their keys' names: one query."""
    key_ids = {s.state.key_id for s in sessions}
    names = dict(ApiKey.objects.filter(tenant=tenant, pk__in=key_ids).values_list("pk", "name")) if key_ids else {}
    return [
        SessionRow(
            id=s.state.id, instance=s.instance, protocol_version=s.state.protocol_version,
            transport=s.state.transport, key_id=s.state.key_id, key_name=names.get(s.state.key_id, ""),
            virtual_host=s.state.vhost, idle_seconds=round(s.idle_seconds, 1),
            backends=[
                BackendSessionRow(key, b.replica, b.version, b.session_id or "")
                for key, b in sorted(s.state.backends.items())
            ],
        )
        for s in sessions
    ]


class SessionSequence:
    """The tenant's usable sessions, most recently used first, as a sequence a Paginator (or DRF's
    LimitOffsetPagination) pages through: `len` counts them (one Redis round trip), a slice reads
    that page only (two, whatever the tenant's number of sessions) and its keys' names (one query)."""

    def __init__(self, *, tenant: Tenant) -> None:
        self._tenant = tenant
        self._ttl = settings.GATEWAY_SESSION_TTL_SECONDS

    def __len__(self) -> int:
        return session_count(redis_client(), tenant_id=self._tenant.pk, ttl_seconds=self._ttl)

    def __getitem__(self, index: slice) -> list[SessionRow]:
        if not isinstance(index, slice) or index.step not in (None, 1):
            raise TypeError("sessions are read a page (a slice) at a time")
        start = index.start or 0
        stop = index.stop if index.stop is not None else start + 50
        sessions, _ = session_list(
            redis_client(), tenant_id=self._tenant.pk, ttl_seconds=self._ttl, offset=start, limit=max(0, stop - start)
        )
        return session_rows(tenant=self._tenant, sessions=sessions)
