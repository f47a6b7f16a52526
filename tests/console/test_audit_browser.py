"""The audit log, dashboard and sessions pages in headless Chromium: an admin watches the log's
live tail while an agent calls a tool through the gateway with the official SDK — the row appears
without a reload — then sees the call counted on the dashboard and its session listed."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from playwright.sync_api import Page, expect

from tests import factories
from tests.audit.factories import audit_rows_create
from tests.browser import console_login, docs_screenshot, superuser_factory
from tests.conftest import mcp_client

pytestmark = pytest.mark.slow


def _history(tenant: object) -> None:
    """An hour of earlier traffic, so the pictures show what a working tenant sees."""
    now = time.time()
    for i, (tool, outcome, latency) in enumerate([
        ("search_docs", "ok", 35.0), ("create_ticket", "ok", 180.0), ("search_docs", "tool_error", 60.0),
        ("delete_repo", "denied", 1.0), ("create_ticket", "rate_limited", 1.0), ("summarize", "ok", 900.0),
    ]):
        count = 20 + 7 * i
        audit_rows_create(tenant=tenant, count=count, start=now - 3500 + 97 * i, step=(3300 - 97 * i) / count,
                          exposed_name=tool, outcome=outcome, latency_ms=latency, backend="demo", team="support")


def test_an_admin_sees_a_call_arrive_live_then_counted_and_its_session_listed(
    transactional_db: None, gateway_url: str, demo_backend_url: str, page: Page
) -> None:
    tenant = factories.tenant_factory(slug="acme-audit")
    issued = factories.api_key_factory(tenant=tenant, name="support-agent")
    backend = factories.backend_factory(tenant=tenant, name="demo", urls=[demo_backend_url])
    host = factories.virtual_host_factory(tenant=tenant, slug="main", mounts={"demo": backend})
    _history(tenant)
    console_login(page, gateway_url, superuser_factory())

    page.goto(f"{gateway_url}/console/t/{tenant.slug}/audit/")
    expect(page.get_by_role("heading", name="Audit log")).to_be_visible()
    expect(page.locator("#live-status")).to_have_text("Live tail: new calls appear at the top.")
    before = page.locator("#audit-rows tr").count()
    assert before == 50 and page.locator("#audit-rows tr.live").count() == 0

    # The agent keeps its (legacy) session open until the sessions page has been seen.
    called, done, results = threading.Event(), threading.Event(), []

    async def agent() -> None:
        async with mcp_client(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, "legacy") as client:
            results.append(await client.call_tool("add", {"a": 2, "b": 40}))
            called.set()
            await asyncio.to_thread(done.wait, 60)

    thread = threading.Thread(target=asyncio.run, args=(agent(),))
    thread.start()
    try:
        assert called.wait(30) and results[0].is_error is False, results
        _look(page, gateway_url, tenant.slug, before)
    finally:
        done.set()
        thread.join(30)


def _look(page: Page, gateway_url: str, slug: str, before: int) -> None:
    live = page.locator("#audit-rows tr.live").filter(has_text="add")
    expect(live.first).to_be_visible()  # no reload: it came over the websocket
    expect(live.first).to_contain_text("key:support-agent")
    assert page.locator("#audit-rows tr").count() > before
    docs_screenshot(page, "audit-log")

    # Filtering: the form narrows the log; choices are this tenant's.
    page.get_by_label("Outcome").select_option("denied")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#audit-rows tr").first).to_contain_text("denied by policy")
    assert page.locator("#audit-rows tr").filter(has_text="ok").count() == 0

    page.get_by_role("link", name="Dashboard").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    total = int(page.locator("#total-calls").inner_text())
    assert total == 1 + sum(20 + 7 * i for i in range(6))  # the history and the agent's call
    expect(page.locator(".chart svg")).to_have_count(5)
    docs_screenshot(page, "dashboard")
    page.get_by_role("link", name="Last day").click()
    expect(page.locator("#total-calls")).to_have_text(str(total))

    page.get_by_role("link", name="Sessions").click()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    row = page.locator("table.sessions tbody tr").first
    expect(row).to_contain_text("gw-test")  # the instance that opened it
    expect(row).to_contain_text("support-agent")
    expect(row).to_contain_text("main")
    docs_screenshot(page, "sessions")
