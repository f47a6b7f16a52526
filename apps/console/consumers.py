"""The audit log's live tail: a websocket at `/console/t/<tenant>/audit/live?<filters>`.

The console's session cookie signs the user in (channels' AuthMiddlewareStack); the tenant is
resolved by the same rule as the pages (`tenant_get_for`), so a user gets only the tails of
tenants they may see (others are refused: closed with 4404, anonymous with 4403). Rows come from
the audit writer (`apps.audit.live`) through the tenant's channel-layer group; each is matched
against the page's filters and sent rendered, ready to go at the top of the table. While open, a
tail keeps its tenant marked as watched (the writer publishes only watched tenants' rows); the
mark is set before the websocket is accepted, so the tail gets every batch written after that."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.http import Http404, QueryDict
from django.template.loader import render_to_string

from apps.audit.forms import AuditFilterForm
from apps.audit.live import audit_live_group, audit_live_record, audit_live_watch, audit_live_watching
from apps.audit.selectors import AuditFilter
from apps.tenants.access import access_get, tenant_get_for
from apps.tenants.models import Tenant

CLOSE_ANONYMOUS = 4403
CLOSE_UNSEEN = 4404
CLOSE_BAD_FILTER = 4400


@database_sync_to_async
def _tail_open(user: Any, slug: str, query: str) -> tuple[Tenant, AuditFilter | None]:
    """The tenant (Http404 when the user may not see it) and the filter (None when invalid)."""
    tenant = tenant_get_for(access=access_get(user=user), slug=slug)
    form = AuditFilterForm(QueryDict(query), tenant=tenant)
    return tenant, form.audit_filter() if form.is_valid() else None


class AuditTailConsumer(AsyncWebsocketConsumer):
    group: str | None = None
    watching: asyncio.Task[None] | None = None
    filters: AuditFilter

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_ANONYMOUS)
            return
        query = self.scope.get("query_string", b"").decode("latin-1")
        try:
            tenant, filters = await _tail_open(user, self.scope["url_route"]["kwargs"]["tenant"], query)
        except Http404:
            await self.close(code=CLOSE_UNSEEN)
            return
        if filters is None:
            await self.close(code=CLOSE_BAD_FILTER)
            return
        self.filters = filters
        self.group = audit_live_group(tenant_id=tenant.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await audit_live_watch(tenant_id=tenant.pk)  # before accepting: see the module's docstring
        self.watching = asyncio.get_running_loop().create_task(audit_live_watching(tenant_id=tenant.pk))
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.watching is not None:
            self.watching.cancel()  # the mark expires by itself: other tails may still hold it
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The tail only sends."""

    async def audit_rows(self, message: dict[str, Any]) -> None:
        rows = [row for row in map(audit_live_record, message["rows"]) if self.filters.matches(row)]
        if rows:
            rows.reverse()  # newest first, as in the table
            await self.send(text_data=render_to_string("console/audit/_rows.html", {"rows": rows, "live": True}))
