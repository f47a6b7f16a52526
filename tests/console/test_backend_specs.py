"""The spec page's lifecycle through Django's test client: a failed upload flashes as an error, a
version that would remove most tools is held with a notice and "Publish anyway…", rollback to an
earlier version (each behind a confirmation page), and the history's poll bringing the spec's
security schemes along. Uploading and the credential form: tests/catalog/test_views.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from apps.catalog.models import Backend, SpecVersion, Tool
from apps.catalog.specs import spec_version_compile
from apps.tenants.services import membership_set
from tests.factories import openapi_backend_factory

pytestmark = pytest.mark.django_db(transaction=True)  # an upload compiles when it commits (eager Celery)

KEYED = {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}}


def _doc(*operation_ids: str, components: dict[str, Any] | None = None) -> bytes:
    paths = {f"/{name}": {"get": {"operationId": name, "responses": {"200": {"description": "ok"}}}}
             for name in operation_ids}
    doc = {"openapi": "3.0.3", "info": {"title": "Zoo", "version": "7"}, "paths": paths}
    return json.dumps({**doc, **({"components": components} if components else {})}).encode()


def _page(backend: Backend) -> str:
    return f"/console/t/{backend.tenant.slug}/backends/{backend.pk}/spec/"


def _upload(client: Client, backend: Backend, document: bytes, name: str = "zoo.json", **fields: Any):
    upload = SimpleUploadedFile(name, document, content_type="application/json")
    return client.post(_page(backend), {"file": upload, **fields})


def _names(backend: Backend) -> list[str]:
    return sorted(Tool.objects.filter(backend=backend).values_list("name", flat=True))


def test_a_failed_upload_flashes_as_an_error(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    response = _upload(admin_client, backend, json.dumps({"openapi": "3.0.3", "paths": {}}).encode(), "bad.json")
    assert response.status_code == 302
    html = admin_client.get(response["Location"]).content.decode()
    assert ('<li class="message error" role="alert"><strong class="message-kind">Error:</strong> Uploaded bad.json '
            "as version 1, but it failed with 1 error: nothing from it is served. See them below.</li>") in html
    assert "/info</code> the field &#x27;info&#x27; is missing; OpenAPI 3.0 requires it" in html


def test_a_version_removing_most_tools_is_held_and_published_after_confirmation(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    _upload(admin_client, backend, _doc("lions", "tigers", "bears"))
    response = _upload(admin_client, backend, _doc(), "empty.json")
    html = admin_client.get(response["Location"]).content.decode()
    assert '<li class="message warning" role="status"><strong class="message-kind">Warning:</strong>' in html
    assert "Uploaded empty.json as version 2, but it is held, not published: it would remove 3 of the 3 tools" in html
    assert 'class="status held"' in html and "Serving version 1: 3 tools" in html
    assert ("Held, not published: it would remove 3 of the 3 tools served now (more than half). The backend keeps "
            "serving version 1.") in html
    confirm = f"{_page(backend)}2/publish/"
    assert f'href="{confirm}">Publish anyway…</a>' in html
    assert _names(backend) == ["bears", "lions", "tigers"]

    page = admin_client.get(confirm)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Publish version 2 of" in text and "It removes 3 of the 3 tools served now" in text
    assert "<code>lions</code>" in text and ">Publish version 2</button>" in text
    assert _names(backend) == ["bears", "lions", "tigers"]  # asking changed nothing

    done = admin_client.post(confirm)
    assert done.status_code == 302 and done["Location"] == _page(backend)
    html = admin_client.get(_page(backend)).content.decode()
    assert "Version 2 published anyway: it is served, with 0 tools." in html
    assert "Serving version 2: 0 tools" in html and _names(backend) == []


def test_the_checkbox_publishes_at_once_whatever_it_removes(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    _upload(admin_client, backend, _doc("lions", "tigers"))
    html = admin_client.get(_page(backend)).content.decode()
    assert 'name="allow_removals"' in html and "Publish it even if it removes more than half" in html
    response = _upload(admin_client, backend, _doc(), "empty.json", allow_removals="on")
    html = admin_client.get(response["Location"]).content.decode()
    assert '<li class="message success" role="status">Uploaded empty.json as version 2: it is served, with 0 tools.' in html
    backend.refresh_from_db()
    assert backend.active_spec.number == 2 and backend.active_spec.allow_removals


def test_rolling_back_to_an_earlier_version_after_confirmation(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    _upload(admin_client, backend, _doc("lions", "tigers"))
    _upload(admin_client, backend, _doc("lions", "bears"), "zoo2.json")
    html = admin_client.get(_page(backend)).content.decode()
    confirm = f"{_page(backend)}1/rollback/"
    assert f'href="{confirm}">Roll back to v1…</a>' in html
    assert f"{_page(backend)}2/rollback/" not in html  # the served version has no rollback

    text = admin_client.get(confirm).content.decode()
    assert "Roll back" in text and "to version 1?" in text and ">Roll back to version 1</button>" in text
    done = admin_client.post(confirm)
    assert done.status_code == 302
    html = admin_client.get(_page(backend)).content.decode()
    assert "Rolled back to version 1 as version 3: it is served, with 2 tools." in html
    assert "Serving version 3: 2 tools" in html and "(restores v1)" in html
    assert _names(backend) == ["lions", "tigers"]


def test_a_refused_rollback_shows_why_and_changes_nothing(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    _upload(admin_client, backend, _doc("lions"))
    response = admin_client.post(f"{_page(backend)}1/rollback/")
    assert response.status_code == 400
    assert "Nothing was changed:" in response.content.decode() and "version 1 is the version being served" in (
        response.content.decode())
    assert admin_client.get(f"{_page(backend)}9/rollback/").status_code == 404
    assert backend.spec_versions.count() == 1


def test_members_see_the_history_without_actions_and_may_not_act(client: Client, django_user_model: Any) -> None:
    backend = openapi_backend_factory()
    admin = Client()
    admin.force_login(django_user_model.objects.create_superuser(username="root", password="pw"))
    _upload(admin, backend, _doc("lions", "tigers"))
    _upload(admin, backend, _doc(), "empty.json")
    user = django_user_model.objects.create_user(username="someone", password="pw")
    membership_set(tenant=backend.tenant, user=user, role="member")
    client.force_login(user)
    html = client.get(_page(backend)).content.decode()
    assert 'class="status held"' in html and "Publish anyway" not in html and "Roll back" not in html
    assert client.post(f"{_page(backend)}2/publish/").status_code == 403
    assert client.post(f"{_page(backend)}1/rollback/").status_code == 403
    assert SpecVersion.objects.get(backend=backend, number=2).status == SpecVersion.Status.HELD


def test_the_history_poll_brings_the_security_schemes_once_a_version_is_published(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    page = admin_client.get(_page(backend)).content.decode()
    assert 'id="credential-facts"' in page and "hx-swap-oob" not in page
    assert "no version is served yet" in page
    # Stored but not compiled (as while a worker is busy): the page polls.
    version = SpecVersion.objects.create(
        backend=backend, number=1, document=_doc("lions", components=KEYED), sha256="0" * 64, size=1)
    history = f"{_page(backend)}history/"
    polled = admin_client.get(history).content.decode()
    assert 'hx-trigger="every 1s"' in polled and '<dl class="facts" id="credential-facts" hx-swap-oob="true">' in polled
    assert "no version is served yet" in polled
    spec_version_compile(spec_version_id=version.pk)
    polled = admin_client.get(history).content.decode()
    assert "hx-trigger" not in polled  # the last poll
    assert "<code>key</code>: API key in header X-API-Key" in polled
    assert '<dl class="facts" id="credential-facts" hx-swap-oob="true">' in polled


def test_an_upload_still_compiling_flashes_as_information(admin_client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    from apps.catalog import specs

    monkeypatch.setattr(specs, "_queue", lambda version_id: None)  # no worker has taken it yet
    backend = openapi_backend_factory()
    response = _upload(admin_client, backend, _doc("lions"))
    html = admin_client.get(response["Location"]).content.decode()
    assert ('<li class="message info" role="status">Uploaded zoo.json as version 1; it is compiling (the history '
            "below shows when it is done).</li>") in html
