"""A person signs an MCP client in to a virtual host, end to end with software nobody here wrote: the
official Python SDK's OAuth client (discovery from the gateway's 401, protected-resource and
authorization-server metadata, registration, PKCE, the token request, the `iss` check) against a
real gateway under Daphne, the consent page clicked in headless Chromium after the console's
sign-in. Then the token works on its host only, and stops working the moment its grant is revoked."""

from __future__ import annotations

import asyncio
import re
import shutil
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from playwright.async_api import async_playwright

from apps.oauth.models import Grant
from apps.oauth.selectors import public_key_pem
from apps.oauth.services import authorization_server_enable, grants_revoke
from apps.tenants.services import membership_set, token_issuer_set
from tests import factories
from tests.browser import CHROMIUM_ARGS, user_factory
from tests.gateway.helpers import modern
from tests.processes import free_port

pytestmark = pytest.mark.slow


class _Memory:
    """The SDK's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def _setup(gateway_url: str, backend_url: str) -> dict[str, Any]:
    tenant = factories.tenant_factory()
    backend = factories.backend_factory(tenant=tenant, urls=[backend_url])
    factories.virtual_host_factory(tenant=tenant, slug="main", mounts={"demo": backend})
    factories.virtual_host_factory(tenant=tenant, slug="other", mounts={"demo": backend})
    authorization_server_enable(tenant=tenant)
    login = user_factory()
    membership_set(tenant=tenant, user=get_user_model().objects.get(username=login.username), role="member")
    # The URL as the Connect page gives it (with `/mcp` at the end).
    return {"tenant": tenant, "login": login, "main": f"{gateway_url}/mcp/{tenant.slug}/main/mcp",
            "other": f"{gateway_url}/mcp/{tenant.slug}/other/mcp"}


async def test_a_person_signs_the_sdk_client_in_and_its_token_serves_that_host_only(
    transactional_db: None, gateway_url: str, demo_backend_url: str,
) -> None:
    made = await database_sync_to_async(_setup)(gateway_url, demo_backend_url)
    callback = f"http://127.0.0.1:{free_port()}/callback"
    answered: dict[str, str] = {}
    executable = shutil.which("chromium")
    assert executable is not None, "scripts/install-browser.sh installs Debian's chromium"

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = await browser.new_page()

        async def on_callback(route: Any) -> None:  # the client's local listener, as a browser sees it
            answered["url"] = route.request.url
            await route.fulfill(status=200, content_type="text/html", body="<p>You may close this window.</p>")

        await page.route(f"{callback}**", on_callback)

        async def redirect_handler(url: str) -> None:  # a person, in their browser
            await page.goto(url)
            await page.get_by_label("Username").fill(made["login"].username)
            await page.get_by_label("Password").fill(made["login"].password)
            await page.get_by_role("button", name="Sign in").click()
            await page.get_by_role("heading", name=re.compile(r"^Allow .?SDK agent.? to use main\?$")).wait_for()
            await page.get_by_role("button", name="Allow").click()
            await page.wait_for_url(f"{callback}**")

        async def callback_handler() -> AuthorizationCodeResult:
            query = parse_qs(urlsplit(answered["url"]).query)
            return AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0],
                                           iss=query.get("iss", [None])[0])

        storage = _Memory()
        auth = OAuthClientProvider(
            server_url=made["main"], storage=storage, redirect_handler=redirect_handler, callback_handler=callback_handler,
            client_metadata=OAuthClientMetadata(redirect_uris=[callback], client_name="SDK agent",
                                                grant_types=["authorization_code", "refresh_token"], response_types=["code"]),
        )
        async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
            async with Client(streamable_http_client(made["main"], http_client=http)) as client:
                tools = {tool.name for tool in (await client.list_tools()).tools}
                assert "echo" in tools
                result = await client.call_tool("echo", {"text": "signed in"})
                assert not result.is_error and "signed in" in result.content[0].text
        await browser.close()

    assert storage.tokens is not None and storage.tokens.refresh_token
    assert storage.client is not None and storage.client.client_id.startswith("gwc_")
    token = storage.tokens.access_token

    def call(url: str) -> Any:
        return modern(url, "tools/list", key=token)

    assert (await asyncio.to_thread(call, made["main"])).status_code == 200
    elsewhere = await asyncio.to_thread(call, made["other"])  # RFC 8707: a token for one host is refused on another
    assert elsewhere.status_code == 401 and "another audience" in elsewhere.text
    assert 'resource_metadata="' in elsewhere.headers["www-authenticate"]
    grant = await database_sync_to_async(lambda: Grant.objects.get(tenant=made["tenant"]))()

    def impostor() -> None:  # an issuer configured with the gateway's own URL and key is never taken for it
        tenant = made["tenant"]
        token_issuer_set(tenant=tenant, issuer=f"{gateway_url}/oauth/{tenant.slug}", audience=made["main"],
                         public_key=public_key_pem(server=tenant.authorization_server), algorithms=["ES256"])

    await database_sync_to_async(impostor)()
    await database_sync_to_async(grants_revoke)(tenant=made["tenant"], grant_ids=[grant.pk])
    for _ in range(50):  # the snapshot has it within GATEWAY_SNAPSHOT_CHECK_SECONDS
        revoked = await asyncio.to_thread(call, made["main"])
        if revoked.status_code == 401:
            break
        await asyncio.sleep(0.1)
    assert revoked.status_code == 401 and "grant was revoked" in revoked.text
