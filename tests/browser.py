"""Console pages in headless Chromium, clicked as a person would: Debian's chromium (installed by
scripts/install-browser.sh) driven by playwright's sync API, against the gateway under Daphne
(`gateway_url`). Registered from tests/conftest.py.

Tests that use `page` are sync tests. Data that the gateway must see is written with
`transactional_db`, as in the other end-to-end tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright._impl import _sync_base
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.processes import ROOT

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    # This machine's network is closed: without these Chromium keeps dialling out.
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 10_000
ARTIFACTS = ROOT / "var" / "test-artifacts"

_call_failed = pytest.StashKey[bool]()
_users = itertools.count(1)


# Playwright's sync API runs its event loop in a greenlet of this thread and, between two calls,
# leaves that loop marked as the thread's running loop. Django would then refuse ORM calls in a
# browser test ("You cannot call this from an async context"), and every async test after the first
# browser test would fail (asyncio.run() from a running loop). Mark the loop only while a call waits.
_wait_for_future = _sync_base.wait_for_future


def _wait_with_loop_marked(loop: asyncio.AbstractEventLoop, dispatcher: Any, future: asyncio.Future[Any]) -> None:
    __tracebackhide__ = True
    previous = asyncio._get_running_loop()
    asyncio._set_running_loop(loop)
    try:
        _wait_for_future(loop, dispatcher, future)
    finally:
        asyncio._set_running_loop(previous)


_sync_base.wait_for_future = _wait_with_loop_marked


@contextlib.contextmanager
def _playwright() -> Iterator[Any]:
    playwright = sync_playwright().start()
    loop = asyncio._get_running_loop()  # start() returns inside its loop
    asyncio._set_running_loop(None)
    try:
        yield playwright
    finally:
        asyncio._set_running_loop(loop)  # stop() resumes the loop, which clears the mark when it ends
        playwright.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    executable = shutil.which("chromium")
    if executable is None:
        reason = "Debian's chromium is not installed: scripts/install-browser.sh installs it"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with _playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_call_failed] = report.failed
    return report


def screenshot(page: Page, name: str) -> Path:
    """Saves what the page shows to var/test-artifacts/<name>.png."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
    page.screenshot(path=path, full_page=True)
    return path


DOCS_SCREENSHOTS = ROOT / "docs" / "screenshots"
#: Set to 1 (`make screenshots`) to write the docs' pictures into the tracked docs/screenshots/.
UPDATE_SCREENSHOTS = "GATEWAY_UPDATE_SCREENSHOTS"


def docs_screenshots_dir() -> Path:
    """docs/screenshots/ when GATEWAY_UPDATE_SCREENSHOTS=1, else var/test-artifacts/screenshots/: a
    plain test run still takes every picture but leaves the tracked files alone."""
    return DOCS_SCREENSHOTS if os.environ.get(UPDATE_SCREENSHOTS) == "1" else ARTIFACTS / "screenshots"


def docs_screenshot(page: Page, name: str) -> Path:
    """Saves the visible viewport (1280×800) as <name>.png in `docs_screenshots_dir()`: the picture
    of the page that the README links. Taken by the browser test that walks the page, so the
    picture shows what the code renders today."""
    directory = docs_screenshots_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
    page.screenshot(path=path, full_page=False)
    return path


#: Reports each Content-Security-Policy violation on the console, where `csp_violations` reads it.
_REPORT_CSP_VIOLATIONS = """document.addEventListener('securitypolicyviolation', (e) => console.error(
  `CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || 'inline code'} on ${e.documentURI}`));"""


def csp_violations(page: Page) -> list[str]:
    """Starts collecting the page's Content-Security-Policy violations, as Chromium reports them
    on the console (and as the page's `securitypolicyviolation` events say); returns the list."""
    found: list[str] = []
    page.context.add_init_script(_REPORT_CSP_VIOLATIONS)
    # Subscribing schedules a task on playwright's loop, which is marked running only while a call
    # waits (see above): mark it for this one too.
    previous = asyncio._get_running_loop()
    asyncio._set_running_loop(page._loop)
    try:
        page.on("console", lambda message: found.append(message.text) if (
            "Content Security Policy" in message.text or message.text.startswith("CSP violation")) else None)
    finally:
        asyncio._set_running_loop(previous)
    return found


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh context and page; a screenshot goes to var/test-artifacts/ when the test fails. Any
    Content-Security-Policy violation on any page fails the test (docs/security.md)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    violations = csp_violations(page)
    try:
        yield page
        if request.node.stash.get(_call_failed, False):
            with contextlib.suppress(Exception):
                screenshot(page, request.node.name)
    finally:
        context.close()
    if violations:
        pytest.fail("Content-Security-Policy violations:\n" + "\n".join(violations))


@dataclass(frozen=True)
class Login:
    username: str
    password: str


def superuser_factory(*, username: str | None = None, password: str = "browser-test-password") -> Login:
    username = username or f"admin-{next(_users)}"
    get_user_model().objects.create_superuser(username=username, email=f"{username}@example.com", password=password)
    return Login(username, password)


def user_factory(*, username: str | None = None, password: str = "browser-test-password") -> Login:
    """A console user without any role (give one with `membership_set`)."""
    username = username or f"user-{next(_users)}"
    get_user_model().objects.create_user(username=username, email=f"{username}@example.com", password=password)
    return Login(username, password)


def console_login(page: Page, base_url: str, login: Login) -> None:
    """Signs in through the console's form, as a person would, and waits to leave it."""
    page.goto(f"{base_url}/console/login/")
    page.get_by_label("Username").fill(login.username)
    page.get_by_label("Password").fill(login.password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()


@pytest.fixture
def logged_in_page(transactional_db: None, gateway_url: str, page: Page) -> Page:
    """A page signed in to the console as a new platform admin (superuser)."""
    console_login(page, gateway_url, superuser_factory())
    return page
