"""The catalog's console pages in headless Chromium, clicked through as an admin would: an MCP backend
pointing at the real demo server, its replica seen up, a connection test, a virtual host mounting it
with the preview of its tool names, the Connect page; and an OpenAPI spec dropped onto its upload form."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from apps.catalog.models import Backend, VirtualHost
from tests import factories
from tests.browser import console_login, docs_screenshot, superuser_factory

pytestmark = pytest.mark.slow

PETS = {
    "openapi": "3.0.3", "info": {"title": "Pets", "version": "2"},
    "paths": {
        "/pets": {"get": {"operationId": "listPets", "responses": {"200": {"description": "ok"}}},
                  "post": {"operationId": "addPet", "responses": {"201": {"description": "ok"}}}},
        "/pets/{id}": {"get": {"operationId": "getPet", "parameters": [
            {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}}},
    },
}


def test_an_admin_adds_an_mcp_backend_mounts_it_and_connects_a_client(
    transactional_db: None, gateway_url: str, demo_backend_url: str, page: Page
) -> None:
    tenant = factories.tenant_factory(slug="acme")
    factories.openapi_backend_factory(tenant=tenant, name="pets")
    console_login(page, gateway_url, superuser_factory())

    page.goto(f"{gateway_url}/console/t/{tenant.slug}/backends/")
    page.get_by_role("link", name="New MCP backend").click()
    page.get_by_label("Name").fill("demo")
    page.get_by_label("Replica URLs").fill(demo_backend_url)
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="demo", exact=True)).to_be_visible()
    # The health fragment loads by itself and shows the replica up.
    health = page.locator("#backend-health")
    expect(health.locator(".state")).to_have_text("up")
    expect(health).to_contain_text("protocol 2025-11-25")
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#test-result")).to_contain_text("server demo")
    expect(page.locator("#test-result")).to_contain_text("protocol version 2025-11-25")
    docs_screenshot(page, "console-backend-mcp")
    page.get_by_role("link", name="Backends").first.click()
    expect(page.get_by_role("link", name="demo")).to_be_visible()
    docs_screenshot(page, "console-backends")

    # A virtual host mounting it, an alias, and the names the host serves.
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Virtual hosts").click()
    page.get_by_role("link", name="New virtual host").click()
    page.get_by_label("Slug").fill("assist")
    page.get_by_label("tool_search", exact=True).select_option("listed")
    page.get_by_role("button", name="Create").click()
    mount = page.get_by_role("form", name="Mount a backend")
    mount.get_by_label("Map key").fill("demo")
    mount.get_by_label("Backend", exact=True).select_option(label="demo (MCP server)")
    mount.get_by_role("button", name="Mount").click()
    expect(page.get_by_role("status")).to_contain_text("Mounted demo under demo")
    alias = page.get_by_role("form", name="Add an alias")
    alias.get_by_label("Alias", exact=True).fill("plus")
    alias.get_by_label("Tool (its name at the backend)").fill("add")
    alias.get_by_role("button", name="Save alias").click()
    exposed = page.locator("#exposed-tools")
    expect(exposed.get_by_role("cell", name="plus", exact=True)).to_be_visible()
    expect(exposed.get_by_role("cell", name="echo", exact=True).first).to_be_visible()
    expect(exposed).to_contain_text("tool_search")
    expect(exposed.get_by_role("cell", name="add", exact=True)).to_have_count(1)  # the upstream name only
    page.get_by_role("heading", name="Tool aliases").scroll_into_view_if_needed()
    page.evaluate("window.scrollBy(0, document.getElementById('aliases-heading').getBoundingClientRect().top - 16)")
    docs_screenshot(page, "console-virtual-host")
    host = VirtualHost.objects.get(tenant=tenant, slug="assist")
    assert list(host.mounts.values_list("map_key", "backend__name")) == [("demo", "demo")]

    page.get_by_role("link", name="Connect a client").click()
    expect(page.get_by_role("heading", name="Connect a client to assist")).to_be_visible()
    cursor = page.locator("#config-text-cursor")
    config = json.loads(cursor.inner_text())
    assert config["mcpServers"]["acme-assist"]["url"] == f"{gateway_url}/mcp/acme/assist/mcp"
    expect(page.get_by_role("button", name="Copy Cursor configuration")).to_be_visible()
    docs_screenshot(page, "console-connect")


def test_a_spec_dropped_on_the_upload_form_compiles(transactional_db: None, gateway_url: str, page: Page) -> None:
    tenant = factories.tenant_factory()
    backend = factories.openapi_backend_factory(tenant=tenant, name="pets")
    console_login(page, gateway_url, superuser_factory())
    page.goto(f"{gateway_url}/console/t/{tenant.slug}/backends/{backend.pk}/spec/")
    expect(page.get_by_text("…or drop the file here.")).to_be_visible()
    # What a drop from the file manager does: a DataTransfer holding the file, dropped on the zone.
    page.locator(".drop-zone").evaluate(
        """(zone, text) => {
            const data = new DataTransfer();
            data.items.add(new File([text], "pets.json", {type: "application/json"}));
            zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: data, bubbles: true, cancelable: true}));
            zone.dispatchEvent(new DragEvent("drop", {dataTransfer: data, bubbles: true, cancelable: true}));
        }""",
        json.dumps(PETS),
    )
    expect(page.get_by_role("status")).to_contain_text("Uploaded pets.json as version 1")
    expect(page.locator("#version-1 .status")).to_have_text("ready", timeout=30_000)
    expect(page.locator(".active-spec")).to_contain_text("Serving version 1: 3 tools")
    page.locator("#version-1").get_by_text("+3 −0 ~0").click()
    expect(page.locator("#version-1 ul.names.added")).to_contain_text("getPet")
    docs_screenshot(page, "console-backend-openapi-spec")
    assert Backend.objects.get(pk=backend.pk).active_spec.tool_count == 3
