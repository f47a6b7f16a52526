"""The console, the API docs and the admin under their Content-Security-Policy, in headless
Chromium: every page works (htmx requests, polling, the audit tail's WebSocket, Swagger UI) and
the browser reports no violation. The `page` fixture fails any browser test on a violation; these
tests walk every page and show that a violation is caught."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from playwright.sync_api import Browser, Page, expect

from apps.catalog.specs import spec_upload
from tests import factories
from tests.backends.specs import as_json, service_spec
from tests.browser import TIMEOUT_MS, console_login, csp_violations, superuser_factory

pytestmark = pytest.mark.slow


def test_every_console_page_the_api_docs_and_the_admin_work_without_a_csp_violation(
    transactional_db: None, gateway_url: str, demo_backend_url: str, recording_service_url: str, page: Page,
) -> None:
    violations = csp_violations(page)  # (the fixture collects them too; this list is read here)
    tenant = factories.tenant_factory(slug="acme-csp")
    backend = factories.backend_factory(tenant=tenant, name="demo", urls=[demo_backend_url])
    rest = factories.openapi_backend_factory(tenant=tenant, name="rest", base_url=recording_service_url)
    spec_upload(backend=rest, document=as_json(service_spec(security=False)))
    vhost = factories.virtual_host_factory(tenant=tenant, slug="main", mounts={"demo": backend, "rest": rest})
    factories.api_key_factory(tenant=tenant, name="agent")
    console_login(page, gateway_url, superuser_factory())

    response = page.goto(f"{gateway_url}/console/t/{tenant.slug}/dashboard/")
    assert response is not None
    headers = response.headers
    assert headers["content-security-policy"] == settings.GATEWAY_CONTENT_SECURITY_POLICY
    assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "same-origin" and headers["cross-origin-opener-policy"] == "same-origin"
    assert headers["permissions-policy"] == settings.GATEWAY_PERMISSIONS_POLICY

    hrefs = page.locator("nav.areas a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    for path in [h for h in hrefs if h.startswith("/console/")]:
        page.goto(f"{gateway_url}{path}")
        expect(page.locator("main")).to_be_visible()

    # htmx: the health of a backend is fetched after load, and again every few seconds.
    page.goto(f"{gateway_url}/console/t/{tenant.slug}/backends/{backend.pk}/")
    expect(page.locator("#backend-health")).not_to_be_empty(timeout=TIMEOUT_MS)
    # htmx: the tools list filters as one types (and pushes the URL).
    page.goto(f"{gateway_url}/console/t/{tenant.slug}/tools/")
    page.get_by_label("Search").fill("getPet")
    expect(page).to_have_url(re.compile(r"q=getPet"))
    page.goto(f"{gateway_url}/console/t/{tenant.slug}/virtual-hosts/{vhost.pk}/")
    expect(page.locator("#exposed-tools")).to_contain_text("getPet")
    # The audit tail: a WebSocket to the same origin.
    page.goto(f"{gateway_url}/console/t/{tenant.slug}/audit/")
    expect(page.locator("#live-status")).to_have_text("Live tail: new calls appear at the top.")
    # The platform pages, a form with the private-networks setting among them.
    page.goto(f"{gateway_url}/console/tenants/{tenant.slug}/")
    expect(page.get_by_label("Private networks")).to_be_visible()
    page.goto(f"{gateway_url}/console/plans/")
    expect(page.locator("main")).to_be_visible()

    # Swagger UI from the sidecar: it renders the operations and its script is a file of its own.
    page.goto(f"{gateway_url}/api/v1/docs")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible(timeout=TIMEOUT_MS)
    # The admin.
    page.goto(f"{gateway_url}/admin/")
    expect(page.locator("#site-name")).to_be_visible()
    page.goto(f"{gateway_url}/admin/tenants/tenant/")
    expect(page.locator("#result_list")).to_be_visible()
    assert violations == []


def test_a_violation_is_caught(gateway_url: str, browser: Browser) -> None:
    """The check of the other tests can fail: an inline script under the gateway's policy is reported."""
    context = browser.new_context()
    try:
        page = context.new_page()
        violations = csp_violations(page)
        page.route(f"{gateway_url}/csp-probe", lambda route: route.fulfill(
            status=200, content_type="text/html",
            headers={"Content-Security-Policy": settings.GATEWAY_CONTENT_SECURITY_POLICY},
            body="<!doctype html><p style='color: red'>inline style</p><script>document.title = 'ran'</script>",
        ))
        page.goto(f"{gateway_url}/csp-probe")
        expect(page).not_to_have_title("ran")
        page.wait_for_timeout(200)  # reports are dispatched after the page has loaded
        assert any("script-src" in v for v in violations), violations
        assert any("style-src" in v for v in violations), violations
    finally:
        context.close()
