"""A live tail of the audit log outlives no revocation: when a user's membership is removed or
lowered, the tenant deleted, or the user deactivated or deleted in the admin, their open tails of
that tenant are closed (4404) and get no more rows; tails the user may still see keep going."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from apps.audit import live
from apps.audit.writer import AuditWriter
from apps.tenants.models import Membership, Tenant
from apps.tenants.services import membership_delete, membership_set, tenant_delete
from tests.audit.factories import audit_entry
from tests.console.test_audit_live import _open as _open_tail
from tests.console.test_audit_live import _setup, _tail

pytestmark = pytest.mark.django_db(transaction=True)


async def _open(path: str, cookie: str) -> WebsocketCommunicator:
    """An open tail past the reload it sends once open."""
    tail = _tail(path, cookie)
    await _open_tail(tail)
    return tail


async def _write(tenant: Any, name: str) -> None:
    writer = AuditWriter(interval=3600)
    writer.record(audit_entry(tenant=tenant, exposed_name=name))
    await writer.flush()


def _remove_from_a(data: dict[str, Any]) -> Callable[[], None]:
    def remove() -> None:
        membership_delete(membership=Membership.objects.get(tenant=data["a"], user__username="both"))
    return remove


def _platform_admin() -> Client:
    root = get_user_model().objects.create_superuser(username="root", password="pw")
    client = Client()
    client.force_login(root)
    return client


def _deactivate_in_admin() -> None:
    user = get_user_model().objects.get(username="both")
    answer = _platform_admin().post(f"/admin/auth/user/{user.pk}/change/", {
        "username": "both", "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00",  # is_active unticked
    })
    assert answer.status_code == 302, answer.content
    assert not get_user_model().objects.get(pk=user.pk).is_active


def _delete_in_admin() -> None:
    user = get_user_model().objects.get(username="both")
    answer = _platform_admin().post(f"/admin/auth/user/{user.pk}/delete/", {"post": "yes"})
    assert answer.status_code == 302, answer.content
    assert not get_user_model().objects.filter(pk=user.pk).exists()


def _delete_tenant(data: dict[str, Any]) -> Callable[[], None]:
    return lambda: tenant_delete(tenant=Tenant.objects.get(pk=data["a"].pk))


@pytest.mark.parametrize("revoke", [
    "membership removed", "tenant deleted", "user deactivated in the admin", "user deleted in the admin",
])
async def test_a_revoked_users_tail_is_closed_and_gets_no_more_rows(revoke: str) -> None:
    data = await _setup()
    tail_a = await _open("/console/t/live-a/audit/live", data["cookies"]["both"])
    other = await _open("/console/t/live-a/audit/live", data["cookies"]["a"])  # another member of a
    await _write(data["a"], "before")
    assert "before" in await tail_a.receive_from(timeout=5)
    assert "before" in await other.receive_from(timeout=5)

    change: dict[str, Callable[[], None]] = {
        "membership removed": _remove_from_a(data), "tenant deleted": _delete_tenant(data),
        "user deactivated in the admin": _deactivate_in_admin, "user deleted in the admin": _delete_in_admin,
    }
    await database_sync_to_async(change[revoke])()
    assert await tail_a.receive_output(timeout=5) == {"type": "websocket.close", "code": 4404}
    if revoke == "tenant deleted":
        assert await other.receive_output(timeout=5) == {"type": "websocket.close", "code": 4404}
        return
    await _write(data["a"], "after")
    assert "after" in await other.receive_from(timeout=5)  # the tenant's other tails go on
    assert await tail_a.receive_nothing(timeout=0.5)
    await other.disconnect()


async def test_a_lowered_role_that_still_sees_the_tenant_keeps_its_tail() -> None:
    """membership_set tells the user's tails; a member made admin (or back) still sees the tenant."""
    data = await _setup()
    tail_a = await _open("/console/t/live-a/audit/live", data["cookies"]["both"])
    await database_sync_to_async(lambda: membership_set(
        tenant=data["a"], user=get_user_model().objects.get(username="both"), role="admin"))()
    await _write(data["a"], "still")
    assert "still" in await tail_a.receive_from(timeout=5)
    await tail_a.disconnect()


async def test_removal_from_one_tenant_leaves_the_users_other_tails_open() -> None:
    data = await _setup()
    tail_a = await _open("/console/t/live-a/audit/live", data["cookies"]["both"])
    tail_b = await _open("/console/t/live-b/audit/live", data["cookies"]["both"])
    await database_sync_to_async(_remove_from_a(data))()
    assert await tail_a.receive_output(timeout=5) == {"type": "websocket.close", "code": 4404}
    await _write(data["b"], "b-row")
    assert "b-row" in await tail_b.receive_from(timeout=5)
    await tail_b.disconnect()


async def test_a_revocation_nobody_announced_is_found_before_rows_are_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    """A change made around the services (a queryset update), or whose announcement was lost:
    the tail checks again before sending once its last check is `ACCESS_RECHECK_SECONDS` old."""
    monkeypatch.setattr(live, "ACCESS_RECHECK_SECONDS", 0.0)
    data = await _setup()
    tail_a = await _open("/console/t/live-a/audit/live", data["cookies"]["both"])
    silent: Callable[[], Awaitable[int]] = database_sync_to_async(
        lambda: get_user_model().objects.filter(username="both").update(is_active=False))
    assert await silent() == 1
    await _write(data["a"], "unseen")
    assert await tail_a.receive_output(timeout=5) == {"type": "websocket.close", "code": 4404}
    assert await tail_a.receive_nothing(timeout=0.5)


async def test_a_reload_is_not_sent_to_a_user_revoked_unannounced(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reload reads rows from the database: it checks access again like a live batch does."""
    monkeypatch.setattr(live, "ACCESS_RECHECK_SECONDS", 0.0)
    data = await _setup()
    await _write(data["a"], "unseen")
    tail_a = _tail("/console/t/live-a/audit/live", data["cookies"]["both"])
    silent: Callable[[], Awaitable[int]] = database_sync_to_async(
        lambda: get_user_model().objects.filter(username="both").update(is_active=False))
    connected, _ = await tail_a.connect()
    assert connected
    assert await silent() == 1  # after the tail was accepted, before its opening reload is sent
    assert await tail_a.receive_output(timeout=5) == {"type": "websocket.close", "code": 4404}
    assert await tail_a.receive_nothing(timeout=0.5)
