"""One backend check (`apps.catalog.validators.backend_check`) behind every face that writes a
backend: a bad value is refused with the same words by the service, the REST API, the console form
and a configuration document, and nothing is stored."""

from __future__ import annotations

import html
import json
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from apps.catalog.models import Backend
from apps.catalog.services import backend_create
from apps.catalog.validators import BackendFields, backend_check
from apps.configuration.document import ConfigInvalid
from apps.configuration.services import config_apply
from tests.factories import tenant_factory

pytestmark = pytest.mark.django_db

URL = "http://127.0.0.1:9301/mcp"
CONCURRENCY = "max_concurrency must be a whole number from 1 to 2147483647; leave it out for the deployment's default"
TIMEOUT = "timeout_seconds must be a positive number of seconds, at most 86400"
NAME_LENGTH = "tool_name_max_length must be a whole number from 1 to 128"
DISTINCT = "replica URLs must be distinct"

# (kind, the bad fields, the words every face refuses them with)
CASES = [
    ("mcp", {"max_concurrency": 0}, CONCURRENCY),
    ("mcp", {"max_concurrency": -3}, CONCURRENCY),
    ("mcp", {"timeout_seconds": 0}, TIMEOUT),
    ("mcp", {"timeout_seconds": -2.5}, TIMEOUT),
    ("mcp", {"max_concurrency": 2_147_483_648}, CONCURRENCY),  # past the database's integer column
    ("mcp", {"urls": [URL, URL]}, DISTINCT),
    ("mcp", {"urls": ["ftp://x/"]}, "invalid URL 'ftp://x/'"),
    ("openapi", {"tool_name_max_length": 129}, NAME_LENGTH),
    ("openapi", {"tool_name_max_length": 0}, NAME_LENGTH),
]
IDS = [f"{kind}-{next(iter(fields))}={str(next(iter(fields.values())))[:12]}" for kind, fields, _ in CASES]


def _fields(kind: str, bad: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {"timeout_seconds": 10, "urls": [URL] if kind == "mcp" else []}
    return {**fields, **bad}


def test_the_check_names_each_wrong_field_and_passes_good_ones() -> None:
    assert backend_check(BackendFields("mcp", "streamable-http", [URL], 10), allow_private=True) == []
    problems = backend_check(BackendFields("mcp", "ws", [], 0, max_concurrency=True), allow_private=True)
    assert [p.field for p in problems] == ["transport", "timeout_seconds", "max_concurrency", "urls"]


@pytest.mark.parametrize(("kind", "bad", "words"), CASES, ids=IDS)
def test_the_service_refuses_it(kind: str, bad: dict[str, Any], words: str) -> None:
    tenant = tenant_factory()
    fields = _fields(kind, bad)
    with pytest.raises(ValidationError) as refused:
        backend_create(tenant=tenant, name="b", kind=kind, **fields)
    assert any(words in message for message in refused.value.messages)
    assert not Backend.objects.filter(tenant=tenant).exists()


@pytest.mark.parametrize(("kind", "bad", "words"), CASES, ids=IDS)
def test_the_api_refuses_it(admin_client: Client, kind: str, bad: dict[str, Any], words: str) -> None:
    tenant = tenant_factory()
    fields = _fields(kind, bad)
    body = {"name": "b", "kind": kind, **{("replicas" if k == "urls" else k): v for k, v in fields.items()}}
    response = admin_client.post(f"/api/v1/tenants/{tenant.slug}/backends", body, content_type="application/json")
    assert response.status_code == 400 and words in response.json()["detail"]
    assert not Backend.objects.filter(tenant=tenant).exists()


@pytest.mark.parametrize(("kind", "bad", "words"), CASES, ids=IDS)
def test_the_console_form_refuses_it(admin_client: Client, kind: str, bad: dict[str, Any], words: str) -> None:
    tenant = tenant_factory()
    fields = _fields(kind, bad)
    form = {"name": "b", "transport": "streamable-http", **fields, "urls": "\n".join(fields["urls"])}
    if kind == "openapi":
        form.pop("urls")
    response = admin_client.post(f"/console/t/{tenant.slug}/backends/new/{kind}/", form)
    assert response.status_code == 400 and html.escape(words) in response.content.decode()
    assert not Backend.objects.filter(tenant=tenant).exists()


@pytest.mark.parametrize(("kind", "bad", "words"), CASES, ids=IDS)
def test_a_configuration_document_refuses_it(kind: str, bad: dict[str, Any], words: str) -> None:
    tenant = tenant_factory()
    fields = _fields(kind, bad)
    if kind == "openapi":
        fields.pop("urls")
    backend = {"tenant": tenant.slug, "name": "b", "kind": kind, **fields}
    document = json.dumps({"tenants": [{"slug": tenant.slug, "name": tenant.name}],
                           "backends": [backend]})
    with pytest.raises(ConfigInvalid) as refused:
        config_apply(document=document, prune=False)
    assert words in str(refused.value)
    assert not Backend.objects.filter(tenant=tenant).exists()


def test_a_timeout_too_big_for_a_float_is_refused_not_raised() -> None:
    # The API and the console read numbers as floats first, and refuse this one as no number.
    tenant = tenant_factory()
    with pytest.raises(ValidationError, match="timeout_seconds must be a positive number"):
        backend_create(tenant=tenant, name="b", urls=[URL], timeout_seconds=10**400)
    document = json.dumps({"tenants": [{"slug": tenant.slug, "name": tenant.name}],
                           "backends": [{"tenant": tenant.slug, "name": "b", "urls": [URL], "timeout_seconds": 10**400}]})
    with pytest.raises(ConfigInvalid, match="timeout_seconds must be a positive number"):
        config_apply(document=document, prune=False)
    assert not Backend.objects.filter(tenant=tenant).exists()
