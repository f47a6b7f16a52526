"""A person connecting their own account at a backend, in headless Chromium as they click: the
console's *Connected accounts*, the connect page, the backend's own sign-in page (the official SDK's
authorization server), back to the console; then disconnecting after confirming. Takes the
pictures docs/identity.md shows."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page, expect

from apps.catalog.credentials import egress_credential_set
from apps.connections.models import Connection
from apps.tenants.services import membership_set
from tests import factories
from tests.browser import console_login, docs_screenshot, user_factory

pytestmark = pytest.mark.slow


def test_a_person_connects_their_account_then_disconnects_it(
    transactional_db: None, gateway_url: str, upstream_url: str, page: Page
) -> None:
    tenant = factories.tenant_factory(slug="acme", name="Acme")
    tracker = factories.backend_factory(tenant=tenant, name="tracker", urls=[f"{upstream_url}/mcp"])
    egress_credential_set(backend=tracker, source="per_person")
    factories.backend_factory(tenant=tenant, name="wiki", urls=[f"{upstream_url}/mcp"])
    login = user_factory(username="ada")
    membership_set(tenant=tenant, user=get_user_model().objects.get(username="ada"), role="member")
    console_login(page, gateway_url, login)

    page.get_by_role("link", name="Accounts", exact=True).click()  # the navigation's
    expect(page.get_by_role("heading", name="Connected accounts")).to_be_visible()
    expect(page.get_by_role("cell", name="not connected")).to_be_visible()
    expect(page.get_by_role("cell", name="wiki")).to_have_count(0)  # only backends that take a person's own account
    page.get_by_role("link", name="Connect your tracker account").click()
    expect(page.get_by_role("heading", name="Connect your tracker account")).to_be_visible()
    expect(page.locator("main")).to_contain_text(upstream_url)  # whose sign-in it is
    docs_screenshot(page, "console-connect-account")
    page.get_by_role("button", name="Continue to tracker").click()

    expect(page.get_by_role("heading", name="Sign in to Tracker")).to_be_visible()  # the backend's own page
    page.get_by_label("Account").fill("ada@tracker")
    page.get_by_role("button", name="Allow").click()

    expect(page.get_by_role("status")).to_contain_text("Your tracker account is connected.")
    expect(page.get_by_role("cell", name=re.compile(r"^connected "))).to_be_visible()
    docs_screenshot(page, "console-connected-accounts")
    assert "up-" not in page.content()  # no token is ever shown

    page.get_by_role("link", name="Disconnect your tracker account").click()
    expect(page.get_by_role("heading", name="Disconnect ada's tracker account?")).to_be_visible()
    assert Connection.objects.count() == 1  # nothing happened on one click
    page.get_by_role("button", name="Disconnect").click()
    expect(page.get_by_role("status")).to_contain_text("Disconnected ada's tracker account.")
    assert not Connection.objects.exists()
