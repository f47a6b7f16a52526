"""Publishing written batches to the live tails: only for watched tenants, bounded, never raising,
and numbered so that a tail knows when it missed rows (`TailSequence`)."""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

import pytest

from apps.audit import live
from apps.audit.live import TailSequence
from apps.common.redis import redis_client
from apps.tenants.models import Tenant
from tests.audit.factories import audit_entry

pytestmark = pytest.mark.usefixtures("clean_redis")

A, B = Tenant(pk=1, slug="a"), Tenant(pk=2, slug="b")


class Layer:
    def __init__(self, fail: int = 0, delay: float = 0.0) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.fail, self.delay = fail, delay  # the first `fail` sends raise

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await asyncio.sleep(self.delay)
        if self.fail:
            self.fail -= 1
            raise ConnectionError("redis is away")
        self.sent.append((group, message))

    def names(self) -> list[list[str]]:
        return [[row["exposed_name"] for row in message["rows"]] for _, message in self.sent]


@pytest.fixture(autouse=True)
def _nobody_watching(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in redis_client().scan_iter("gw:{audit-live}:watched:*"):
        redis_client().delete(key)
    monkeypatch.setattr(live, "RETRY_SECONDS", 0.05)


def _layer(monkeypatch: pytest.MonkeyPatch, layer: Layer) -> Layer:
    monkeypatch.setattr(live, "get_channel_layer", lambda: layer)
    return layer


async def _settle() -> None:
    await asyncio.wait_for(live.audit_live_settled(), 5)


async def test_each_tenant_gets_its_newest_rows_in_one_numbered_message(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = _layer(monkeypatch, Layer())
    opened = await live.audit_live_watch(tenant_id=1)
    await live.audit_live_watch(tenant_id=2)
    batch = [audit_entry(tenant=A, exposed_name=f"t{i}") for i in range(live.MAX_ROWS + 20)]
    batch.append(audit_entry(tenant=B, exposed_name="only"))
    live.audit_batch_publish(batch)
    await _settle()
    sent = dict(layer.sent)
    assert set(sent) == {"audit-live.1", "audit-live.2"}
    message = sent["audit-live.1"]
    assert len(message["rows"]) == live.MAX_ROWS and message["rows"][-1]["exposed_name"] == f"t{live.MAX_ROWS + 19}"
    assert message["omitted"] == 20 and message["writer"] == live.WRITER_ID
    assert live.audit_live_record(sent["audit-live.2"]["rows"][0]).exposed_name == "only"
    # A tail that opened before is told it missed rows: the 20 left out.
    assert TailSequence(opened).judge(message) == "missed"
    assert TailSequence(opened).judge(sent["audit-live.2"]) == "show"


async def test_batches_are_numbered_per_tenant_and_each_message_says_which_it_carries(
        monkeypatch: pytest.MonkeyPatch) -> None:
    layer = _layer(monkeypatch, Layer())
    await live.audit_live_watch(tenant_id=1)
    for name in ("one", "two"):
        live.audit_batch_publish([audit_entry(tenant=A, exposed_name=name)])
        await _settle()
    first, second = (message for _, message in layer.sent)
    assert second["first"] == second["last"] == first["last"] + 1
    assert first["prev_at"] is None or second["prev_at"] >= first["prev_at"]
    assert second["prev_at"] is not None  # the attempt that carried `first`'s batch


async def test_batches_written_while_one_is_sent_go_next_together(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = _layer(monkeypatch, Layer(delay=0.2))
    await live.audit_live_watch(tenant_id=1)
    live.audit_batch_publish([audit_entry(tenant=A, exposed_name="first")])
    await asyncio.sleep(0.1)  # its attempt is sending
    for name in ("second", "third"):
        live.audit_batch_publish([audit_entry(tenant=A, exposed_name=name)])
    await _settle()
    assert layer.names() == [["first"], ["second", "third"]]  # nothing dropped, nothing queued behind one by one
    one, two = (message for _, message in layer.sent)
    assert (two["first"], two["last"]) == (one["last"] + 1, one["last"] + 2)


async def test_a_failed_attempt_is_logged_and_tried_again(monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    layer = _layer(monkeypatch, Layer(fail=2))
    opened = await live.audit_live_watch(tenant_id=1)
    with caplog.at_level(logging.WARNING, logger="apps.audit.live"):
        live.audit_batch_publish([audit_entry(tenant=A, exposed_name="kept")])  # returns at once
        await _settle()
    assert caplog.text.count("publishing audit rows to the live tail failed") == 2
    assert layer.names() == [["kept"]]
    assert TailSequence(opened).judge(layer.sent[0][1]) == "show"


async def test_only_watched_tenants_rows_are_published(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = _layer(monkeypatch, Layer())
    live.audit_batch_publish([audit_entry(tenant=A), audit_entry(tenant=B)])
    await _settle()
    assert layer.sent == []  # nobody watches: nothing is sent
    opened = await live.audit_live_watch(tenant_id=2)
    live.audit_batch_publish([audit_entry(tenant=A), audit_entry(tenant=B, exposed_name="watched")])
    await _settle()
    assert [(group, m["rows"][0]["exposed_name"]) for group, m in layer.sent] == [("audit-live.2", "watched")]
    assert 0 < redis_client().pttl("gw:{audit-live}:watched:2") <= live.WATCH_TTL_SECONDS * 1000
    # The batch nobody watched was attempted before the tail opened: not missed.
    assert TailSequence(opened).judge(layer.sent[0][1]) == "show"


async def test_a_tenant_whose_mark_lapsed_shows_the_gap_to_its_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = _layer(monkeypatch, Layer())
    tail = TailSequence(await live.audit_live_watch(tenant_id=1))
    live.audit_batch_publish([audit_entry(tenant=A, exposed_name="seen")])
    await _settle()
    redis_client().delete("gw:{audit-live}:watched:1")  # a renewal failed: the mark expired
    live.audit_batch_publish([audit_entry(tenant=A, exposed_name="unseen")])
    await _settle()
    await live.audit_live_watch(tenant_id=1)
    live.audit_batch_publish([audit_entry(tenant=A, exposed_name="after")])
    await _settle()
    assert layer.names() == [["seen"], ["after"]]
    assert [tail.judge(m) for _, m in layer.sent] == ["show", "missed"]


def _message(first: int, last: int, *, writer: str = "w1", prev_at: float | None = None,
             omitted: int = 0) -> dict[str, Any]:
    return {"rows": [], "writer": writer, "first": first, "last": last, "prev_at": prev_at, "omitted": omitted}


def test_a_tail_shows_each_writers_batches_in_order_and_drops_repeats() -> None:
    tail = TailSequence(opened_at=100.0)
    assert tail.judge(_message(7, 7, prev_at=99.0)) == "show"  # the batch before 7 was attempted before opening
    assert tail.judge(_message(8, 9)) == "show"
    assert tail.judge(_message(8, 9)) == "old"  # sent again after a timed-out attempt that had arrived
    assert tail.judge(_message(1, 1, writer="w2")) == "show"  # another process, counted apart
    assert tail.judge(_message(10, 10)) == "show"


@pytest.mark.parametrize(("messages", "why"), [
    ([_message(3, 3), _message(5, 5)], "a number skipped: a message was lost"),
    ([_message(3, 3), _message(3, 5)], "a message overlapping one shown: a repeat merged with new rows"),
    ([_message(4, 4, prev_at=100.0)], "the batch before the first seen was attempted after opening"),
    ([_message(4, 4, prev_at=math.inf)], "the writer dropped waiting rows of unknown age"),
    ([_message(3, 3, omitted=1)], "rows left out of a message"),
])
def test_a_tail_knows_when_it_missed_rows(messages: list[dict[str, Any]], why: str) -> None:
    tail = TailSequence(opened_at=100.0)
    assert [tail.judge(m) for m in messages][-1] == "missed", why
