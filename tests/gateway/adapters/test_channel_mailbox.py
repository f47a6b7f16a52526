"""The channel-layer relay (apps/gateway/adapters/channel_mailbox.py) on the test Redis: a session's messages reach the
stream that holds it, in process when it is here, through Redis when it is on another instance."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest
from channels_redis.core import RedisChannelLayer
from django.conf import settings

from apps.gateway.adapters.channel_mailbox import ChannelMailbox
from apps.gateway.pipeline.metrics import Counters
from gatewaysite.settings.base import channel_layers

pytestmark = pytest.mark.usefixtures("clean_redis")


def _instance() -> tuple[ChannelMailbox, Counters]:
    """A gateway instance's mailbox: its own channel layer object, as in its own process."""
    counters = Counters()
    return ChannelMailbox(RedisChannelLayer(**settings.CHANNEL_LAYERS["default"]["CONFIG"]), counters), counters


async def test_a_stream_on_this_instance_gets_its_messages_without_redis() -> None:
    mailbox, counters = _instance()
    session = f"s-{uuid.uuid4()}"
    inbox = await mailbox.open(session)
    await mailbox.post(session, [b'{"id": 1}', b'{"id": 2}'])
    assert [await inbox.get(1), await inbox.get(1)] == [b'{"id": 1}', b'{"id": 2}']
    assert counters.value("session_messages", route="local") == 1
    assert counters.value("session_messages", route="relayed") == 0
    inbox.close()


async def test_a_stream_on_another_instance_gets_its_messages_through_redis() -> None:
    (here, here_counts), (there, _) = _instance(), _instance()
    session = f"s-{uuid.uuid4()}"
    inbox = await there.open(session)
    await here.post(session, [b'{"id": 1}'])
    assert await inbox.get(5) == b'{"id": 1}'
    assert here_counts.value("session_messages", route="relayed") == 1
    inbox.close()


async def test_a_closed_stream_gets_nothing_more() -> None:
    (here, _), (there, _) = _instance(), _instance()
    session = f"s-{uuid.uuid4()}"
    first = await there.open(session)
    first.close()
    second = await there.open(session)  # the client opened its stream again
    await here.post(session, [b'{"id": 3}'])
    assert await second.get(5) == b'{"id": 3}'
    assert await first.get(0.2) is None
    second.close()


async def test_a_stream_opened_elsewhere_replaces_the_old_one() -> None:
    """The client reopened its stream on another instance before this one noticed the old stream
    was gone: the old one ends, and this instance's answers go to the new stream, not to it."""
    (old_place, _), (new_place, _) = _instance(), _instance()
    session = f"s-{uuid.uuid4()}"
    old = await old_place.open(session, replace=True)
    new = await new_place.open(session, replace=True)
    assert await old.get(5) is None and old.ended
    await old_place.post(session, [b'{"id": 4}'])
    assert await new.get(5) == b'{"id": 4}'
    assert not new.ended
    new.close()


async def test_a_stream_reopened_on_the_same_instance_replaces_the_old_one() -> None:
    mailbox, _ = _instance()
    session = f"s-{uuid.uuid4()}"
    old = await mailbox.open(session, replace=True)
    new = await mailbox.open(session, replace=True)
    assert old.ended and await old.get(1) is None
    await mailbox.post(session, [b'{"id": 5}'])
    assert await new.get(1) == b'{"id": 5}'
    new.close()


def test_the_layer_does_not_give_up_on_a_read_redis_is_still_blocking() -> None:
    pool = RedisChannelLayer(**settings.CHANNEL_LAYERS["default"]["CONFIG"]).create_pool(0)
    assert pool.connection_kwargs["socket_timeout"] is None
    assert pool.connection_kwargs["socket_keepalive"] is True


async def test_a_stream_idle_past_the_layer_s_blocking_reads_loses_nothing_and_is_not_interrupted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Each receive blocks in Redis for brpop_timeout (5 s); a read timeout no longer than that made
    # every idle receive fail ("Timeout reading from ...") and could lose the message popped then.
    (here, _), (there, _) = _instance(), _instance()
    session = f"s-{uuid.uuid4()}"
    inbox = await there.open(session)
    with caplog.at_level(logging.WARNING, logger="apps.gateway.adapters.channel_mailbox"):
        for number in range(2):
            await asyncio.sleep(6.0)  # longer than one blocking read: it ends with nothing, idle
            await here.post(session, [f'{{"id": {number}}}'.encode()])
            assert await inbox.get(5) == f'{{"id": {number}}}'.encode()
    assert [record.getMessage() for record in caplog.records] == []
    inbox.close()


async def test_the_relay_works_with_the_channel_layer_sharded_over_several_redis_servers() -> None:
    """GATEWAY_CHANNEL_LAYER_URLS naming several servers (here: two databases, as two shards): every
    session's messages still reach the instance that holds its stream, whichever shard they hash to."""
    base = settings.REDIS_URL.rsplit("/", 1)[0]
    config = channel_layers([f"{base}/11", f"{base}/12"], "gw-test-sharded")["default"]["CONFIG"]
    assert len(config["hosts"]) == 2
    here = ChannelMailbox(RedisChannelLayer(**config), Counters())
    there = ChannelMailbox(RedisChannelLayer(**config), Counters())
    sessions = [f"s-{uuid.uuid4()}" for _ in range(8)]  # eight sessions hash to both shards
    inboxes = [await there.open(session) for session in sessions]
    for n, session in enumerate(sessions):
        await here.post(session, [f'{{"id": {n}}}'.encode()])
    assert [await inbox.get(5) for inbox in inboxes] == [f'{{"id": {n}}}'.encode() for n in range(8)]
    for inbox in inboxes:
        inbox.close()
