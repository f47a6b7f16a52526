"""The audit log's live tail over a websocket, through the real ASGI application and channel layer:
a batch the audit writer writes for tenant A reaches A's tails (as its filters allow) and no
other tenant's; a tail that misses rows reloads the table from the database and says so; tails of
tenants the user may not see, anonymous ones and other sites' are refused."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from apps.audit import live
from apps.audit.models import AuditRecord
from apps.audit.writer import AuditWriter
from apps.common.redis import redis_client
from apps.tenants.services import membership_set
from gatewaysite.asgi import application
from tests.audit.factories import audit_entry, audit_rows_create
from tests.factories import tenant_factory

pytestmark = pytest.mark.django_db(transaction=True)


@database_sync_to_async
def _setup() -> dict[str, Any]:
    """Tenants a and b, a user who may see both, one who may see only a; their session cookies."""
    a, b, c = tenant_factory(slug="live-a"), tenant_factory(slug="live-b"), tenant_factory(slug="live-c")
    users = get_user_model().objects
    both, only_a = users.create_user(username="both", password="pw"), users.create_user(username="a", password="pw")
    for tenant in (a, b):
        membership_set(tenant=tenant, user=both, role="member")
    membership_set(tenant=a, user=only_a, role="member")
    cookies = {}
    for user in (both, only_a):
        client = Client()
        client.force_login(user)
        cookies[user.username] = client.cookies["sessionid"].value
    return {"a": a, "b": b, "c": c, "cookies": cookies}


def _tail(path: str, cookie: str | None, origin: str = "http://127.0.0.1") -> WebsocketCommunicator:
    headers = [(b"origin", origin.encode()), (b"host", b"127.0.0.1")]
    if cookie:
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    return WebsocketCommunicator(application, path, headers=headers)


async def _open(tail: WebsocketCommunicator) -> dict[str, Any]:
    """Connect; return the reload every tail sends once open."""
    connected, _ = await tail.connect()
    assert connected
    opening = await _next(tail)
    assert opening["missed"] is False and "reload" in opening
    return opening


async def _next(tail: WebsocketCommunicator) -> dict[str, Any]:
    return json.loads(await tail.receive_from(timeout=5))


async def test_a_written_batch_reaches_its_tenants_tails_only() -> None:
    data = await _setup()
    a, b = data["a"], data["b"]
    tail_a = _tail("/console/t/live-a/audit/live", data["cookies"]["both"])
    denied_only = _tail("/console/t/live-a/audit/live?outcome=denied", data["cookies"]["a"])
    tail_b = _tail("/console/t/live-b/audit/live", data["cookies"]["both"])
    for tail in (tail_a, denied_only, tail_b):
        await _open(tail)
    writer = AuditWriter(interval=3600)
    writer.record(audit_entry(tenant=a, exposed_name="first-tool"))
    writer.record(audit_entry(tenant=a, exposed_name="second-tool", outcome="denied"))
    await writer.flush()
    assert await database_sync_to_async(AuditRecord.objects.filter(tenant_id=a.pk).count)() == 2

    html = (await _next(tail_a))["rows"]
    assert html.index("second-tool") < html.index("first-tool")  # newest first, as in the table
    assert html.count("<tr ") == 2 and 'class="outcome-denied live"' in html
    filtered = (await _next(denied_only))["rows"]
    assert "second-tool" in filtered and "first-tool" not in filtered
    assert await tail_b.receive_nothing(timeout=0.5)

    writer.record(audit_entry(tenant=b, exposed_name="b-tool"))
    await writer.flush()
    assert "b-tool" in (await _next(tail_b))["rows"]
    assert await tail_a.receive_nothing(timeout=0.5)
    for tail in (tail_a, denied_only, tail_b):
        await tail.disconnect()


async def test_unseen_tenants_anonymous_visitors_and_other_sites_are_refused() -> None:
    data = await _setup()
    refused = [
        _tail("/console/t/live-b/audit/live", data["cookies"]["a"]),  # a tenant the user may not see
        _tail("/console/t/nope/audit/live", data["cookies"]["both"]),  # no such tenant
        _tail("/console/t/live-a/audit/live", None),  # anonymous
        _tail("/console/t/live-a/audit/live", data["cookies"]["both"], origin="http://evil.example"),
        _tail("/console/t/live-a/audit/live?outcome=bogus", data["cookies"]["both"]),  # a filter that is not one
    ]
    for tail in refused:
        connected, _ = await tail.connect()
        assert not connected
        await tail.disconnect()


async def test_an_open_tail_keeps_its_tenant_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mark is there once the tail's connect returns (so no batch written after it is skipped),
    renewed while the tail is open, and left to expire after it closes."""
    monkeypatch.setattr(live, "WATCH_TTL_SECONDS", 0.5)
    monkeypatch.setattr(live, "WATCH_REFRESH_SECONDS", 0.1)
    data = await _setup()
    key = f"gw:{{audit-live}}:watched:{data['a'].pk}"
    tail = _tail("/console/t/live-a/audit/live", data["cookies"]["both"])
    await _open(tail)
    assert redis_client().exists(key)
    await asyncio.sleep(1.0)  # twice the mark's lifetime
    assert redis_client().exists(key)
    await tail.disconnect()
    await asyncio.sleep(0.7)
    assert not redis_client().exists(key)


async def test_once_open_a_tail_reloads_what_was_written_since_the_page() -> None:
    data = await _setup()
    await database_sync_to_async(audit_rows_create)(tenant=data["a"], count=1, exposed_name="before-the-tail")
    tail = _tail("/console/t/live-a/audit/live", data["cookies"]["both"])
    opening = await _open(tail)
    assert "before-the-tail" in opening["reload"]
    await tail.disconnect()


async def test_a_tail_that_missed_rows_reloads_them_from_the_database_and_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer's message that never arrived (a full channel drops it, say) shows as a gap in its
    numbering; the next message then brings a reload with every row, instead of its own rows only."""
    data = await _setup()
    a = data["a"]
    tail = _tail("/console/t/live-a/audit/live", data["cookies"]["both"])
    await _open(tail)
    writer = AuditWriter(interval=3600)
    writer.record(audit_entry(tenant=a, exposed_name="shown-live"))
    await writer.flush()
    assert "shown-live" in (await _next(tail))["rows"]

    real_send = get_channel_layer().group_send

    async def lose_one(group: str, message: dict[str, Any]) -> None:
        monkeypatch.setattr(get_channel_layer(), "group_send", real_send)  # only this one is lost

    monkeypatch.setattr(get_channel_layer(), "group_send", lose_one)
    writer.record(audit_entry(tenant=a, exposed_name="lost-on-the-way"))
    await writer.flush()
    await live.audit_live_settled()
    assert await tail.receive_nothing(timeout=0.3)  # the tail cannot know yet

    writer.record(audit_entry(tenant=a, exposed_name="next-one"))
    await writer.flush()
    reload = await _next(tail)
    assert reload["missed"] is True
    assert "lost-on-the-way" in reload["reload"] and "next-one" in reload["reload"] and "shown-live" in reload["reload"]
    await tail.disconnect()


async def test_rows_left_out_of_a_burst_are_reloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live, "MAX_ROWS", 3)
    data = await _setup()
    tail = _tail("/console/t/live-a/audit/live", data["cookies"]["both"])
    await _open(tail)
    writer = AuditWriter(interval=3600)
    for i in range(5):
        writer.record(audit_entry(tenant=data["a"], exposed_name=f"burst-{i}"))
    await writer.flush()
    reload = await _next(tail)
    assert reload["missed"] is True and all(f"burst-{i}" in reload["reload"] for i in range(5))
    await tail.disconnect()
