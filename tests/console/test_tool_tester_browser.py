"""The tool tester in headless Chromium, as a tenant admin uses it: open a tool, "Try it", fill in
its arguments, run it as a key, read the answer, switch to JSON, run again as oneself, and follow
the link to the call in the audit log."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page, expect

from apps.retrieval.models import IndexedTool
from apps.tenants.services import membership_set
from tests import factories
from tests.browser import console_login, docs_screenshot, user_factory
from tests.console.test_tool_tester_gateway import ADD_SCHEMA
from tests.console.test_tools import mcp_entry

pytestmark = pytest.mark.slow


def test_an_admin_tries_a_tool_with_the_form_and_with_json_and_finds_the_call_audited(
    transactional_db: None, gateway_url: str, demo_backend_url: str, page: Page
) -> None:
    tenant = factories.tenant_factory(slug="tryout")
    factories.api_key_factory(tenant=tenant, name="agent")
    demo = factories.backend_factory(tenant=tenant, name="demo", urls=[demo_backend_url])
    factories.virtual_host_factory(tenant=tenant, slug="main", mounts={"demo": demo})
    factories.virtual_host_factory(tenant=tenant, slug="second", mounts={"calc": demo})
    entry = mcp_entry(demo, "add", "Adds two numbers.", ["a", "b"])
    IndexedTool.objects.filter(pk=entry.pk).update(input_schema=ADD_SCHEMA)
    login = user_factory()
    membership_set(tenant=tenant, user=get_user_model().objects.get(username=login.username), role="admin")

    console_login(page, gateway_url, login)
    page.goto(f"{gateway_url}/console/t/tryout/tools/mcp/{entry.pk}/")
    page.get_by_role("link", name="Try it").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Try add")
    page.get_by_label("Virtual host").select_option(label="second (as add)")
    page.get_by_label("Call as").select_option(label="key agent")
    page.get_by_role("spinbutton", name="a", exact=True).fill("2")
    page.get_by_role("spinbutton", name="b", exact=True).fill("40")
    page.get_by_role("button", name="Run").click()

    result = page.locator("#try-result")
    expect(result.locator("#try-outcome")).to_have_text("ok")
    expect(result.locator("#try-content")).to_have_text("42.0")
    expect(result).to_contain_text("add on second as key:agent")
    expect(result.locator("#try-latency")).to_have_text(re.compile(r"^\d+\.\d ms$"))
    expect(page.get_by_role("spinbutton", name="b", exact=True)).to_have_value("40")  # the form keeps what was sent
    docs_screenshot(page, "console-tool-try")

    page.get_by_role("radio", name="JSON").check()
    expect(page.get_by_role("spinbutton", name="b", exact=True)).to_be_hidden()
    page.get_by_label("Call as").select_option(label=f"me: my test identity (console:{login.username})")
    page.get_by_label("Arguments (JSON)").fill('{"a": 1, "b": "two"}')
    page.get_by_role("button", name="Run").click()
    expect(result.locator("#try-outcome")).to_contain_text(re.compile(r"tool error|JSON-RPC error"))
    expect(result).to_contain_text(f"as key:console:{login.username}")

    result.get_by_role("link", name="this call in the audit log").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Audit log")
    expect(page.locator("#audit-rows")).to_contain_text(f"console · {login.username}", timeout=15_000)
    expect(page.locator("#audit-rows tr")).to_have_count(1)
