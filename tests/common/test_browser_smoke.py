"""The browser fixture chain: Chromium logs in to the admin through its form, on the gateway under Daphne."""

import pytest
from playwright.sync_api import Page, expect

from tests.browser import ARTIFACTS, DOCS_SCREENSHOTS, docs_screenshots_dir, screenshot, superuser_factory

pytestmark = pytest.mark.slow


def test_a_superuser_logs_in_through_the_admin_form(transactional_db: None, gateway_url: str, page: Page) -> None:
    admin = superuser_factory()
    page.goto(f"{gateway_url}/admin/login/")
    page.get_by_label("Username").fill(admin.username)
    page.get_by_label("Password").fill(admin.password)
    page.get_by_role("button", name="Log in").click()

    expect(page).to_have_url(f"{gateway_url}/admin/")
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
    expect(page.locator("#user-tools")).to_contain_text(admin.username)
    assert screenshot(page, "admin-index").stat().st_size > 0


def test_logged_in_page_is_signed_in_to_the_console(logged_in_page: Page) -> None:
    expect(logged_in_page.get_by_role("button", name="Log out")).to_be_visible()


def test_docs_pictures_go_to_docs_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain test run leaves the tracked docs/screenshots/ alone; `make screenshots` rewrites it."""
    monkeypatch.delenv("GATEWAY_UPDATE_SCREENSHOTS", raising=False)
    assert docs_screenshots_dir() == ARTIFACTS / "screenshots"
    monkeypatch.setenv("GATEWAY_UPDATE_SCREENSHOTS", "1")
    assert docs_screenshots_dir() == DOCS_SCREENSHOTS
