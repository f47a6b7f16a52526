"""The audit log's live tail: a websocket at `/console/t/<tenant>/audit/live?<filters>`.

The console's session cookie signs the user in (channels' AuthMiddlewareStack); the tenant is
resolved by the same rule as the pages (`tenant_get_for`), so a user gets only the tails of
tenants they may see (others are refused: closed with 4404, anonymous with 4403). Rows come from
the audit writer (`apps.audit.live`) through the tenant's channel-layer group; each is matched
against the page's filters and sent rendered, ready to go at the top of the table. While open, a
tail keeps its tenant marked as watched (the writer publishes only watched tenants' rows); the
mark is set before the websocket is accepted, so the tail gets every batch written after that.

Each message to the browser is JSON: `{"rows": html}` to put at the top, or `{"reload": html,
"missed": bool}` to replace the table with the newest page read from the database. A tail sends a
reload once it is open (what was written between the page and the tail), and whenever the writers'
numbering shows it missed rows (`apps.audit.live.TailSequence`); then `missed` is true and the page
says so. Reloads are at most one per `RELOAD_SECONDS`: a burst is read once.

A tail whose user may no longer see its tenant (membership removed, user deactivated or deleted)
is closed with 4404, as a new one would be refused: the user's group hears of every such change
(`apps.tenants.access_changes`), and a tail about to send rows (live or reloaded) checks again
when its last check is older than `ACCESS_RECHECK_SECONDS` (see `apps.audit.live`)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.contrib.auth import get_user_model
from django.http import Http404, QueryDict
from django.template.loader import render_to_string

from apps.audit import live
from apps.audit.forms import AuditFilterForm
from apps.audit.live import (
    TailSequence,
    audit_live_group,
    audit_live_record,
    audit_live_watch,
    audit_live_watching,
)
from apps.audit.selectors import AuditFilter, audit_record_page
from apps.tenants.access import access_get, tenant_get_for
from apps.tenants.access_changes import access_user_group
from apps.tenants.models import Tenant

CLOSE_ANONYMOUS = 4403
CLOSE_UNSEEN = 4404
CLOSE_BAD_FILTER = 4400
RELOAD_SECONDS = 1.0


@database_sync_to_async
def _tail_open(user: Any, slug: str, query: str) -> tuple[Tenant, AuditFilter | None]:
    """The tenant (Http404 when the user may not see it) and the filter (None when invalid)."""
    tenant = tenant_get_for(access=access_get(user=user), slug=slug)
    form = AuditFilterForm(QueryDict(query), tenant=tenant)
    return tenant, form.audit_filter() if form.is_valid() else None


@database_sync_to_async
def _newest_rows(tenant: Tenant, filters: AuditFilter) -> str:
    """The newest page of the filtered log, rendered as the table's rows."""
    page = audit_record_page(tenant=tenant, filters=filters)
    return render_to_string("console/audit/_rows.html", {"rows": page.rows})


@database_sync_to_async
def _tail_allowed(user_id: int, tenant_id: int) -> bool:
    """Whether the user, as the database has them now, may still see the tenant."""
    user = get_user_model().objects.filter(pk=user_id).first()
    return access_get(user=user).sees(tenant_id)


class AuditTailConsumer(AsyncWebsocketConsumer):
    group: str | None = None
    user_group: str | None = None
    watching: asyncio.Task[None] | None = None
    reloading: asyncio.Task[None] | None = None
    filters: AuditFilter
    sequence: TailSequence
    tenant: Tenant
    user_id: int
    tenant_id: int
    checked_at: float = 0.0  # time.monotonic() of the last access check
    reloaded_at: float = -RELOAD_SECONDS  # time.monotonic() of the last reload
    missed: bool = False  # the reload that is due is because rows were missed
    reload_due: bool = False

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_ANONYMOUS)
            return
        query = self.scope.get("query_string", b"").decode("latin-1")
        # Joined before access is checked, so that a revocation committed after the check is heard.
        self.user_group = access_user_group(user_id=user.pk)
        await self.channel_layer.group_add(self.user_group, self.channel_name)
        try:
            tenant, filters = await _tail_open(user, self.scope["url_route"]["kwargs"]["tenant"], query)
        except Http404:
            await self._refuse(CLOSE_UNSEEN)
            return
        if filters is None:
            await self._refuse(CLOSE_BAD_FILTER)
            return
        self.filters, self.tenant = filters, tenant
        self.user_id, self.tenant_id, self.checked_at = user.pk, tenant.pk, time.monotonic()
        self.group = audit_live_group(tenant_id=tenant.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        # Before accepting: see the module's docstring.
        self.sequence = TailSequence(opened_at=await audit_live_watch(tenant_id=tenant.pk))
        self.watching = asyncio.get_running_loop().create_task(audit_live_watching(tenant_id=tenant.pk))
        await self.accept()
        self._reload_soon(missed=False)

    async def _refuse(self, code: int) -> None:
        if self.user_group is not None:
            await self.channel_layer.group_discard(self.user_group, self.channel_name)
            self.user_group = None
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        if self.watching is not None:
            self.watching.cancel()  # the mark expires by itself: other tails may still hold it
        if self.reloading is not None and self.reloading is not asyncio.current_task():
            self.reloading.cancel()  # (a reload that finds access gone closes the tail itself)
        for group in (self.group, self.user_group):
            if group is not None:
                await self.channel_layer.group_discard(group, self.channel_name)
        self.group = self.user_group = None

    async def _still_allowed(self) -> bool:
        """Check the user's access again; close the tail (4404) when it is gone."""
        self.checked_at = time.monotonic()
        if await _tail_allowed(self.user_id, self.tenant_id):
            return True
        await self.disconnect(CLOSE_UNSEEN)  # no more rows reach it, whatever the client does
        await self.close(code=CLOSE_UNSEEN)
        return False

    async def _may_send(self) -> bool:
        """Before rows go out (live or reloaded): check access again once the last check is
        `ACCESS_RECHECK_SECONDS` old."""
        if time.monotonic() - self.checked_at < live.ACCESS_RECHECK_SECONDS:
            return True
        return await self._still_allowed()

    async def access_changed(self, message: dict[str, Any]) -> None:
        """The user's access may have shrunk (`apps.tenants.access_changes`)."""
        if self.group is not None:
            await self._still_allowed()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The tail only sends."""

    async def audit_rows(self, message: dict[str, Any]) -> None:
        if self.group is None:
            return  # closed: a batch already on its way is dropped
        if not await self._may_send():
            return
        verdict = self.sequence.judge(message)
        if verdict == "missed":
            self._reload_soon(missed=True)
        if verdict != "show":
            return
        rows = [row for row in map(audit_live_record, message["rows"]) if self.filters.matches(row)]
        if rows:
            rows.reverse()  # newest first, as in the table
            html = render_to_string("console/audit/_rows.html", {"rows": rows, "live": True})
            await self.send(text_data=json.dumps({"rows": html}))

    def _reload_soon(self, *, missed: bool) -> None:
        """Send the newest page from the database, now or (after a reload) `RELOAD_SECONDS` later;
        asked for while one is being read, it is read once more after that."""
        self.missed = self.missed or missed
        self.reload_due = True
        if self.reloading is None or self.reloading.done():
            self.reloading = asyncio.get_running_loop().create_task(self._reload())

    async def _reload(self) -> None:
        while self.reload_due:
            await asyncio.sleep(max(0.0, self.reloaded_at + RELOAD_SECONDS - time.monotonic()))
            if self.group is None:
                return
            self.reloaded_at, missed, self.missed, self.reload_due = time.monotonic(), self.missed, False, False
            html = await _newest_rows(self.tenant, self.filters)
            if self.group is None or not await self._may_send():
                return
            await self.send(text_data=json.dumps({"reload": html, "missed": missed}))
