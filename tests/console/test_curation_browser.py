"""Curating a virtual host's tools in the console, in headless Chromium as a person clicks: search the
host's tools (ranked by relevance, paged on the server), hide a tool in bulk, see it under "hidden",
serve it again, add and remove a rule (with a confirmation), describe a tool, and unmount only after
confirming. What the gateway then serves: tests/gateway/test_curation.py."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from apps.catalog.models import ToolOverride, ToolRule
from tests import factories
from tests.browser import console_login, docs_screenshot, superuser_factory

pytestmark = pytest.mark.slow


def _settled(page: Page) -> None:
    """Wait until htmx has settled what it swapped in (its listeners are attached then): a person
    never acts within those few milliseconds, a test may."""
    page.wait_for_function("!document.querySelector('.htmx-request, .htmx-settling, .htmx-swapping')")


def test_an_admin_curates_a_hosts_tools(transactional_db: None, gateway_url: str, demo_backend_url: str,
                                        page: Page) -> None:
    tenant = factories.tenant_factory()
    backend = factories.backend_factory(tenant=tenant, name="demo", urls=[demo_backend_url])
    host = factories.virtual_host_factory(tenant=tenant, slug="assist", mounts={"demo": backend})
    console_login(page, gateway_url, superuser_factory())
    page.goto(f"{gateway_url}/console/t/{tenant.slug}/virtual-hosts/{host.pk}/")
    tools = page.locator("#exposed-tools")
    expect(tools.get_by_role("cell", name="echo", exact=True).first).to_be_visible()

    # Search as one types: the match in the name comes first.
    _settled(page)
    tools.get_by_label("Search").fill("echo")
    expect(page.locator("#exposed-tools tbody tr").first).to_contain_text("echo")
    expect(page.locator("#exposed-tools tbody tr")).to_have_count(1)

    # Hide it in bulk.
    page.locator("#exposed-tools").get_by_label("Select demo:echo").check()
    page.get_by_role("button", name="Hide selected").click()
    expect(page.get_by_role("status")).to_contain_text("1 tool hidden")
    assert ToolRule.objects.filter(virtual_host=host, action="exclude", pattern="echo", map_key="demo").exists()
    tools = page.locator("#exposed-tools")
    expect(tools).to_contain_text("hidden by the rules above")
    _settled(page)
    tools.get_by_label("Show", exact=True).select_option("hidden")
    expect(page.locator("#exposed-tools tbody tr")).to_have_count(1)
    expect(page.locator("#exposed-tools tbody tr").first).to_contain_text("hidden by the rule exclude name 'echo' of demo")
    page.evaluate("window.scrollBy(0, document.getElementById('curation-heading').getBoundingClientRect().top - 16)")
    docs_screenshot(page, "console-virtual-host-curation")

    # Serve it again.
    page.locator("#exposed-tools").get_by_label("Select demo:echo").check()
    page.get_by_role("button", name="Show selected").click()
    expect(page.get_by_role("status")).to_contain_text("1 tool served again")
    assert not ToolRule.objects.filter(virtual_host=host).exists()

    # A rule by glob, then removed after confirming.
    rule = page.get_by_role("form", name="Add a rule")
    rule.get_by_label("Action").select_option("exclude")
    rule.get_by_label("Match by").select_option("glob")
    rule.get_by_label("Name, glob or tag").fill("ec[")
    rule.get_by_role("button", name="Add rule").click()
    expect(page.get_by_role("alert").or_(page.get_by_role("status"))).to_contain_text("never closed")
    assert not ToolRule.objects.filter(virtual_host=host).exists()
    rule = page.get_by_role("form", name="Add a rule")
    rule.get_by_label("Action").select_option("exclude")
    rule.get_by_label("Match by").select_option("glob")
    rule.get_by_label("Name, glob or tag").fill("ec*")
    rule.get_by_role("button", name="Add rule").click()
    expect(page.get_by_role("status")).to_contain_text("Rule added: exclude glob 'ec*'")
    page.get_by_role("link", name="Remove rule exclude ec*").click()
    expect(page.get_by_role("heading", name="Remove the rule exclude glob 'ec*'?")).to_be_visible()
    assert ToolRule.objects.filter(virtual_host=host).exists()  # nothing happened on one click
    page.get_by_role("button", name="Remove rule").click()
    expect(page.get_by_role("status")).to_contain_text("Rule removed")
    assert not ToolRule.objects.filter(virtual_host=host).exists()

    # Describe a tool for this host.
    page.get_by_text("Rename or re-describe a tool").click()
    edit = page.get_by_role("form", name="Rename or describe a tool")
    edit.get_by_label("Tool").select_option("demo:add")
    edit.get_by_label("Description").fill("Add two numbers, for this host.")
    edit.get_by_role("button", name="Save description").click()
    expect(page.get_by_role("status")).to_contain_text("demo:add is described by this host now")
    assert ToolOverride.objects.get(virtual_host=host).description == "Add two numbers, for this host."
    expect(page.locator("#exposed-tools")).to_contain_text("Add two numbers, for this host.")

    # Unmounting asks first, and says what goes with it.
    page.get_by_role("link", name="Unmount demo").click()
    expect(page.get_by_role("heading", name="Unmount demo from assist?")).to_be_visible()
    expect(page.locator(".confirm")).to_contain_text("1 tool description")
    assert host.mounts.exists()
    page.get_by_role("link", name="Cancel").click()
    assert host.mounts.exists()


def test_a_host_with_many_mounts_is_paged_searched_and_mounted_by_typing(
    transactional_db: None, gateway_url: str, page: Page,
) -> None:
    tenant = factories.tenant_factory()
    backends = [factories.backend_factory(tenant=tenant, name=f"svc-{i:03}") for i in range(70)]
    host = factories.virtual_host_factory(tenant=tenant, slug="big", mounts={f"k{i:03}": b for i, b in enumerate(backends[:60])})
    console_login(page, gateway_url, superuser_factory())
    page.goto(f"{gateway_url}/console/t/{tenant.slug}/virtual-hosts/{host.pk}/")
    mounts = page.get_by_role("region", name="Mounted backends")
    expect(mounts.locator("tbody tr")).to_have_count(50)
    mounts.get_by_role("link", name="Next").click()
    expect(mounts.locator("tbody tr")).to_have_count(10)
    expect(mounts).to_contain_text("Page 2 of 2 (60 in all)")

    # Find one mount among many, and unmount it (after confirming).
    mounts.get_by_label("Find a mount").fill("svc-042")
    mounts.get_by_role("button", name="Find").click()
    expect(mounts.locator("tbody tr")).to_have_count(1)
    mounts.get_by_role("link", name="Unmount k042").click()
    page.get_by_role("button", name="Unmount").click()
    expect(page.get_by_role("status")).to_contain_text("Unmounted k042")
    assert not host.mounts.filter(map_key="k042").exists()

    # Seventy backends: the Backend field is a box that offers them as one types.
    form = page.get_by_role("form", name="Mount a backend")
    box = form.get_by_label("Backend")
    expect(box).to_have_attribute("list", "mount_backend-choices")
    expect(page.locator("#mount_backend-choices option")).to_have_count(70)
    form.get_by_label("Map key").fill("extra")
    box.fill("svc-no-such")
    form.get_by_role("button", name="Mount").click()
    expect(page.get_by_role("alert")).to_contain_text("Select a valid choice")
    form = page.get_by_role("form", name="Mount a backend")
    form.get_by_label("Backend").fill("svc-065")
    form.get_by_role("button", name="Mount").click()
    expect(page.get_by_role("status")).to_contain_text("Mounted svc-065 under extra")
    assert host.mounts.get(map_key="extra").backend.name == "svc-065"
