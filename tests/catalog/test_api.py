"""The spec REST API: uploads (raw JSON/YAML and multipart), their limits, the version history.

Transactional: an upload's compile is queued on commit, and Celery runs eagerly in tests, so the
upload request itself compiles and its 202 already shows `ready` or `failed`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from apps.catalog.credentials import egress_credential_set
from apps.catalog.models import Backend, EgressCredential, Tool
from apps.common.secrets import secret_decrypt
from apps.tenants.services import admin_token_issue, membership_set
from tests.factories import backend_factory, openapi_backend_factory

pytestmark = pytest.mark.django_db(transaction=True)


def oas3(paths: dict[str, Any]) -> bytes:
    return json.dumps({"openapi": "3.0.3", "info": {"title": "Pets", "version": "1.0"}, "paths": paths}).encode()


def _op(operation_id: str, **extra: Any) -> dict[str, Any]:
    return {"operationId": operation_id, "responses": {"200": {"description": "ok"}}, **extra}


_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
PETS_V1 = oas3({
    "/pets": {"get": _op("listPets"), "post": _op("createPet")},
    "/pets/{id}": {"get": _op("getPet", parameters=[_ID])},
})
# v2: createPet gone, deletePet new, getPet takes one more parameter, listPets as it was.
PETS_V2 = oas3({
    "/pets": {"get": _op("listPets")},
    "/pets/{id}": {
        "get": _op("getPet", parameters=[_ID, {"name": "fields", "in": "query", "schema": {"type": "string"}}]),
        "delete": _op("deletePet", parameters=[_ID]),
    },
})
# A missing parameter name and a remote $ref: both errors, each at its own JSON pointer.
BROKEN = oas3({
    "/pets": {"get": _op("listPets", parameters=[{"in": "query", "schema": {"type": "string"}}])},
    "/toys": {"get": _op("listToys", parameters=[{"$ref": "other.yaml#/Limit"}])},
})
SWAGGER_YAML = b"""\
swagger: "2.0"
info: {title: Shop, version: "2"}
host: shop.example.com
basePath: /v2
paths:
  /orders:
    get:
      operationId: listOrders
      responses: {200: {description: ok}}
  /orders/{orderId}:
    get:
      operationId: getOrder
      parameters:
        - {name: orderId, in: path, required: true, type: string}
      responses: {200: {description: ok}}
"""


def _upload_url(backend: Backend) -> str:
    return f"/api/v1/tenants/{backend.tenant.slug}/backends/{backend.pk}/spec"


def _upload(client: Client, backend: Backend, document: bytes, content_type: str = "application/json", **extra: Any):
    return client.post(_upload_url(backend), data=document, content_type=content_type, **extra)


def _tools(backend: Backend) -> dict[str, int]:
    return dict(Tool.objects.filter(backend=backend).values_list("name", "spec_version__number"))


def test_raw_json_upload_compiles_and_answers_202_with_location(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    response = _upload(admin_client, backend, PETS_V1)

    assert response.status_code == 202, response.content
    body = response.json()
    assert body["number"] == 1 and body["status"] == "ready" and body["active"] is True
    assert body["tool_count"] == 3 and body["errors"] == [] and body["openapi_version"] == "3.0"
    assert body["changes"] == {"added": ["createPet", "getPet", "listPets"], "removed": [], "changed": []}
    assert body["size"] == len(PETS_V1) and body["uploaded_by"] == "admin"
    assert "document" not in body
    assert response["Location"] == f"http://testserver/api/v1/tenants/{backend.tenant.slug}/backends/{backend.pk}/specs/1"
    assert admin_client.get(response["Location"]).json() == body
    assert _tools(backend) == {"createPet": 1, "getPet": 1, "listPets": 1}


@pytest.mark.parametrize("content_type", ["application/yaml", "application/x-yaml", "text/yaml", "text/plain"])
def test_raw_yaml_upload_of_a_swagger_2_document(admin_client: Client, content_type: str) -> None:
    backend = openapi_backend_factory()
    response = _upload(admin_client, backend, SWAGGER_YAML, content_type, QUERY_STRING="filename=shop.yaml")

    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["status"], body["openapi_version"], body["title"]) == ("ready", "2.0", "Shop")
    assert body["filename"] == "shop.yaml" and body["tool_count"] == 2
    assert set(_tools(backend)) == {"listOrders", "getOrder"}


def test_multipart_upload_takes_the_file_field_and_its_name(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    upload = SimpleUploadedFile("pets.json", PETS_V1, content_type="application/json")
    response = admin_client.post(_upload_url(backend), data={"file": upload})

    assert response.status_code == 202, response.content
    assert response.json()["filename"] == "pets.json" and response.json()["status"] == "ready"


def test_multipart_without_the_file_field_is_400(admin_client: Client) -> None:
    response = admin_client.post(_upload_url(openapi_backend_factory()), data={"document": "x"})
    assert response.status_code == 400 and "'file'" in response.json()["detail"]


def test_raw_body_larger_than_djangos_memory_limit_is_taken(admin_client: Client, settings: Any) -> None:
    # Real specs (EC2's is 4.2 MB) exceed DATA_UPLOAD_MAX_MEMORY_SIZE; the upload must not depend on it.
    document = json.loads(PETS_V1)
    document["info"]["description"] = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1024)
    data = json.dumps(document).encode()
    response = _upload(admin_client, openapi_backend_factory(), data)
    assert response.status_code == 202, response.content[:300]
    assert response.json()["size"] == len(data) and response.json()["status"] == "ready"


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "application/xml", ""])
def test_other_content_types_are_415_naming_the_accepted_ones(admin_client: Client, content_type: str) -> None:
    backend = openapi_backend_factory()
    response = _upload(admin_client, backend, PETS_V1, content_type)
    assert response.status_code == 415
    detail = response.json()["detail"]
    assert "application/json" in detail and "application/yaml" in detail and "multipart/form-data" in detail
    assert not backend.spec_versions.exists()


@pytest.mark.parametrize("how", ["raw", "multipart"])
def test_documents_over_the_limit_are_413(admin_client: Client, settings: Any, how: str) -> None:
    settings.GATEWAY_SPEC_MAX_BYTES = 100
    backend = openapi_backend_factory()
    if how == "raw":
        response = _upload(admin_client, backend, PETS_V1)
    else:
        upload = SimpleUploadedFile("pets.json", PETS_V1, content_type="application/json")
        response = admin_client.post(_upload_url(backend), data={"file": upload})
    assert response.status_code == 413
    assert response.json() == {"detail": "the document is larger than the limit of 100 bytes"}
    assert not backend.spec_versions.exists()


def test_a_malformed_spec_fails_with_pointers_and_the_previous_version_keeps_serving(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    assert _upload(admin_client, backend, PETS_V1).json()["status"] == "ready"

    response = _upload(admin_client, backend, BROKEN)

    assert response.status_code == 202
    body = response.json()
    assert body["number"] == 2 and body["status"] == "failed" and body["active"] is False
    assert [e["pointer"] for e in body["errors"]] == [
        "/paths/~1pets/get/parameters/0/name",
        "/paths/~1toys/get/parameters/0/$ref",
    ]
    assert all(e["message"] for e in body["errors"])
    backend.refresh_from_db()
    assert backend.active_spec.number == 1
    assert _tools(backend) == {"createPet": 1, "getPet": 1, "listPets": 1}


def test_a_reupload_reports_added_removed_and_changed_tools(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    _upload(admin_client, backend, PETS_V1)
    body = _upload(admin_client, backend, PETS_V2).json()
    assert body["status"] == "ready" and body["number"] == 2
    assert body["changes"] == {"added": ["deletePet"], "removed": ["createPet"], "changed": ["getPet"]}
    assert _tools(backend) == {"deletePet": 2, "getPet": 2, "listPets": 2}


def test_list_is_newest_first_and_detail_and_document_are_complete(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    _upload(admin_client, backend, PETS_V1)
    _upload(admin_client, backend, BROKEN)
    _upload(admin_client, backend, SWAGGER_YAML, "application/yaml", QUERY_STRING="allow_removals=true")
    base = f"/api/v1/tenants/{backend.tenant.slug}/backends/{backend.pk}/specs"

    listed = admin_client.get(base).json()
    assert [(v["number"], v["status"], v["active"]) for v in listed] == [
        (3, "ready", True), (2, "failed", False), (1, "ready", False)
    ]
    assert listed[1]["error_count"] == 2
    assert not {"document", "errors", "warnings"} & set(listed[0])

    detail = admin_client.get(f"{base}/2").json()
    assert detail["status"] == "failed" and len(detail["errors"]) == 2 and detail["tool_count"] == 0
    assert {"warnings", "changes", "security_schemes", "document_url"} <= set(detail)

    json_doc = admin_client.get(f"{base}/1/document")
    assert json_doc["Content-Type"] == "application/json" and json_doc.content == PETS_V1
    yaml_doc = admin_client.get(f"{base}/3/document")
    assert yaml_doc["Content-Type"] == "application/yaml" and yaml_doc.content == SWAGGER_YAML
    assert admin_client.get(f"{base}/9").status_code == 404
    assert admin_client.get(f"{base}/9/document").status_code == 404


def test_an_mcp_backend_takes_no_spec(admin_client: Client) -> None:
    backend = backend_factory(name="mcp-one")
    response = _upload(admin_client, backend, PETS_V1)
    assert response.status_code == 400
    assert response.json() == {"detail": "backend 'mcp-one' is an MCP server; only OpenAPI backends take a spec"}


def test_an_empty_document_is_400(admin_client: Client) -> None:
    response = _upload(admin_client, openapi_backend_factory(), b"  \n")
    assert response.status_code == 400 and "empty" in response.json()["detail"]


def test_unknown_backend_is_404(admin_client: Client) -> None:
    tenant = openapi_backend_factory().tenant
    assert _upload(admin_client, Backend(pk=987654, tenant=tenant), PETS_V1).status_code == 404
    assert admin_client.get(f"/api/v1/tenants/{tenant.slug}/backends/987654/specs").status_code == 404


def test_an_admin_token_authenticates_without_csrf(admin_user: Any) -> None:
    secret = admin_token_issue(user=admin_user, name="ci").secret
    client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}", enforce_csrf_checks=True)
    response = _upload(client, openapi_backend_factory(), PETS_V1)
    assert response.status_code == 202


def test_users_outside_the_tenant_see_nothing_and_members_only_read(client: Client, django_user_model: Any) -> None:
    backend = openapi_backend_factory()
    user = django_user_model.objects.create_user(username="someone", password="pw")
    client.force_login(user)
    specs = f"/api/v1/tenants/{backend.tenant.slug}/backends/{backend.pk}/specs"
    assert _upload(client, backend, PETS_V1).status_code == 404
    assert client.get(specs).status_code == 404
    membership_set(tenant=backend.tenant, user=user, role="member")
    assert client.get(specs).status_code == 200
    assert _upload(client, backend, PETS_V1).status_code == 403
    assert not backend.spec_versions.exists()


def test_anonymous_callers_are_refused(client: Client) -> None:
    backend = openapi_backend_factory()
    assert _upload(client, backend, PETS_V1).status_code in (401, 403)
    assert client.get(f"/api/v1/tenants/{backend.tenant.slug}/backends/{backend.pk}/specs").status_code in (401, 403)


# --- The removal guard, publishing a held version, rollback ----------------------------------------

EMPTY = oas3({})  # a valid document with no operations: it would remove every tool


def _specs_url(backend: Backend) -> str:
    return f"/api/v1/tenants/{backend.tenant.slug}/backends/{backend.pk}/specs"


def test_a_version_removing_most_tools_is_held_with_a_notice_saying_how_to_publish_it(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    _upload(admin_client, backend, PETS_V1)
    response = _upload(admin_client, backend, EMPTY)
    assert response.status_code == 202
    body = response.json()
    publish = f"{_specs_url(backend)}/2/publish"
    assert body["status"] == "held" and body["active"] is False and body["allow_removals"] is False
    assert body["changes"] == {"added": [], "removed": ["createPet", "getPet", "listPets"], "changed": [], "served": 3}
    assert body["notice"] == (
        "Not published: it would remove 3 of the 3 tools served now (more than half); the backend keeps serving "
        f"version 1. To publish it anyway: POST /api/v1/tenants/{backend.tenant.slug}/backends/{backend.pk}/specs/2/publish.")
    assert _tools(backend) == {"createPet": 1, "getPet": 1, "listPets": 1}
    assert [v["status"] for v in admin_client.get(_specs_url(backend)).json()] == ["held", "ready"]

    published = admin_client.post(publish)
    assert published.status_code == 202 and published["Location"].endswith(f"{_specs_url(backend)}/2")
    assert published.json()["status"] == "ready" and published.json()["active"] is True
    assert published.json()["notice"] == "" and published.json()["allow_removals"] is True
    assert _tools(backend) == {}
    again = admin_client.post(publish)
    assert again.status_code == 400 and again.json() == {
        "detail": "version 2 is ready: only a held version waits to be published"}


@pytest.mark.parametrize("how", ["query", "multipart"])
def test_allow_removals_publishes_at_once(admin_client: Client, how: str) -> None:
    backend = openapi_backend_factory()
    _upload(admin_client, backend, PETS_V1)
    if how == "query":
        response = _upload(admin_client, backend, EMPTY, QUERY_STRING="allow_removals=true")
    else:
        upload = SimpleUploadedFile("empty.json", EMPTY, content_type="application/json")
        response = admin_client.post(_upload_url(backend), data={"file": upload, "allow_removals": "true"})
    body = response.json()
    assert body["status"] == "ready" and body["active"] is True and body["allow_removals"] is True
    assert _tools(backend) == {}


def test_a_bad_allow_removals_is_400_and_nothing_is_stored(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    response = _upload(admin_client, backend, PETS_V1, QUERY_STRING="allow_removals=perhaps")
    assert response.status_code == 400 and response.json() == {"detail": "allow_removals: Must be a valid boolean."}
    assert not backend.spec_versions.exists()


def test_rollback_serves_an_earlier_version_again_as_the_next_version(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    _upload(admin_client, backend, PETS_V1)
    _upload(admin_client, backend, PETS_V2)
    response = admin_client.post(f"{_specs_url(backend)}/1/rollback")
    assert response.status_code == 202
    body = response.json()
    assert response["Location"] == f"http://testserver{_specs_url(backend)}/3"
    assert body["number"] == 3 and body["restores"] == 1 and body["status"] == "ready" and body["active"] is True
    assert body["changes"] == {"added": ["createPet"], "removed": ["deletePet"], "changed": ["getPet"]}
    assert body["sha256"] == admin_client.get(f"{_specs_url(backend)}/1").json()["sha256"]
    assert _tools(backend) == {"createPet": 3, "getPet": 3, "listPets": 3}

    served = admin_client.post(f"{_specs_url(backend)}/3/rollback")
    assert served.status_code == 400 and served.json() == {"detail": "version 3 is the version being served"}
    assert admin_client.post(f"{_specs_url(backend)}/9/rollback").status_code == 404
    assert admin_client.post(f"{_specs_url(backend)}/9/publish").status_code == 404


def test_rollback_to_a_failed_version_is_400(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    _upload(admin_client, backend, PETS_V1)
    _upload(admin_client, backend, BROKEN)
    response = admin_client.post(f"{_specs_url(backend)}/2/rollback")
    assert response.status_code == 400
    assert response.json() == {"detail": "version 2 is failed: only a version that compiled (ready) can be rolled back to"}
    assert backend.spec_versions.count() == 2


def test_members_may_neither_publish_nor_roll_back(client: Client, django_user_model: Any) -> None:
    backend = openapi_backend_factory()
    with_admin = Client()
    with_admin.force_login(django_user_model.objects.create_superuser(username="root", password="pw"))
    _upload(with_admin, backend, PETS_V1)
    _upload(with_admin, backend, EMPTY)
    user = django_user_model.objects.create_user(username="someone", password="pw")
    membership_set(tenant=backend.tenant, user=user, role="member")
    client.force_login(user)
    assert client.post(f"{_specs_url(backend)}/2/publish").status_code == 403
    assert client.post(f"{_specs_url(backend)}/1/rollback").status_code == 403
    assert [v["status"] for v in client.get(_specs_url(backend)).json()] == ["held", "ready"]


# --- The egress credential: write-only ---------------------------------------------------------------

SECRET = "s3cr3t-Value with spaces "
WITH_SCHEMES = json.dumps({
    "openapi": "3.0.3", "info": {"title": "Keys", "version": "1"},
    "components": {"securitySchemes": {
        "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
        "token": {"type": "http", "scheme": "bearer"},
    }},
    "paths": {"/a": {"get": _op("getA")}},
}).encode()


def _credential_url(backend: Backend) -> str:
    return f"/api/v1/tenants/{backend.tenant.slug}/backends/{backend.pk}/credential"


def _put(client: Client, backend: Backend, body: Any):
    return client.put(_credential_url(backend), data=json.dumps(body), content_type="application/json")


def _stored(backend: Backend) -> EgressCredential:
    return EgressCredential.objects.get(backend=backend)


def test_credential_put_get_replace_delete_and_the_secret_is_never_answered(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    assert admin_client.get(_credential_url(backend)).status_code == 404

    put = _put(admin_client, backend, {"kind": "api_key_header", "name": "X-Key", "secret": SECRET})
    assert put.status_code == 200, put.content
    body = put.json()
    assert body["kind"] == "api_key_header" and body["name"] == "X-Key" and body["username"] == ""
    assert body["applied"] == {"kind": "api_key_header", "name": "X-Key", "scheme": ""}
    assert body["description"] == "API key in header X-Key"
    assert {"created_at", "updated_at"} <= set(body) and "secret" not in body
    assert admin_client.get(_credential_url(backend)).json() == body
    # Stored encrypted, exactly as sent (spaces included).
    token = _stored(backend).secret
    assert SECRET not in token and secret_decrypt(token) == SECRET

    replaced = _put(admin_client, backend, {"kind": "basic", "username": "alice", "secret": "pw2"})
    assert replaced.status_code == 200
    assert replaced.json()["description"] == "HTTP basic as alice" and replaced.json()["name"] == ""
    assert EgressCredential.objects.filter(backend=backend).count() == 1
    assert secret_decrypt(_stored(backend).secret) == "pw2"

    for response in (put, replaced, admin_client.get(_credential_url(backend))):
        text = response.content.decode()
        assert SECRET not in text and "pw2" not in text and _stored(backend).secret not in text

    deleted = admin_client.delete(_credential_url(backend))
    assert deleted.status_code == 204 and deleted.content == b""
    assert not EgressCredential.objects.filter(backend=backend).exists()
    assert admin_client.get(_credential_url(backend)).json() == {"detail": f"backend {backend.name!r} has no credential"}
    assert admin_client.delete(_credential_url(backend)).status_code == 404


def test_a_credential_left_to_the_spec_follows_its_first_scheme(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    assert _upload(admin_client, backend, WITH_SCHEMES).json()["status"] == "ready"

    body = _put(admin_client, backend, {"secret": "k"}).json()
    assert body["kind"] == "" and body["name"] == ""
    assert body["applied"] == {"kind": "api_key_header", "name": "X-API-Key", "scheme": "apiKey"}
    assert body["description"] == "API key in header X-API-Key (from the spec's scheme 'apiKey')"

    # A name overrides the scheme's parameter; the kind stays the spec's.
    body = _put(admin_client, backend, {"kind": "", "name": "X-Other", "secret": "k"}).json()
    assert body["applied"] == {"kind": "api_key_header", "name": "X-Other", "scheme": "apiKey"}


def test_a_credential_left_to_a_spec_without_schemes_is_bearer(admin_client: Client) -> None:
    body = _put(admin_client, openapi_backend_factory(), {"secret": "k"}).json()
    assert body["applied"] == {"kind": "bearer", "name": "", "scheme": ""}
    assert body["description"].startswith("Bearer token")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"kind": "oauth", "secret": "k"}, "unknown credential kind 'oauth'"),
        ({"kind": "api_key_query", "secret": "k"}, "credential kind 'api_key_query' needs the header, parameter or cookie name"),
        ({"kind": "bearer", "secret": ""}, "the secret is empty"),
        ({"kind": "bearer"}, "the secret is empty"),
        ({"kind": "basic", "username": "a:b", "secret": "k"}, "a basic-auth username cannot contain ':'"),
        ({"kind": "api_key_header", "name": "X-Key\r\nEvil: 1", "secret": "k"}, "holds a carriage return (CR)"),
        ({"kind": "bearer", "secret": "line\nbreak"}, "without CR, LF or NUL"),
        ({"kind": "api_key_header", "name": "X" * 129, "secret": "k"}, "name must be at most 128 characters"),
        ({"kind": "bearer", "secret": None}, "secret: This field may not be null."),
        (["bearer", "k"], "Expected a dictionary"),
    ],
)
def test_invalid_credentials_are_400_with_the_message_and_nothing_is_stored(
    admin_client: Client, body: Any, message: str
) -> None:
    backend = openapi_backend_factory()
    response = _put(admin_client, backend, body)
    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert not EgressCredential.objects.filter(backend=backend).exists()


def test_a_credential_body_must_be_json(admin_client: Client) -> None:
    backend = openapi_backend_factory()
    url = _credential_url(backend)
    assert admin_client.put(url, data="{not json", content_type="application/json").status_code == 400
    assert admin_client.put(url, data="secret=k", content_type="application/x-www-form-urlencoded").status_code == 415
    assert not EgressCredential.objects.filter(backend=backend).exists()


def test_an_mcp_backend_takes_a_header_credential_of_any_source(admin_client: Client) -> None:
    backend = backend_factory()
    response = _put(admin_client, backend, {"kind": "api_key_query", "name": "k", "secret": "k"})
    assert response.status_code == 400 and "takes its credential in a header" in response.json()["detail"]
    identities = [{"subject_kind": "key", "subject_name": "agent", "secret": "for-agent"},
                  {"subject_kind": "team", "subject_name": "ops", "secret": "for-ops"}]
    response = _put(admin_client, backend, {"source": "per_identity", "identities": identities})
    assert response.status_code == 200, response.json()
    state = response.json()
    assert (state["source"], state["applied"]["kind"]) == ("per_identity", "bearer")
    assert sorted(i["subject_name"] for i in state["identities"]) == ["agent", "ops"]
    assert "for-agent" not in response.content.decode()
    oauth = {"source": "oauth_client_credentials", "token_url": "https://idp.example/oauth/token",
             "client_id": "gateway", "secret": "client-secret", "scope": "tools"}
    state = _put(admin_client, backend, oauth).json()
    assert state["oauth"] == {"token_url": "https://idp.example/oauth/token", "client_id": "gateway",
                              "scope": "tools", "audience": "", "client_auth": "client_secret_basic"}
    assert state["identities"] == [] and "client-secret" not in str(state)


def test_credential_of_an_unknown_backend_is_404(admin_client: Client) -> None:
    unknown = Backend(pk=987654, tenant=openapi_backend_factory().tenant)
    url = _credential_url(unknown)
    assert admin_client.get(url).status_code == 404
    assert _put(admin_client, unknown, {"kind": "bearer", "secret": "k"}).status_code == 404
    assert admin_client.delete(url).status_code == 404


def test_only_tenant_admins_may_change_credentials(client: Client, django_user_model: Any) -> None:
    backend = openapi_backend_factory()
    egress_credential_set(backend=backend, kind="bearer", secret="k")
    assert client.get(_credential_url(backend)).status_code in (401, 403)  # anonymous
    assert _put(client, backend, {"kind": "bearer", "secret": "other"}).status_code in (401, 403)
    user = django_user_model.objects.create_user(username="someone", password="pw")
    client.force_login(user)
    assert client.get(_credential_url(backend)).status_code == 404  # another tenant's: unseen
    assert _put(client, backend, {"kind": "bearer", "secret": "other"}).status_code == 404
    assert client.delete(_credential_url(backend)).status_code == 404
    membership_set(tenant=backend.tenant, user=user, role="member")
    assert client.get(_credential_url(backend)).status_code == 200  # the state, never the secret
    assert _put(client, backend, {"kind": "bearer", "secret": "other"}).status_code == 403
    assert client.delete(_credential_url(backend)).status_code == 403
    assert secret_decrypt(_stored(backend).secret) == "k"


def test_a_session_put_needs_the_csrf_token(admin_user: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    backend = openapi_backend_factory()
    response = _put(client, backend, {"kind": "bearer", "secret": "k"})
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    assert not EgressCredential.objects.filter(backend=backend).exists()
