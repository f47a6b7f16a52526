"""An OpenAPI backend's spec lifecycle in headless Chromium, clicked through as an admin would: a
version that would remove every tool is held with a warning and published only once confirmed;
a rollback to the first version serves its tools again; a failed upload is shown as an error; and
the credential's panel follows a version the worker publishes while the page is open."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from apps.catalog.models import Backend, SpecVersion
from apps.catalog.specs import spec_version_compile
from tests import factories
from tests.browser import console_login, docs_screenshot, superuser_factory

pytestmark = pytest.mark.slow

OK = {"200": {"description": "ok"}}


def _spec(*operation_ids: str, info: bool = True, schemes: dict[str, Any] | None = None) -> bytes:
    doc: dict[str, Any] = {"openapi": "3.0.3", "paths": {
        f"/{name}": {"get": {"operationId": name, "responses": OK}} for name in operation_ids}}
    if info:
        doc["info"] = {"title": "Pets", "version": "1"}
    if schemes:
        doc["components"] = {"securitySchemes": schemes}
    return json.dumps(doc).encode()


def _upload(page: Page, name: str, document: bytes, *, allow_removals: bool = False) -> None:
    page.get_by_label("OpenAPI document").set_input_files(
        {"name": name, "mimeType": "application/json", "buffer": document})
    if allow_removals:
        page.get_by_label("Publish it even if it removes more than half").check()
    page.get_by_role("button", name="Upload").click()


def test_a_version_removing_every_tool_is_held_until_confirmed_and_v1_comes_back_by_rollback(
    transactional_db: None, gateway_url: str, page: Page
) -> None:
    tenant = factories.tenant_factory()
    backend = factories.openapi_backend_factory(tenant=tenant, name="pets")
    console_login(page, gateway_url, superuser_factory())
    page.goto(f"{gateway_url}/console/t/{tenant.slug}/backends/{backend.pk}/spec/")

    _upload(page, "pets.json", _spec("listPets", "getPet", "addPet"))
    expect(page.get_by_role("status")).to_contain_text("Uploaded pets.json as version 1: it is served, with 3 tools.")
    expect(page.locator(".active-spec")).to_contain_text("Serving version 1: 3 tools")

    # An empty `paths`: valid, and it would silently remove everything. It is held instead.
    _upload(page, "empty.json", _spec())
    flash = page.locator(".message.warning")
    expect(flash).to_contain_text("Warning: Uploaded empty.json as version 2, but it is held, not published")
    expect(flash).to_have_css("background-color", "rgb(253, 246, 232)")
    expect(page.locator("#version-2 .status")).to_have_text("held")
    expect(page.locator(".held-notice")).to_contain_text(
        "it would remove 3 of the 3 tools served now (more than half). The backend keeps serving version 1.")
    expect(page.locator(".active-spec")).to_contain_text("Serving version 1: 3 tools")
    docs_screenshot(page, "console-spec-held")

    page.locator("#version-2").get_by_role("link", name="Publish anyway…").click()
    expect(page.get_by_role("heading", name="Publish version 2 of pets anyway?")).to_be_visible()
    expect(page.get_by_text("It removes 3 of the 3 tools served now")).to_be_visible()
    page.get_by_role("button", name="Publish version 2").click()
    expect(page.get_by_role("status")).to_contain_text("Version 2 published anyway: it is served, with 0 tools.")
    expect(page.locator(".active-spec")).to_contain_text("Serving version 2: 0 tools")

    page.locator("#version-1").get_by_role("link", name="Roll back to v1…").click()
    expect(page.get_by_role("heading", name="Roll back pets to version 1?")).to_be_visible()
    page.get_by_role("button", name="Roll back to version 1").click()
    expect(page.get_by_role("status")).to_contain_text("Rolled back to version 1 as version 3: it is served, with 3 tools.")
    expect(page.locator(".active-spec")).to_contain_text("Serving version 3: 3 tools")
    expect(page.locator("#version-3")).to_contain_text("(restores v1)")
    assert sorted(Backend.objects.get(pk=backend.pk).tools.values_list("name", flat=True)) == [
        "addPet", "getPet", "listPets"]


def test_a_failed_upload_is_an_error_and_the_schemes_follow_a_version_published_meanwhile(
    transactional_db: None, gateway_url: str, page: Page
) -> None:
    tenant = factories.tenant_factory()
    backend = factories.openapi_backend_factory(tenant=tenant, name="keys")
    console_login(page, gateway_url, superuser_factory())
    page.goto(f"{gateway_url}/console/t/{tenant.slug}/backends/{backend.pk}/spec/")

    _upload(page, "bad.json", _spec("listPets", info=False))
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Error: Uploaded bad.json as version 1, but it failed with 1 error")
    expect(alert).to_have_css("background-color", "rgb(253, 241, 240)")
    expect(page.locator("#version-1")).to_contain_text("failed")
    expect(page.locator("#security-schemes")).to_contain_text("no version is served yet")

    # A version stored while the worker is busy: the page polls, then the worker publishes it.
    version = SpecVersion.objects.create(
        backend=backend, number=2, filename="keys.json", sha256="0" * 64, size=1,
        document=_spec("listPets", schemes={"key": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}))
    page.reload()
    expect(page.locator("#version-2 .status")).to_have_text("pending")
    spec_version_compile(spec_version_id=version.pk)
    expect(page.locator("#version-2 .status")).to_have_text("ready")
    expect(page.locator("#security-schemes")).to_contain_text("key: API key in header X-API-Key")
