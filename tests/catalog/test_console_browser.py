"""The spec page in headless Chromium, as an admin uses it: upload the real EC2 spec, see its tools,
and call one through the gateway with the official SDK client; set the backend's credential and see
the service receive it."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from apps.catalog.models import Backend
from apps.catalog.specs import spec_upload
from tests import factories
from tests.browser import console_login, screenshot, superuser_factory
from tests.conftest import mcp_client

pytestmark = pytest.mark.slow

CATALOG = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "catalog" / "openapi"


def test_an_admin_uploads_ec2_in_the_browser_and_an_agent_calls_its_tools(
    transactional_db: None, gateway_url: str, recording_service_url: str, page: Page, tmp_path: Path
) -> None:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    backend = factories.openapi_backend_factory(tenant=tenant, name="ec2", base_url=recording_service_url)
    host = factories.virtual_host_factory(tenant=tenant, mounts={"ec2": backend})
    console_login(page, gateway_url, superuser_factory())

    page.goto(f"{gateway_url}/console/t/{tenant.slug}/backends/")
    page.get_by_role("link", name="ec2").click()
    expect(page.get_by_text("No version is being served yet.")).to_be_visible()
    page.get_by_label("OpenAPI document").set_input_files(CATALOG / "aws" / "ec2.json")
    page.get_by_role("button", name="Upload").click()
    row = page.locator("#version-1")
    expect(row.locator(".status")).to_have_text("ready", timeout=60_000)
    expect(page.locator(".active-spec")).to_contain_text("Serving version 1: 765 tools")
    screenshot(page, "console-spec-ec2")
    row.get_by_text("+765 −0 ~0").click()
    expect(row).to_contain_text("DescribeVpcs")

    # A broken re-upload: precise errors on the page, version 1 keeps serving.
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"openapi": "3.0.0", "info": {"title": "x", "version": "1"},
                                  "paths": {"/a": {"get": {"parameters": [{"$ref": "#/nope"}], "responses": {}}}}}))
    page.get_by_label("OpenAPI document").set_input_files(broken)
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("#version-2 .status")).to_have_text("failed", timeout=30_000)
    expect(page.locator("#spec-history")).to_contain_text("/paths/~1a/get/parameters/0/$ref")
    expect(page.locator(".active-spec")).to_contain_text("Serving version 1: 765 tools")
    assert Backend.objects.get(pk=backend.pk).active_spec.number == 1

    async def agent() -> tuple[int, object]:
        async with mcp_client(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, "legacy") as client:
            names, cursor = [], None
            while True:  # 5 MB of tools come in pages under 1 MB (docs/virtual-hosts.md, "Lists")
                page = await client.list_tools(cursor=cursor)
                names += [tool.name for tool in page.tools]
                if (cursor := page.next_cursor) is None:
                    break
            result = await client.call_tool("DescribeVpcs", {"VpcIds": ["vpc-1"], "MaxResults": 5})
            return len(set(names)), result

    httpx.post(f"{recording_service_url}/__reset")
    count, result = asyncio.run(agent())
    assert count == 765
    assert result.is_error is False, result
    (sent,) = httpx.get(f"{recording_service_url}/__recorded").json()
    assert (sent["method"], sent["path"]) == ("POST", "/ec2/DescribeVpcs")
    assert json.loads(base64.b64decode(sent["body"])) == {"VpcIds": ["vpc-1"], "MaxResults": 5}


def test_an_admin_sets_a_bearer_credential_in_the_browser_and_the_service_receives_it(
    transactional_db: None, gateway_url: str, recording_service_url: str, page: Page
) -> None:
    tenant = factories.tenant_factory()
    issued = factories.api_key_factory(tenant=tenant)
    backend = factories.openapi_backend_factory(tenant=tenant, name="things", base_url=recording_service_url)
    host = factories.virtual_host_factory(tenant=tenant, mounts={"things": backend})
    document = {
        "openapi": "3.0.3", "info": {"title": "Things", "version": "1"},
        "components": {"securitySchemes": {"token": {"type": "http", "scheme": "bearer"}}},
        "paths": {"/things": {"get": {"operationId": "listThings", "responses": {"200": {"description": "ok"}}}}},
    }
    # Celery is eager and there is no transaction around the test: this compiles before it returns.
    spec_upload(backend=backend, document=json.dumps(document).encode(), filename="things.json")
    console_login(page, gateway_url, superuser_factory())
    secret = "tok-3f9a7c1e-only-the-service-may-see-this"

    page.goto(f"{gateway_url}/console/t/{tenant.slug}/backends/{backend.pk}/spec/")
    expect(page.locator("#credential-state")).to_contain_text("none")
    expect(page.locator("#security-schemes")).to_contain_text("token: Bearer token")
    page.get_by_label("Kind", exact=True).select_option(label="Bearer token")
    page.get_by_label("Secret").fill(secret)
    page.get_by_role("button", name="Save credential").click()
    expect(page.get_by_role("status")).to_have_text("Credential saved.")
    expect(page.locator("#credential-state")).to_contain_text("Bearer token, set")
    expect(page.get_by_label("Secret")).to_have_value("")
    screenshot(page, "console-credential")
    assert secret not in page.content()

    async def agent() -> object:
        async with mcp_client(f"{gateway_url}/mcp/{tenant.slug}/{host.slug}", issued.secret, "legacy") as client:
            return await client.call_tool("listThings", {})

    httpx.post(f"{recording_service_url}/__reset")
    result = asyncio.run(agent())
    assert result.is_error is False, result
    (sent,) = httpx.get(f"{recording_service_url}/__recorded").json()
    assert (sent["method"], sent["path"]) == ("GET", "/things")
    authorization = [value for name, value in sent["headers"] if name.lower() == "authorization"]
    assert authorization == [f"Bearer {secret}"]  # the agent's own key stays at the gateway
