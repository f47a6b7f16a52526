"""Publishing written batches to the live tails: only for watched tenants, bounded, and never
raising."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from apps.audit import live
from apps.common.redis import redis_client
from apps.tenants.models import Tenant
from tests.audit.factories import audit_entry

pytestmark = pytest.mark.usefixtures("clean_redis")


class Layer:
    def __init__(self, fail: bool = False, delay: float = 0.0) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.fail, self.delay = fail, delay

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await asyncio.sleep(self.delay)
        if self.fail:
            raise ConnectionError("redis is away")
        self.sent.append((group, message))


@pytest.fixture(autouse=True)
def _nobody_watching() -> None:
    for key in redis_client().scan_iter("gw:audit-live-watched:*"):
        redis_client().delete(key)


async def _settle() -> None:
    await asyncio.wait_for(live._publishing[id(asyncio.get_running_loop())], 5)


async def test_each_tenant_gets_its_newest_rows_in_one_message(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = Layer()
    monkeypatch.setattr(live, "get_channel_layer", lambda: layer)
    a, b = Tenant(pk=1, slug="a"), Tenant(pk=2, slug="b")
    await live.audit_live_watch(tenant_id=1)
    await live.audit_live_watch(tenant_id=2)
    batch = [audit_entry(tenant=a, exposed_name=f"t{i}") for i in range(live.MAX_ROWS + 20)]
    batch.append(audit_entry(tenant=b, exposed_name="only"))
    live.audit_batch_publish(batch)
    await _settle()
    sent = dict(layer.sent)
    assert set(sent) == {"audit-live.1", "audit-live.2"}
    rows = sent["audit-live.1"]["rows"]
    assert len(rows) == live.MAX_ROWS and rows[-1]["exposed_name"] == f"t{live.MAX_ROWS + 19}"
    assert live.audit_live_record(sent["audit-live.2"]["rows"][0]).exposed_name == "only"


async def test_a_failing_or_slow_layer_costs_a_log_line(monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    tenant = Tenant(pk=1, slug="a")
    await live.audit_live_watch(tenant_id=1)
    monkeypatch.setattr(live, "get_channel_layer", lambda: Layer(fail=True))
    live.audit_batch_publish([audit_entry(tenant=tenant)])  # returns at once
    with caplog.at_level(logging.WARNING, logger="apps.audit.live"):
        await _settle()
    assert "publishing audit rows to the live tail failed" in caplog.text
    # While one publish is still going, the next batch is not queued behind it.
    slow = Layer(delay=0.3)
    monkeypatch.setattr(live, "get_channel_layer", lambda: slow)
    live.audit_batch_publish([audit_entry(tenant=tenant, exposed_name="first")])
    live.audit_batch_publish([audit_entry(tenant=tenant, exposed_name="second")])
    await _settle()
    assert [m["rows"][0]["exposed_name"] for _, m in slow.sent] == ["first"]


async def test_only_watched_tenants_rows_are_published(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = Layer()
    monkeypatch.setattr(live, "get_channel_layer", lambda: layer)
    a, b = Tenant(pk=1, slug="a"), Tenant(pk=2, slug="b")
    live.audit_batch_publish([audit_entry(tenant=a), audit_entry(tenant=b)])
    await _settle()
    assert layer.sent == []  # nobody watches: nothing is sent
    await live.audit_live_watch(tenant_id=2)
    live.audit_batch_publish([audit_entry(tenant=a), audit_entry(tenant=b, exposed_name="watched")])
    await _settle()
    assert [(group, m["rows"][0]["exposed_name"]) for group, m in layer.sent] == [("audit-live.2", "watched")]
    assert 0 < redis_client().pttl("gw:audit-live-watched:2") <= live.WATCH_TTL_SECONDS * 1000
