"""Every console page on a laptop and on a phone, in headless Chromium: nothing wider than the screen
(wide tables scroll inside their own box), every form control has a label, and a keyboard user can
reach the navigation (the skip link comes first and lands on the content)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests import factories
from tests.browser import console_login, superuser_factory

pytestmark = pytest.mark.slow

PAGES = [
    "dashboard/", "keys/", "teams/", "members/", "backends/", "virtual-hosts/", "connect/", "tools/",
    "retrieval/", "access/", "limits/", "audit/", "sessions/",
]
PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1366, "height": 768}

# What a page must not have: content wider than the viewport, and form controls without a label.
_PROBLEMS = """() => {
  const problems = [];
  if (document.documentElement.scrollWidth > window.innerWidth + 1)
    problems.push(`page is ${document.documentElement.scrollWidth}px wide in a ${window.innerWidth}px viewport`);
  for (const el of document.querySelectorAll('input, select, textarea')) {
    if (el.type === 'hidden' || el.type === 'submit' || el.type === 'button') continue;
    const labelled = (el.labels && el.labels.length) || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby');
    if (!labelled) problems.push(`unlabelled ${el.tagName.toLowerCase()} name=${el.name}`);
  }
  return problems;
}"""


def _paths(page: Page, gateway_url: str, tenant: str) -> list[str]:
    """The pages the navigation offers (so a new area is checked without editing this list)."""
    page.goto(f"{gateway_url}/console/t/{tenant}/dashboard/")
    hrefs = page.locator("nav.areas a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    return [h for h in hrefs if h.startswith("/console/")]


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_every_page_fits_the_screen_and_labels_its_fields(
    transactional_db: None, gateway_url: str, demo_backend_url: str, page: Page, viewport: dict[str, int]
) -> None:
    tenant = factories.tenant_factory(slug="acme-layout")
    backend = factories.backend_factory(tenant=tenant, name="demo", urls=[demo_backend_url])
    factories.virtual_host_factory(tenant=tenant, slug="main", mounts={"demo": backend})
    factories.api_key_factory(tenant=tenant, name="a-rather-long-key-name-for-a-narrow-screen")
    page.set_viewport_size(viewport)
    console_login(page, gateway_url, superuser_factory())
    paths = _paths(page, gateway_url, tenant.slug)
    assert {f"/console/t/{tenant.slug}/{p}" for p in PAGES} <= set(paths), paths
    for path in paths:
        page.goto(f"{gateway_url}{path}")
        expect(page.locator("main")).to_be_visible()
        assert page.evaluate(_PROBLEMS) == [], path
    page.goto(f"{gateway_url}/console/t/{tenant.slug}/dashboard/")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
