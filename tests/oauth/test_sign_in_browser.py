"""A person's side of signing an app in, in headless Chromium as they click: the consent page after
the console's sign-in, then the app on *Signed-in apps* and signing it out (after confirming).
Takes the pictures docs/identity.md shows."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page, Route, expect

from apps.oauth.models import Grant
from apps.oauth.services import authorization_server_enable
from apps.tenants.services import membership_set
from tests import factories
from tests.browser import docs_screenshot, user_factory
from tests.processes import free_port

pytestmark = pytest.mark.slow


def test_a_person_allows_an_app_then_signs_it_out(transactional_db: None, gateway_url: str, page: Page) -> None:
    tenant = factories.tenant_factory(slug="acme", name="Acme")
    factories.virtual_host_factory(tenant=tenant, slug="main")
    authorization_server_enable(tenant=tenant)
    login = user_factory(username="ada")
    membership_set(tenant=tenant, user=get_user_model().objects.get(username=login.username), role="member")
    callback = f"http://127.0.0.1:{free_port()}/callback"
    issuer = f"{gateway_url}/oauth/{tenant.slug}"
    client_id = httpx.post(f"{issuer}/register", json={"redirect_uris": [callback], "client_name": "Claude Code"}).json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    answered: dict[str, Any] = {}

    def on_callback(route: Route) -> None:
        answered["url"] = route.request.url
        route.fulfill(status=200, content_type="text/html", body="<p>Signed in.</p>")

    page.route(f"{callback}**", on_callback)
    page.goto(f"{issuer}/authorize?" + urlencode({
        "response_type": "code", "client_id": client_id, "redirect_uri": callback, "state": "s1",
        "code_challenge": challenge, "code_challenge_method": "S256", "resource": f"{gateway_url}/mcp/acme/main"}))
    page.get_by_label("Username").fill(login.username)
    page.get_by_label("Password").fill(login.password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name=re.compile(r"^Allow .?Claude Code.? to use main\?$"))).to_be_visible()
    expect(page.locator(".consent")).to_contain_text("127.0.0.1")  # where the answer goes
    docs_screenshot(page, "oauth-consent")
    page.get_by_role("button", name="Allow").click()
    page.wait_for_url(f"{callback}**")
    assert "code=" in answered["url"] and "iss=" in answered["url"]

    page.goto(f"{gateway_url}/console/t/acme/signed-in-apps/")
    expect(page.get_by_role("cell", name="Claude Code", exact=True)).to_be_visible()
    docs_screenshot(page, "console-signed-in-apps")
    page.get_by_role("link", name="Sign out Claude Code").click()
    expect(page.get_by_role("heading", name=re.compile(r"^Sign Claude Code out of"))).to_be_visible()
    assert Grant.objects.get().revoked_at is None  # nothing happened on one click
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("status")).to_contain_text("Claude Code is signed out")
    assert Grant.objects.get().revoked_at is not None
