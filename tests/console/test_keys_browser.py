"""The people pages in headless Chromium, as a tenant admin and a platform admin use them: a key
created in the console works from the official MCP SDK client until it is revoked in the console."""

from __future__ import annotations

import asyncio

import httpx
import httpx2
import pytest
from django.contrib.auth import get_user_model
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import Page, expect

from apps.tenants.models import ApiKey, Membership
from apps.tenants.services import membership_set
from tests import factories
from tests.browser import console_login, docs_screenshot, superuser_factory, user_factory
from tests.conftest import mcp_client

pytestmark = pytest.mark.slow


def _list_tools(url: str, secret: str) -> list[str]:
    async def agent() -> list[str]:
        async with mcp_client(url, secret) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    return asyncio.run(agent())


def _refused_with(url: str, secret: str) -> list[int]:
    """The HTTP statuses the gateway answered the official SDK client with, when the client failed
    to list the tools (the SDK reports only "Server returned an error response")."""
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    async def agent() -> None:
        headers = {"Authorization": f"Bearer {secret}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30, event_hooks={"response": [record]}) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                await client.list_tools()

    try:
        asyncio.run(agent())
    except Exception as exc:  # an exception group around the SDK's McpError
        assert "Server returned an error response" in repr(exc.exceptions), exc  # noqa: PT017
    else:
        raise AssertionError("the SDK listed the tools")
    return statuses


def test_a_tenant_admin_creates_a_key_an_agent_uses_it_and_revoking_it_locks_the_agent_out(
    transactional_db: None, gateway_url: str, demo_backend_url: str, page: Page
) -> None:
    tenant = factories.tenant_factory(slug="people-demo")
    factories.team_factory(tenant=tenant, slug="agents")
    backend = factories.backend_factory(tenant=tenant, urls=[demo_backend_url])
    host = factories.virtual_host_factory(tenant=tenant, slug="tools", mounts={"demo": backend})
    url = f"{gateway_url}/mcp/{tenant.slug}/{host.slug}"
    login = user_factory(username="tara")
    membership_set(tenant=tenant, user=get_user_model().objects.get(username=login.username), role="admin")
    colleague = user_factory(username="colin")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    console_login(page, gateway_url, login)

    # Create the key in the console; the secret is on the result page, once.
    page.goto(f"{gateway_url}/console/t/{tenant.slug}/keys/")
    page.get_by_role("link", name="New key").click()
    page.get_by_label("Name").fill("research-agent")
    page.get_by_label("Team").select_option(label="agents")
    page.get_by_label("Scopes").fill("tools:call")
    page.get_by_role("button", name="Create key").click()
    expect(page.get_by_role("heading", name="Key research-agent created")).to_be_visible()
    secret = page.locator("#the-secret").inner_text().strip()
    assert secret.startswith("mgw_")
    page.get_by_role("button", name="Copy").click()
    expect(page.locator(".copy-status")).not_to_have_text("")
    docs_screenshot(page, "console-key-created")
    key = ApiKey.objects.get(tenant=tenant, name="research-agent")
    assert key.owner.username == "tara" and key.team.slug == "agents" and key.scopes == ["tools:call"]

    page.get_by_role("link", name="Back to the keys").click()
    row = page.locator(f"#key-{key.pk}")
    expect(row).to_contain_text("active")
    expect(row).to_contain_text(secret[:12])
    assert secret not in page.content()
    docs_screenshot(page, "console-keys")

    # The agent lists the tools with it, through the official SDK client.
    assert "add" in _list_tools(url, secret)

    # Revoked in the console: the agent's next call is refused with 401.
    page.get_by_role("link", name="Revoke research-agent").click()
    expect(page.get_by_role("heading", name="Revoke key research-agent?")).to_be_visible()
    page.get_by_role("button", name="Revoke key").click()
    expect(page.get_by_role("status")).to_contain_text("Key research-agent revoked")
    expect(row).to_contain_text("revoked")
    statuses = _refused_with(url, secret)
    assert statuses and set(statuses) == {401}, statuses  # each attempt of the SDK refused

    # Members: add a colleague, then make them an admin.
    page.get_by_role("link", name="Members").click()
    page.get_by_label("Username").fill(colleague.username)
    page.get_by_label("Role", exact=True).select_option("member")
    page.get_by_role("button", name="Add member").click()
    expect(page.get_by_role("status")).to_contain_text("colin is now tenant member")
    page.get_by_label("Role of colin", exact=True).select_option("admin")
    page.get_by_role("button", name="Save the role of colin").click()
    expect(page.get_by_role("status")).to_contain_text("colin's role saved")
    assert Membership.objects.get(tenant=tenant, user__username="colin").role == "admin"
    docs_screenshot(page, "console-members")


def test_a_platform_admin_creates_a_plan_and_a_tenant_on_it(
    transactional_db: None, gateway_url: str, page: Page
) -> None:
    for slug in ("acme-corp", "globex", "initech"):
        factories.tenant_factory(slug=slug)
    console_login(page, gateway_url, superuser_factory())
    page.goto(f"{gateway_url}/console/tenants/")
    page.get_by_role("link", name="Plans").first.click()
    page.get_by_role("link", name="New plan").click()
    page.get_by_label("Name").fill("team-plan")
    page.get_by_label("Units per UTC day").fill("10000")
    page.get_by_role("button", name="Create plan").click()
    expect(page.get_by_role("status")).to_contain_text("Plan team-plan saved")
    docs_screenshot(page, "console-plans")

    page.get_by_role("link", name="Tenants").first.click()
    page.get_by_role("link", name="New tenant").click()
    page.get_by_label("Slug").fill("umbrella")
    page.get_by_label("Name").fill("Umbrella")
    page.get_by_label("Plan").select_option(label="team-plan")
    page.get_by_role("button", name="Create tenant").click()
    expect(page.get_by_role("status")).to_contain_text("Tenant umbrella created")
    expect(page.locator("#tenant-umbrella")).to_contain_text("team-plan")
    docs_screenshot(page, "console-tenants")

    page.get_by_label("Search by slug").fill("glob")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("tbody tr")).to_have_count(1)
    expect(page.locator("#tenant-globex")).to_be_visible()

    # Deleting asks first, naming what goes with the tenant.
    page.get_by_role("link", name="Delete globex").click()
    expect(page.get_by_role("heading", name="Delete tenant globex?")).to_be_visible()
    expect(page.locator(".confirm")).to_contain_text("API keys: 0")
    page.get_by_role("button", name="Delete tenant").click()
    expect(page.get_by_role("status")).to_contain_text("Tenant globex deleted")


def test_a_user_creates_a_rest_api_token_uses_it_and_revokes_it(
    transactional_db: None, gateway_url: str, page: Page
) -> None:
    factories.tenant_factory(slug="acme-corp")
    console_login(page, gateway_url, superuser_factory())
    page.goto(f"{gateway_url}/console/tenants/")
    page.get_by_role("link", name="My API tokens").click()
    page.get_by_label("Name").fill("terraform")
    page.get_by_role("button", name="Create token").click()
    expect(page.get_by_role("heading", name="Token terraform created")).to_be_visible()
    secret = page.locator("#the-secret").inner_text().strip()
    headers = {"Authorization": f"Bearer {secret}"}
    answer = httpx.get(f"{gateway_url}/api/v1/tenants", headers=headers)
    assert answer.status_code == 200 and [t["slug"] for t in answer.json()["results"]] == ["acme-corp"]

    page.get_by_role("link", name="Back to my tokens").click()
    expect(page.locator("tbody")).to_contain_text("terraform")
    assert secret not in page.content()
    docs_screenshot(page, "console-tokens")
    page.get_by_role("link", name="Revoke terraform").click()
    page.get_by_role("button", name="Revoke token").click()
    expect(page.get_by_role("status")).to_contain_text("Token terraform revoked")
    assert httpx.get(f"{gateway_url}/api/v1/tenants", headers=headers).status_code == 401
