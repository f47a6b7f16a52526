"""A virtual host's interceptors in headless Chromium, as a tenant admin clicks: from the host's
page to its interceptors, add a secrets interceptor, try it on a result carrying a cloud key and
see the key masked, add a personal data interceptor and move it up, then remove one after the
question. The page's picture: docs/screenshots/interceptors.png."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page, expect

from apps.policies.selectors import interceptor_specs_list
from apps.tenants.services import membership_set
from tests import factories
from tests.browser import console_login, docs_screenshot, user_factory

pytestmark = pytest.mark.slow

AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example key
#: How long a trial may take when it compiles a chain's detectors for the first time.
COMPILE_MS = 60_000


def _settled(page: Page) -> None:
    """Wait until htmx has settled what it swapped in: a person never acts within those few
    milliseconds, a test may."""
    page.wait_for_function("!document.querySelector('.htmx-request, .htmx-settling, .htmx-swapping')")


def test_an_admin_adds_tries_reorders_and_removes_interceptors(
    transactional_db: None, gateway_url: str, demo_backend_url: str, page: Page,
) -> None:
    tenant = factories.tenant_factory(slug="acme")
    backend = factories.backend_factory(tenant=tenant, name="demo", urls=[demo_backend_url])
    host = factories.virtual_host_factory(tenant=tenant, slug="main", mounts={"demo": backend})
    login = user_factory()
    membership_set(tenant=tenant, user=get_user_model().objects.get(username=login.username), role="admin")

    console_login(page, gateway_url, login)
    page.get_by_role("link", name="Virtual hosts").click()
    page.get_by_role("link", name="main", exact=True).click()
    expect(page.get_by_text("No interceptors: calls pass through as they are.")).to_be_visible()
    page.get_by_role("link", name="Manage interceptors").click()
    expect(page.get_by_role("heading", name="Interceptors of main")).to_be_visible()

    # A secrets interceptor, with the kind's defaults: mask, every detector.
    page.get_by_label("Add an interceptor of kind").select_option(label="Secrets")
    page.get_by_role("button", name="Add…").click()
    expect(page.get_by_role("heading", name="Add a secrets interceptor")).to_be_visible()
    expect(page.get_by_label("aws-access-key")).to_be_checked()
    page.get_by_label("Name").fill("cloud-keys")
    page.get_by_role("button", name="Add interceptor").click()
    expect(page.get_by_role("status")).to_have_text("Interceptor cloud-keys added at position 1.")
    expect(page.locator("#interceptor-1")).to_contain_text("mask; all detectors")

    # Try it on a result that carries a cloud key: the key comes back masked (htmx: the page stays).
    _settled(page)
    page.get_by_label("Phase").select_option("result")
    page.get_by_label("Target").fill("echo")
    page.get_by_label("Sample").fill(f"my config: aws_access_key_id={AWS_KEY_ID} and mail ada@example.com")
    page.get_by_role("button", name="Try it").click()
    after = page.locator("#trial-after")
    # The first trial compiles the chain's detectors (a few seconds); later ones reuse them.
    expect(after).to_contain_text("aws_access_key_id=[REDACTED:aws-access-key]", timeout=COMPILE_MS)
    expect(after).not_to_contain_text(AWS_KEY_ID)
    expect(page.locator("#trial-result")).to_contain_text("aws-access-key")
    expect(page.get_by_role("heading", name="Interceptors of main")).to_have_count(1)  # swapped in, not reloaded

    # A personal data interceptor that refuses card numbers, then moved ahead of the first.
    page.get_by_label("Add an interceptor of kind").select_option(label="Personal data")
    page.get_by_role("button", name="Add…").click()
    page.get_by_label("Name").fill("personal")
    page.get_by_label("card", exact=True).select_option("refuse")
    page.get_by_label("phone", exact=True).select_option("off")
    page.get_by_role("button", name="Add interceptor").click()
    expect(page.get_by_role("status")).to_have_text("Interceptor personal added at position 2.")
    page.get_by_role("button", name="Move interceptor personal up").click()
    expect(page.get_by_role("status")).to_have_text("Interceptor personal moved to position 1.")
    expect(page.locator("#interceptor-1")).to_contain_text("personal")
    expect(page.locator("#interceptor-1")).to_contain_text("refuse: card")
    expect(page.locator("#interceptor-2")).to_contain_text("cloud-keys")
    assert [spec.name for spec in interceptor_specs_list(virtual_host=host)] == ["personal", "cloud-keys"]

    # Both in the trial now, in their order: the address masked first, then the key.
    _settled(page)
    page.get_by_label("Target").fill("echo")
    page.get_by_label("Sample").fill(f"my config: aws_access_key_id={AWS_KEY_ID} and mail ada@example.com")
    page.get_by_role("button", name="Try it").click()
    steps = page.locator(".trial-steps tbody tr")
    expect(steps).to_have_count(2, timeout=COMPILE_MS)
    expect(steps.nth(0)).to_contain_text("personal")
    expect(steps.nth(0)).to_contain_text("email")
    expect(steps.nth(1)).to_contain_text("cloud-keys")
    expect(after).to_contain_text("[REDACTED:email]")
    page.evaluate("window.scrollBy(0, document.getElementById('chain-heading').getBoundingClientRect().top - 16)")
    docs_screenshot(page, "interceptors")

    # Removed after the question.
    page.get_by_role("link", name="Remove interceptor cloud-keys").click()
    expect(page.get_by_role("heading", name="Remove interceptor cloud-keys from main?")).to_be_visible()
    page.get_by_role("button", name="Remove interceptor").click()
    expect(page.get_by_role("status")).to_have_text("Interceptor cloud-keys removed.")
    expect(page.locator("#interceptor-2")).to_have_count(0)
    assert [spec.name for spec in interceptor_specs_list(virtual_host=host)] == ["personal"]
