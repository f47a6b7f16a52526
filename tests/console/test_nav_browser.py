"""The console's header at a common laptop width (1280×800), in headless Chromium: nothing wraps. The
platform's and the user's own pages share the first row with the brand, the tenant and the user; the
tenant's pages are one row of their own; every page is still one click away."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from tests import factories
from tests.browser import console_login, superuser_factory

pytestmark = pytest.mark.slow

# The vertical middle of each link of the tenant's navigation, and of each visible item of the row
# above it (its navigation's links one by one, so a wrap inside it shows too).
_ROWS = """() => {
  const mid = e => { const r = e.getBoundingClientRect(); return Math.round(r.top + r.height / 2); };
  const shown = e => e.getClientRects().length > 0;
  const nav = document.querySelector('header.top nav[aria-label="Console"]');
  const above = [...document.querySelectorAll('header.top > :not(nav), header.top > nav.account > a')].filter(shown);
  return {nav: [...nav.querySelectorAll('a')].map(mid), above: above.map(mid),
          navHeight: nav.getBoundingClientRect().height, linkHeight: nav.querySelector('a').getBoundingClientRect().height};
}"""


def test_the_navigation_fits_one_row_at_1280(transactional_db: None, gateway_url: str, page: Page) -> None:
    # The widest header: a platform admin (the platform's pages), several tenants (the tenant menu), long names.
    tenant = factories.tenant_factory(slug="acme-navigation")
    factories.tenant_factory(slug="another-tenant")
    console_login(page, gateway_url, superuser_factory(username="platform-administrator"))
    page.set_viewport_size({"width": 1280, "height": 800})
    linked: set[str] = set()
    for path in ("dashboard/", "virtual-hosts/"):
        page.goto(f"{gateway_url}/console/t/{tenant.slug}/{path}")
        rows = page.evaluate(_ROWS)
        assert max(rows["nav"]) - min(rows["nav"]) <= 2 and rows["navHeight"] <= rows["linkHeight"] + 4, rows
        assert max(rows["above"]) - min(rows["above"]) <= 4 and max(rows["above"]) < min(rows["nav"]), rows
        linked |= set(page.locator("header.top nav a").evaluate_all("links => links.map(a => a.getAttribute('href'))"))
    expected = {f"/console/t/{tenant.slug}/{p}" for p in (
        "dashboard/", "keys/", "teams/", "members/", "backends/", "virtual-hosts/", "connect/", "tools/",
        "retrieval/", "access/", "limits/", "audit/", "sessions/")} | {
        "/console/tenants/", "/console/plans/", "/console/tokens/", "/api/v1/docs"}
    assert expected <= linked, expected - linked
    # Outside a tenant (the platform's pages) there is no tenant row, and the first row still fits.
    page.goto(f"{gateway_url}/console/plans/")
    assert page.locator('nav[aria-label="Console"]').count() == 0
    assert page.locator("nav.account a[aria-current='page']").inner_text() == "Plans"
