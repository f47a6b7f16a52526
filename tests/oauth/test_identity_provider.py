"""People sign in through a tenant's own identity provider, end to end with software nobody here
wrote: a certified OpenID Provider (panva's oidc-provider, on Node) and headless Chromium. The
console's sign-in page offers the provider for the tenant's pages; the person signs in there and
lands where they were going, a console user and member of the tenant; signing in again is the same
person; one who left the tenant is not let back in; an answer that is not theirs is refused."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.test import Client
from playwright.sync_api import Browser, Page, expect

from apps.oauth.models import ExternalAccount
from apps.oauth.services import authorization_server_enable, identity_provider_clear, identity_provider_set
from apps.tenants.models import Membership
from tests import factories
from tests.browser import docs_screenshot
from tests.interop.node import NODE_BIN, NODE_PARTS, node_env
from tests.processes import ROOT, free_port, running

pytestmark = pytest.mark.slow

TENANT = "acme-sso"
CLIENT_ID, CLIENT_SECRET = "mcp-gateway", "idp-client-s3cret"


@pytest.fixture(scope="module")
def idp_url(gateway_url: str) -> Iterator[str]:
    """The OpenID Provider, knowing the gateway as a client whose redirect URI is the tenant's."""
    if not (NODE_PARTS / "oidc" / "node_modules" / "oidc-provider").exists():
        pytest.fail("oidc-provider is not installed: run scripts/install-node-parts.sh")
    port = free_port()
    argv = [str(NODE_BIN / "node"), str(ROOT / "tests" / "backends" / "oidc_provider.mjs"), str(port), CLIENT_ID,
            CLIENT_SECRET, f"{gateway_url}/oauth/{TENANT}/sign-in/callback"]
    with running(argv, port, env={**node_env(), "OIDC_DIR": str(NODE_PARTS / "oidc")}, log_name="oidc-provider"):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def tenant(transactional_db: None, idp_url: str) -> object:
    tenant = factories.tenant_factory(slug=TENANT, name="Acme")
    factories.virtual_host_factory(tenant=tenant, slug="main")
    authorization_server_enable(tenant=tenant)
    identity_provider_set(tenant=tenant, issuer=idp_url, client_id=CLIENT_ID, client_secret=CLIENT_SECRET,
                          label="Acme SSO")
    return tenant


def sign_in_at_the_provider(page: Page, login: str) -> None:
    """The provider's own (development) sign-in and consent pages, as a person clicks them."""
    page.locator("input[name=login]").fill(login)
    page.locator("input[name=password]").fill("any")
    page.locator("button[type=submit]").click()
    page.locator("button[type=submit]", has_text=re.compile("Continue|Authorize", re.I)).click()


def test_a_person_signs_in_through_the_tenants_provider(tenant: object, gateway_url: str, browser: Browser) -> None:
    page = browser.new_page()
    page.goto(f"{gateway_url}/console/t/{TENANT}/signed-in-apps/")  # where they were going: sign in first
    sign_in_with = page.get_by_role("link", name="Sign in with Acme SSO")
    expect(sign_in_with).to_be_visible()
    docs_screenshot(page, "console-sign-in-identity-provider")
    sign_in_with.click()
    sign_in_at_the_provider(page, "ada")
    expect(page.get_by_role("heading", name="Signed-in apps")).to_be_visible()  # back where they were going
    user = get_user_model().objects.get(external_accounts__subject="ada")
    assert user.username == f"{TENANT}.ada" and not user.has_usable_password()
    assert Membership.objects.get(user=user).role == "member"
    page.close()

    # Signing in again (another browser) is the same person, not a new one.
    again = browser.new_context().new_page()
    again.goto(f"{gateway_url}/console/t/{TENANT}/signed-in-apps/")
    again.get_by_role("link", name="Sign in with Acme SSO").click()
    sign_in_at_the_provider(again, "ada")
    expect(again.get_by_role("button", name="Log out")).to_be_visible()
    assert ExternalAccount.objects.count() == 1 and get_user_model().objects.filter(username__startswith=TENANT).count() == 1

    # Someone an admin removed from the tenant is not let back in by the provider.
    Membership.objects.filter(user=user).delete()
    third = browser.new_context().new_page()
    third.goto(f"{gateway_url}/console/t/{TENANT}/signed-in-apps/")
    third.get_by_role("link", name="Sign in with Acme SSO").click()
    sign_in_at_the_provider(third, "ada")
    expect(third.locator("main")).to_contain_text(f"{TENANT}.ada is no longer a member of Acme")


def test_the_consent_page_of_the_tenants_server_signs_in_through_the_provider(
    tenant: object, gateway_url: str, page: Page
) -> None:
    callback = f"http://127.0.0.1:{free_port()}/callback"
    client_id = httpx.post(f"{gateway_url}/oauth/{TENANT}/register",
                           json={"redirect_uris": [callback], "client_name": "Claude Code"}).json()["client_id"]
    page.goto(f"{gateway_url}/oauth/{TENANT}/authorize?response_type=code&client_id={client_id}&redirect_uri={callback}"
              f"&state=s&code_challenge={'a' * 43}&code_challenge_method=S256&resource={gateway_url}/mcp/{TENANT}/main")
    page.get_by_role("link", name="Sign in with Acme SSO").click()
    sign_in_at_the_provider(page, "bea")
    expect(page.get_by_role("heading", name=re.compile(r"^Allow .?Claude Code.? to use main\?$"))).to_be_visible()


def test_an_answer_that_is_not_this_browsers_is_refused(tenant: object, gateway_url: str, idp_url: str) -> None:
    host = urlsplit(gateway_url).netloc
    http = Client(HTTP_HOST=host)
    started = http.get(f"/oauth/{TENANT}/sign-in?next=/console/")
    assert started.status_code == 302 and started["Location"].startswith(f"{idp_url}/auth?")
    query = parse_qs(urlsplit(started["Location"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["nonce"] and query["scope"] == ["openid email profile"]
    stranger = Client(HTTP_HOST=host)  # the answer arrives in another browser (a lured person)
    refused = stranger.get(f"/oauth/{TENANT}/sign-in/callback?code=x&state={query['state'][0]}")
    assert refused.status_code == 403 and b"unknown or too old" in refused.content
    mixed = http.get(f"/oauth/{TENANT}/sign-in/callback?code=x&state={query['state'][0]}&iss=https%3A%2F%2Fevil.example")
    assert mixed.status_code == 403 and b"did not come from the tenant" in mixed.content
    again = http.get(f"/oauth/{TENANT}/sign-in/callback?code=x&state={query['state'][0]}")  # good once
    assert again.status_code == 403 and b"unknown or too old" in again.content
    assert not ExternalAccount.objects.exists()


def test_a_provider_is_checked_before_it_is_kept(tenant: object, demo_backend_url: str) -> None:
    with pytest.raises(ValidationError, match="publishes no OpenID metadata"):
        identity_provider_set(tenant=tenant, issuer=demo_backend_url.rsplit("/", 1)[0], client_id="x")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="the scopes must include openid"):
        identity_provider_set(tenant=tenant, issuer="https://idp.example.test", client_id="x", scope="email")  # type: ignore[arg-type]


def test_people_stay_linked_to_their_issuer_and_a_secret_to_its_client(tenant: Any, idp_url: str) -> None:
    ada = get_user_model().objects.create_user(username=f"{TENANT}.ada")
    ExternalAccount.objects.create(tenant=tenant, issuer=idp_url, subject="ada", user=ada)
    # Removed and added back: the same people (those removed from the tenant meanwhile stay out).
    identity_provider_clear(tenant=tenant)
    identity_provider_set(tenant=tenant, issuer=idp_url, client_id=CLIENT_ID, client_secret=CLIENT_SECRET)
    assert ExternalAccount.objects.get().user == ada
    # Another client id without a secret: the old client's secret is not sent for it.
    stored = identity_provider_set(tenant=tenant, issuer=idp_url, client_id="another-client")
    assert stored.client_secret == ""
