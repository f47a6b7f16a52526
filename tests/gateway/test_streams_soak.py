"""Streams held open for minutes under traffic, across two gateway instances (docs/sessions.md):
a Streamable HTTP session's GET stream and an HTTP+SSE client's event stream, both on instance A
while their POSTs go to instance B (as a round-robin balancer sends them), in front of an HTTP+SSE
backend whose event streams are held by whichever instance opened them; and the console's audit
live tail in Chromium, on instance A, while both instances write rows.

The paced clients wait `PAUSE_SECONDS` between calls, longer than a channel-layer receive blocks in
Redis (5 s), so every stream sits idle across blocking reads again and again; a third client calls
without pause. Every answer, every `list_changed` the backend announces and every audit row must
arrive, the live tail must never close or reload for rows it missed, and neither instance may log
an interrupted relay. With the channel layer's former connection settings (redis-py's 5 s read
timeout on a 5 s blocking pop) the instances logged an interruption every few seconds."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from django.conf import settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import Page, WebSocket, expect

from apps.audit.models import AuditRecord
from tests import factories
from tests.browser import console_login, superuser_factory
from tests.conftest import Host
from tests.gateway.test_http_sse import PostsElsewhere, sse_session
from tests.processes import free_port, gateway_argv, gateway_env, log_path, running

pytestmark = pytest.mark.slow

SOAK_SECONDS = float(os.environ.get("GATEWAY_SOAK_SECONDS", "150"))
PAUSE_SECONDS = 6.0
TRIGGER_EVERY = 4  # every 4th call of a paced client makes the backend announce tools/list_changed
SIMPLE_TEXT = "This is a simple text response for testing."
#: What an instance logs when a relay's read fails (apps.gateway.adapters.channel_mailbox and
#: sse_bridge), when the live tail cannot publish, or when anything raises.
TROUBLE = ("interrupted", "Timeout reading", "live tail failed", "Traceback", "ERROR")


@dataclass
class Traffic:
    calls: int = 0
    failures: list[str] = field(default_factory=list)
    triggers: dict[str, int] = field(default_factory=dict)
    changes: dict[str, int] = field(default_factory=dict)


async def _paced(name: str, client: Client, until: float, traffic: Traffic) -> None:
    traffic.triggers[name] = 0
    done = 0
    while time.monotonic() < until:
        done += 1
        try:
            if done % TRIGGER_EVERY == 0:
                await client.call_tool("test_trigger_tool_change", {})
                traffic.triggers[name] += 1
            else:
                result = await client.call_tool("test_simple_text", {})
                if result.content[0].text != SIMPLE_TEXT:  # type: ignore[union-attr]
                    traffic.failures.append(f"{name}: {result.content}")
            traffic.calls += 1
        except Exception as exc:  # noqa: BLE001 - every failure is a result to report
            traffic.failures.append(f"{name}: {type(exc).__name__}: {exc}")
        await asyncio.sleep(PAUSE_SECONDS)
    await asyncio.sleep(3)  # the last announcement's notification is on its way


def _counting(name: str, traffic: Traffic) -> Any:
    traffic.changes[name] = 0

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            traffic.changes[name] += 1

    return on_message


async def _traffic(host_a: Host, host_b: Host, port_b: int, seconds: float) -> Traffic:
    traffic = Traffic()
    until = time.monotonic() + seconds
    auth = {"Authorization": f"Bearer {host_a.key}"}

    async def streamable() -> None:
        async with httpx2.AsyncClient(headers=auth, timeout=30, transport=PostsElsewhere(port_b)) as http:
            async with Client(streamable_http_client(host_a.url, http_client=http), mode="legacy",
                              message_handler=_counting("streamable", traffic)) as client:
                await _paced("streamable", client, until, traffic)

    async def http_sse() -> None:
        async with sse_session(host_a, transport=PostsElsewhere(port_b),
                               message_handler=_counting("http+sse", traffic)) as client:
            await _paced("http+sse", client, until, traffic)

    async def busy() -> None:
        async with httpx2.AsyncClient(headers=auth, timeout=30) as http:
            async with Client(streamable_http_client(host_b.url, http_client=http), mode="legacy") as client:
                while time.monotonic() < until:
                    try:
                        await client.call_tool("test_simple_text", {})
                        traffic.calls += 1
                    except Exception as exc:  # noqa: BLE001
                        traffic.failures.append(f"busy: {type(exc).__name__}: {exc}")
                    await asyncio.sleep(0.2)

    await asyncio.gather(streamable(), http_sse(), busy())
    return traffic


def _trouble(path: Any, since: int) -> list[str]:
    with open(path, "rb") as log:
        log.seek(since)
        lines = log.read().decode(errors="replace").splitlines()
    return [line for line in lines if any(word in line for word in TROUBLE)]


def test_streams_held_for_minutes_under_traffic_lose_nothing_and_log_no_interruption(
    transactional_db: None, sse_backend_url: str, page: Page
) -> None:
    tenant = factories.tenant_factory(slug="soak")
    issued = factories.api_key_factory(tenant=tenant)
    backend = factories.backend_factory(tenant=tenant, urls=[sse_backend_url], transport="sse")
    vhost = factories.virtual_host_factory(tenant=tenant, mounts={"old": backend})
    admin = superuser_factory()
    port_a, port_b = free_port(), free_port()
    database = settings.DATABASES["default"]["NAME"]
    env_a = gateway_env(database, settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-soak-a")
    env_b = gateway_env(database, settings.REDIS_URL, GATEWAY_INSTANCE_ID="gw-soak-b")
    with running(gateway_argv(port_a), port_a, env=env_a, log_name="soak-a"), \
         running(gateway_argv(port_b), port_b, env=env_b, log_name="soak-b"):
        logs = [log_path("soak-a", port_a), log_path("soak-b", port_b)]
        log_starts = [path.stat().st_size for path in logs]
        url_a, url_b = f"http://127.0.0.1:{port_a}", f"http://127.0.0.1:{port_b}"
        path = f"/mcp/{tenant.slug}/{vhost.slug}"
        host_a = Host(url_a + path, issued.secret, tenant.slug, vhost.slug)
        host_b = Host(url_b + path, issued.secret, tenant.slug, vhost.slug)

        frames: list[dict[str, Any]] = []
        closed: list[str] = []

        def watch(socket: WebSocket) -> None:
            socket.on("framereceived", lambda payload: frames.append(json.loads(payload)))
            socket.on("close", lambda s: closed.append(s.url))

        console_login(page, url_a, admin)
        page.on("websocket", watch)
        page.goto(f"{url_a}/console/t/{tenant.slug}/audit/")
        expect(page.locator("#live-status")).to_have_text("Live tail: new calls appear at the top.")
        deadline = time.monotonic() + 10
        while not frames and time.monotonic() < deadline:
            page.wait_for_timeout(100)  # the reload every tail sends once open
        assert frames and frames[0].get("missed") is False

        outcome: list[Traffic] = []
        load = threading.Thread(target=lambda: outcome.append(asyncio.run(_traffic(host_a, host_b, port_b,
                                                                                   SOAK_SECONDS))))
        load.start()
        while load.is_alive():
            page.wait_for_timeout(500)  # the page's events are taken while it waits
        load.join()
        written = AuditRecord.objects.filter(tenant_id=tenant.pk).count()
        deadline = time.monotonic() + 10
        while sum(frame.get("rows", "").count("<tr ") for frame in frames) < written and time.monotonic() < deadline:
            page.wait_for_timeout(200)
        trouble = [line for path, start in zip(logs, log_starts, strict=True) for line in _trouble(path, start)]
        status = page.locator("#live-status").inner_text()

    traffic = outcome[0]
    assert traffic.failures == []
    assert traffic.calls >= SOAK_SECONDS / PAUSE_SECONDS
    for name, triggered in traffic.triggers.items():  # every announcement reached the client's stream
        assert triggered >= 2 and traffic.changes[name] == triggered, (name, traffic.triggers, traffic.changes)
    assert trouble == []
    # The live tail: open throughout, every row live, none missed.
    assert closed == []
    assert [frame for frame in frames[1:] if "reload" in frame] == []
    live_rows = sum(frame.get("rows", "").count("<tr ") for frame in frames)
    assert written >= traffic.calls and live_rows == written
    assert "reloaded" not in status
