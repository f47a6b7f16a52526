"""The console's spec pages, through Django's test client (the browser test lives elsewhere)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from apps.catalog.credentials import egress_credential_set
from apps.catalog.models import Backend, EgressCredential
from apps.catalog.specs import spec_upload, spec_version_compile
from apps.common.secrets import secret_decrypt
from apps.tenants.services import membership_set
from tests.factories import backend_factory, openapi_backend_factory


def _doc(*operation_ids: str) -> bytes:
    paths = {
        f"/{name}": {"get": {"operationId": name, "responses": {"200": {"description": "ok"}}}}
        for name in operation_ids
    }
    return json.dumps({"openapi": "3.0.3", "info": {"title": "Zoo", "version": "7"}, "paths": paths}).encode()


BROKEN = json.dumps({
    "openapi": "3.0.3", "info": {"title": "Zoo", "version": "7"},
    "paths": {"/a": {"get": {"parameters": [{"in": "query"}], "responses": {}}}},
}).encode()


def _page(backend: Backend) -> str:
    return f"/console/t/{backend.tenant.slug}/backends/{backend.pk}/spec/"


def _history(backend: Backend) -> str:
    return f"/console/t/{backend.tenant.slug}/backends/{backend.pk}/spec/history/"


def _upload_form(client: Client, backend: Backend, document: bytes, name: str = "zoo.json"):
    return client.post(_page(backend), {"file": SimpleUploadedFile(name, document, content_type="application/json")})


@pytest.mark.django_db
def test_anonymous_visitors_go_to_the_console_login(client: Client) -> None:
    backend = openapi_backend_factory()
    response = client.get(_page(backend))
    assert response.status_code == 302
    assert response["Location"] == f"/console/login/?next={_page(backend)}"


@pytest.mark.django_db
def test_users_outside_the_tenant_get_404(client: Client, django_user_model: Any) -> None:
    client.force_login(django_user_model.objects.create_user(username="someone", password="pw"))
    backend = openapi_backend_factory()
    assert client.get(f"/console/t/{backend.tenant.slug}/backends/").status_code == 404
    assert client.get(_page(backend)).status_code == 404


@pytest.mark.django_db
def test_backend_list_links_openapi_backends_to_their_spec_page(admin_client: Client) -> None:
    rest = openapi_backend_factory(name="rest-zoo")
    mcp = backend_factory(name="mcp-zoo", tenant=rest.tenant)
    html = admin_client.get(f"/console/t/{rest.tenant.slug}/backends/").content.decode()
    assert f'href="{_page(rest)}"' in html and "rest-zoo" in html
    assert "mcp-zoo" in html and _page(mcp) not in html


@pytest.mark.django_db
def test_spec_page_shows_the_backend_and_an_upload_form(admin_client: Client) -> None:
    backend = openapi_backend_factory(name="zoo", base_url="http://zoo.internal:8080/api")
    response = admin_client.get(_page(backend))
    assert response.status_code == 200
    html = response.content.decode()
    assert "zoo" in html and "REST service (OpenAPI)" in html and "http://zoo.internal:8080/api" in html
    assert 'enctype="multipart/form-data"' in html and 'name="csrfmiddlewaretoken"' in html
    assert 'type="file" name="file"' in html
    assert "No spec has been uploaded yet." in html and "hx-trigger" not in html
    assert "vendor/htmx-2.0.11.min.js" in html


@pytest.mark.django_db
def test_an_mcp_backend_page_has_no_upload_form(admin_client: Client) -> None:
    html = admin_client.get(_page(backend_factory())).content.decode()
    assert "This backend is an MCP server" in html and 'type="file"' not in html


@pytest.mark.django_db(transaction=True)
def test_uploading_through_the_form_redirects_back_with_a_message_and_the_history(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    response = _upload_form(admin_client, backend, _doc("lions", "tigers"))
    assert response.status_code == 302 and response["Location"] == _page(backend)

    html = admin_client.get(response["Location"]).content.decode()
    assert "Uploaded zoo.json as version 1: it is served, with 2 tools." in html
    assert 'class="message success" role="status"' in html
    assert 'id="version-1"' in html and "zoo.json" in html and "ready" in html
    assert "Serving version 1: 2 tools" in html
    assert "+2 −0 ~0" in html and "<code>lions</code>" in html
    assert "hx-trigger" not in html  # nothing in progress: no polling

    _upload_form(admin_client, backend, _doc("lions", "bears"), name="zoo2.json")
    html = admin_client.get(_page(backend)).content.decode()
    assert "+1 −1 ~0" in html and "<code>bears</code>" in html and "<code>tigers</code>" in html


@pytest.mark.django_db(transaction=True)
def test_a_failed_version_lists_its_errors_with_pointers(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    _upload_form(admin_client, backend, _doc("lions"))
    _upload_form(admin_client, backend, BROKEN, name="broken.json")
    html = admin_client.get(_page(backend)).content.decode()
    assert 'class="status failed"' in html
    assert '<code class="pointer">/paths/~1a/get/parameters/0/name</code>' in html
    assert "nothing from this version is served" in html
    assert "Serving version 1: 1 tool" in html


@pytest.mark.django_db
def test_an_oversized_upload_is_refused_in_the_form(admin_client: Client, settings: Any) -> None:
    settings.GATEWAY_SPEC_MAX_BYTES = 50
    backend = openapi_backend_factory()
    response = _upload_form(admin_client, backend, _doc("lions"))
    assert response.status_code == 400
    html = response.content.decode()
    assert "The upload was refused" in html and "the limit is 50" in html
    assert not backend.spec_versions.exists()


@pytest.mark.django_db
def test_the_history_fragment_polls_while_a_version_is_in_progress(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    # Inside the test's transaction the compile queued on commit never runs: the version stays pending.
    version = spec_upload(backend=backend, document=_doc("lions"), filename="zoo.json")

    fragment = admin_client.get(_history(backend))
    html = fragment.content.decode()
    assert fragment.status_code == 200 and "<html" not in html
    assert 'id="spec-history"' in html and 'hx-trigger="every 1s"' in html
    assert f'hx-get="{_history(backend)}"' in html and 'hx-swap="outerHTML"' in html
    assert 'class="status pending"' in html
    assert 'hx-trigger="every 1s"' in admin_client.get(_page(backend)).content.decode()

    spec_version_compile(spec_version_id=version.pk)
    html = admin_client.get(_history(backend)).content.decode()
    assert 'class="status ready"' in html and "hx-trigger" not in html


# --- The credential section: write-only --------------------------------------------------------------

SECRET = "hunter2-the-secret"
KEYED = json.dumps({
    "openapi": "3.0.3", "info": {"title": "Keys", "version": "1"},
    "components": {"securitySchemes": {"apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}},
    "paths": {"/a": {"get": {"operationId": "getA", "responses": {"200": {"description": "ok"}}}}},
}).encode()


def _credential(backend: Backend) -> str:
    return f"/console/t/{backend.tenant.slug}/backends/{backend.pk}/credential/"


def _remove(backend: Backend) -> str:
    return f"/console/t/{backend.tenant.slug}/backends/{backend.pk}/credential/remove/"


@pytest.mark.django_db
def test_the_credential_section_shows_none_the_schemes_state_and_a_write_only_form(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    html = admin_client.get(_page(backend)).content.decode()
    assert 'id="credential-heading"' in html and "none: requests go to the backend without credentials" in html
    assert "no version is served yet" in html
    assert f'action="{_credential(backend)}"' in html and f'href="{_remove(backend)}"' not in html
    assert '<option value="" selected>as the spec&#x27;s security scheme says</option>' in html
    assert 'type="password" name="secret" autocomplete="new-password"' in html

    version = spec_upload(backend=backend, document=KEYED, filename="keys.json")
    spec_version_compile(spec_version_id=version.pk)
    egress_credential_set(backend=backend, secret=SECRET)
    html = admin_client.get(_page(backend)).content.decode()
    assert "API key in header X-API-Key (from the spec&#x27;s scheme &#x27;apiKey&#x27;), set" in html
    assert "<code>apiKey</code>: API key in header X-API-Key" in html
    assert f'href="{_remove(backend)}"' in html and "Remove credential" in html
    assert SECRET not in html and EgressCredential.objects.get(backend=backend).secret not in html
    # Removing asks first: the secret cannot be put back from here.
    asked = admin_client.get(_remove(backend)).content.decode()
    assert "Remove the credential of" in asked and "paste it again" in asked
    assert EgressCredential.objects.filter(backend=backend).exists()
    assert admin_client.post(_remove(backend)).status_code == 302
    assert not EgressCredential.objects.filter(backend=backend).exists()


@pytest.mark.django_db
def test_setting_a_credential_through_the_form_redirects_with_a_message(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    form = {"kind": "api_key_query", "name": "api_key", "username": "", "secret": SECRET}
    response = admin_client.post(_credential(backend), form)
    assert response.status_code == 302 and response["Location"] == _page(backend)

    stored = EgressCredential.objects.get(backend=backend)
    assert (stored.kind, stored.name) == ("api_key_query", "api_key") and secret_decrypt(stored.secret) == SECRET
    html = admin_client.get(_page(backend)).content.decode()
    assert "Credential saved." in html and "API key in query parameter api_key, set" in html
    assert '<option value="api_key_query" selected>' in html and 'value="api_key"' in html
    assert SECRET not in html and stored.secret not in html

    # Replacing keeps one credential: the new one.
    admin_client.post(_credential(backend), {"kind": "basic", "username": "alice", "secret": "pw2"})
    stored = EgressCredential.objects.get(backend=backend)
    assert (stored.kind, stored.username, secret_decrypt(stored.secret)) == ("basic", "alice", "pw2")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"kind": "api_key_header", "secret": SECRET}, "credential kind &#x27;api_key_header&#x27; needs the header, parameter or cookie name"),
        ({"kind": "oauth", "secret": SECRET}, "Kind: Select a valid choice."),
        ({"kind": "bearer", "secret": ""}, "Secret: the secret is empty"),
        ({"kind": "bearer", "secret": "a\nb" + SECRET}, "without CR, LF or NUL"),
        ({"kind": "basic", "username": "a:b", "secret": SECRET}, "cannot contain &#x27;:&#x27;"),
    ],
)
def test_a_refused_credential_shows_why_and_never_echoes_the_secret(
    admin_client: Client, form: dict[str, str], message: str
) -> None:
    backend = openapi_backend_factory()
    response = admin_client.post(_credential(backend), form)
    assert response.status_code == 400
    html = response.content.decode()
    assert "The credential was refused:" in html and message in html
    assert SECRET not in html
    assert not EgressCredential.objects.filter(backend=backend).exists()


@pytest.mark.django_db
def test_an_mcp_backend_takes_only_a_header_credential(admin_client: Client) -> None:
    backend = backend_factory()
    response = admin_client.post(_credential(backend), {"kind": "api_key_query", "name": "key", "secret": SECRET})
    assert response.status_code == 400
    assert "an MCP backend takes its credential in a header" in response.content.decode()
    assert SECRET not in response.content.decode()
    response = admin_client.post(_credential(backend), {"kind": "bearer", "secret": SECRET})
    assert response.status_code == 302
    assert EgressCredential.objects.get(backend=backend).kind == "bearer"


@pytest.mark.django_db
def test_removing_the_credential(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    egress_credential_set(backend=backend, kind="bearer", secret=SECRET)
    response = admin_client.post(_remove(backend))
    assert response.status_code == 302 and response["Location"] == _page(backend)
    assert not EgressCredential.objects.filter(backend=backend).exists()
    html = admin_client.get(_page(backend)).content.decode()
    assert "Credential removed" in html and "none: requests go to the backend without credentials" in html

    admin_client.post(_remove(backend))
    assert "There was no credential to remove." in admin_client.get(_page(backend)).content.decode()


@pytest.mark.django_db
def test_credential_urls_take_only_post_from_staff(admin_client: Client, client: Client, django_user_model: Any) -> None:
    backend = openapi_backend_factory()
    assert admin_client.get(_credential(backend)).status_code == 405
    assert admin_client.put(_remove(backend)).status_code == 405  # (GET asks to confirm, with a credential)
    assert client.post(_credential(backend), {"kind": "bearer", "secret": SECRET}).status_code == 302  # to login
    user = django_user_model.objects.create_user(username="someone", password="pw")
    client.force_login(user)
    assert client.post(_credential(backend), {"kind": "bearer", "secret": SECRET}).status_code == 404
    membership_set(tenant=backend.tenant, user=user, role="member")  # may read, not change
    assert client.post(_credential(backend), {"kind": "bearer", "secret": SECRET}).status_code == 403
    assert not EgressCredential.objects.filter(backend=backend).exists()


@pytest.mark.django_db
def test_the_credential_forms_enforce_csrf(admin_user: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    backend = openapi_backend_factory()
    egress_credential_set(backend=backend, kind="bearer", secret=SECRET)

    assert client.post(_credential(backend), {"kind": "bearer", "secret": "other"}).status_code == 403
    assert client.post(_remove(backend)).status_code == 403
    assert secret_decrypt(EgressCredential.objects.get(backend=backend).secret) == SECRET

    # With the page's token (and its cookie) the same post goes through.
    client.get(_page(backend))
    token = client.cookies["csrftoken"].value
    response = client.post(_credential(backend), {"kind": "bearer", "secret": "other", "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert secret_decrypt(EgressCredential.objects.get(backend=backend).secret) == "other"
