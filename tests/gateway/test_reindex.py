"""Asking for an MCP server's tools to be indexed again when it announces a change
(apps/gateway/reindex.py), against the real Redis: debounced for the fleet, only by the instance
that saw the notification, and never raising."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import anyio
import pytest
import redis.asyncio
from channels.db import database_sync_to_async
from django.conf import settings

from apps.catalog.services import virtual_host_tool_search_set
from apps.common.redis import redis_client
from apps.gateway.adapters.redis_change_feed import RedisChangeFeed
from apps.gateway.reindex import TOOLS_CHANGED, ToolReindex, reindex_key
from apps.gateway.wiring import tool_reindex
from apps.retrieval.models import IndexedTool
from tests import factories
from tests.conftest import mcp_client
from tests.gateway.helpers import message_of, modern
from tests.processes import backend_argv, free_port, gateway_argv, gateway_env, running

_ids = itertools.count(9_000_001)


@pytest.fixture
async def client() -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    yield client
    await client.aclose()


class Queue:
    """Stands in for Celery: what was queued, or a broker that is down."""

    def __init__(self) -> None:
        self.queued: list[tuple[int, float]] = []
        self.down = False

    def __call__(self, backend_id: int, countdown: float) -> None:
        if self.down:
            raise ConnectionError("broker down")
        self.queued.append((backend_id, countdown))


async def test_a_burst_of_changes_queues_one_run_after_the_window(client: redis.asyncio.Redis) -> None:
    backend, queue = next(_ids), Queue()
    reindex = ToolReindex(client, delay_seconds=5, enqueue=queue)
    asked = await asyncio.gather(*(reindex.changed(backend, TOOLS_CHANGED) for _ in range(50)))
    assert sorted(asked) == [False] * 49 + [True]
    assert queue.queued == [(backend, 5)]
    # The run starts no earlier than the key ends: every change that found the key is before the run.
    assert 0 < await client.pttl(reindex_key(backend)) <= 5000


async def test_a_change_after_the_window_queues_another_run(client: redis.asyncio.Redis) -> None:
    backend, queue = next(_ids), Queue()
    reindex = ToolReindex(client, delay_seconds=0.2, enqueue=queue)
    assert await reindex.changed(backend, TOOLS_CHANGED)
    assert not await reindex.changed(backend, TOOLS_CHANGED)
    await asyncio.sleep(0.3)
    assert await reindex.changed(backend, TOOLS_CHANGED)
    assert queue.queued == [(backend, 0.2), (backend, 0.2)]


async def test_every_instance_shares_the_window(client: redis.asyncio.Redis) -> None:
    backend, first, second = next(_ids), Queue(), Queue()
    assert await ToolReindex(client, delay_seconds=5, enqueue=first).changed(backend, TOOLS_CHANGED)
    assert not await ToolReindex(client, delay_seconds=5, enqueue=second).changed(backend, TOOLS_CHANGED)
    assert (first.queued, second.queued) == ([(backend, 5)], [])


@pytest.mark.parametrize("notification", ["notifications/prompts/list_changed", "notifications/resources/list_changed"])
async def test_only_tool_changes_ask(client: redis.asyncio.Redis, notification: str) -> None:
    backend, queue = next(_ids), Queue()
    assert not await ToolReindex(client, delay_seconds=5, enqueue=queue).changed(backend, notification)
    assert queue.queued == [] and not await client.exists(reindex_key(backend))


async def test_the_broker_being_down_is_logged_and_the_next_change_asks_again(
    client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    backend, queue = next(_ids), Queue()
    reindex = ToolReindex(client, delay_seconds=5, enqueue=queue)
    queue.down = True
    with caplog.at_level(logging.WARNING, logger="apps.gateway.reindex"):
        assert not await reindex.changed(backend, TOOLS_CHANGED)
    assert f"could not queue the indexing of backend {backend}" in caplog.text
    queue.down = False
    assert await reindex.changed(backend, TOOLS_CHANGED)
    assert queue.queued == [(backend, 5)]


async def test_redis_being_down_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    unreachable = redis.asyncio.Redis(host="127.0.0.1", port=1, socket_connect_timeout=1)
    queue = Queue()
    with caplog.at_level(logging.WARNING, logger="apps.gateway.reindex"):
        assert not await ToolReindex(unreachable, delay_seconds=5, enqueue=queue).changed(1, TOOLS_CHANGED)
    assert "could not ask for the tools of backend 1" in caplog.text and queue.queued == []
    await unreachable.aclose()


class Told(ToolReindex):
    """A ToolReindex that notes every change it is told of."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        super().__init__(client, delay_seconds=5, enqueue=Queue())
        self.told: list[tuple[int, str]] = []

    async def changed(self, backend_id: int, notification: str) -> bool:
        self.told.append((backend_id, notification))
        return False


async def test_only_the_instance_that_saw_the_change_asks(client: redis.asyncio.Redis) -> None:
    backend, saw, heard = next(_ids), Told(client), Told(client)
    seeing = RedisChangeFeed(client, instance="gw-a:1", reindex=saw)
    hearing = RedisChangeFeed(client, instance="gw-b:1", reindex=heard)
    got = asyncio.Event()
    hearing.start(lambda backend_id, notification: got.set() if backend_id == backend else None)
    await asyncio.sleep(0.3)  # subscribed
    seeing.publish(backend, TOOLS_CHANGED)
    await asyncio.wait_for(got.wait(), 5)
    await asyncio.sleep(0.1)
    assert (saw.told, heard.told) == ([(backend, TOOLS_CHANGED)], [])
    for task in asyncio.all_tasks():  # the hearing feed's listener
        if task is not asyncio.current_task():
            task.cancel()


def test_the_gateway_asks_only_when_indexing_is_on(settings) -> None:  # noqa: ANN001 - pytest-django fixture
    settings.GATEWAY_TOOL_INDEX = False
    assert tool_reindex(redis.asyncio.Redis()) is None
    settings.GATEWAY_TOOL_INDEX = True
    assert isinstance(tool_reindex(redis.asyncio.Redis()), ToolReindex)


@dataclass(frozen=True)
class Live:
    fixture: str  # the conformance fixture server: `test_trigger_tool_change` toggles a tool and announces it
    gateway: str  # a gateway with tool indexing on (Celery runs the task at once, in the gateway's thread)


@pytest.fixture(scope="module")
def live(django_db_setup: None, django_db_blocker: object) -> Iterator[Live]:
    ports = [free_port() for _ in range(2)]
    env = gateway_env(settings.DATABASES["default"]["NAME"], settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-reindex",
                      GATEWAY_TEST_TOOL_INDEX="1", GATEWAY_TOOL_REINDEX_SECONDS="60")
    with (
        running(backend_argv("tests.backends.conformance_server", ports[0]), ports[0], log_name="reindex-fixture"),
        running(gateway_argv(ports[1]), ports[1], env=env, log_name="gateway-reindex"),
    ):
        yield Live(f"http://127.0.0.1:{ports[0]}/mcp", f"http://127.0.0.1:{ports[1]}")


@pytest.mark.slow
async def test_a_server_announcing_a_new_tool_is_indexed_again(transactional_db: None, indexing_on: None,
                                                               live: Live) -> None:
    # The fixture starts with its dynamic tool: take it away behind the gateway's back, then index.
    toggled = message_of(modern(live.fixture, "tools/call", {"name": "test_trigger_tool_change", "arguments": {}},
                                key=""))
    assert "now absent" in toggled["result"]["content"][0]["text"]

    def setup() -> tuple[int, str, str]:
        tenant = factories.tenant_factory()
        key = factories.api_key_factory(tenant=tenant).secret
        backend = factories.backend_factory(tenant=tenant, name="fixture", urls=[live.fixture])  # indexed at once
        host = factories.virtual_host_factory(tenant=tenant, mounts={"fx": backend})
        virtual_host_tool_search_set(virtual_host=host, mode="listed")
        return backend.pk, key, f"{live.gateway}/mcp/{tenant.slug}/{host.slug}"

    backend_id, key, url = await database_sync_to_async(setup)()

    def indexed() -> set[str]:
        return set(IndexedTool.objects.filter(backend_id=backend_id).values_list("name", flat=True))

    assert "test_simple_text" in (before := await database_sync_to_async(indexed)())
    assert "test_dynamic_tool" not in before
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    async with mcp_client(url, key, "legacy", message_handler=on_message) as client:
        await anyio.sleep(0.5)  # the GET stream is open
        await client.call_tool("test_trigger_tool_change", {})  # back: announced to the gateway
        with anyio.fail_after(10):
            await changed.wait()
    assert redis_client().exists(reindex_key(backend_id))  # the gateway asked, once for the next 60 s
    deadline = time.monotonic() + 60  # the gateway process loads the embedding model first
    while "test_dynamic_tool" not in (after := await database_sync_to_async(indexed)()):
        assert time.monotonic() < deadline, after
        await anyio.sleep(0.2)
    found = message_of(modern(url, "tools/call", {"name": "tool_search", "arguments": {
        "query": "toggled by test_trigger_tool_change", "k": 50}}, key=key))
    assert "test_dynamic_tool" in [tool["name"] for tool in found["result"]["structuredContent"]["tools"]]
