"""A backend's `max_concurrency` through every face that edits or carries it: the services, the
REST API, the configuration document, the console form, and the gateway's per-tenant snapshot
(where an unset limit becomes the deployment's default)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from apps.catalog.models import Backend
from apps.catalog.services import backend_create, backend_update
from apps.configuration.document import ConfigInvalid
from apps.configuration.services import config_apply, config_export
from apps.gateway.adapters.openapi_tool_server import OpenApiHttp
from apps.gateway.adapters.snapshot_directory import tenant_snapshot_load
from tests.factories import backend_factory, tenant_factory, virtual_host_factory

pytestmark = pytest.mark.django_db

URL = "http://127.0.0.1:9301/mcp"


def test_the_services_keep_a_limit_of_at_least_one_or_none() -> None:
    backend = backend_create(tenant=tenant_factory(), name="slow", urls=[URL], max_concurrency=4)
    assert Backend.objects.get(pk=backend.pk).max_concurrency == 4
    with pytest.raises(ValidationError, match="max_concurrency must be a whole number from 1 to"):
        backend_update(backend=backend, kind="mcp", transport="streamable-http", urls=[URL], timeout_seconds=5,
                       max_concurrency=0)
    assert Backend.objects.get(pk=backend.pk).max_concurrency == 4
    backend_update(backend=backend, kind="mcp", transport="streamable-http", urls=[URL], timeout_seconds=5)
    assert Backend.objects.get(pk=backend.pk).max_concurrency is None


def test_the_rest_api_reads_and_writes_it(admin_client: Client) -> None:
    tenant = tenant_factory()
    api = f"/api/v1/tenants/{tenant.slug}/backends"
    created = admin_client.post(api, {"name": "slow", "replicas": [URL], "max_concurrency": 8},
                                content_type="application/json")
    assert created.status_code == 201 and created.json()["max_concurrency"] == 8
    url = f"{api}/{created.json()['id']}"
    kept = admin_client.put(url, {"timeout_seconds": 3}, content_type="application/json")
    assert kept.json()["max_concurrency"] == 8  # left out of a PUT: unchanged
    refused = admin_client.put(url, {"max_concurrency": 0}, content_type="application/json")
    assert refused.status_code == 400 and "max_concurrency" in refused.json()["detail"]
    cleared = admin_client.put(url, {"max_concurrency": None}, content_type="application/json")
    assert cleared.status_code == 200 and cleared.json()["max_concurrency"] is None


def test_the_configuration_document_applies_and_exports_it() -> None:
    document = f"""
tenants:
  - slug: acme
    name: Acme
backends:
  - tenant: acme
    name: slow
    urls: ["{URL}"]
    max_concurrency: 3
"""
    config_apply(document=document, prune=False)
    assert Backend.objects.get(name="slow").max_concurrency == 3
    exported = config_export()
    assert "max_concurrency: 3" in exported
    assert not config_apply(document=exported, prune=False).changed
    with pytest.raises(ConfigInvalid, match=r"backends\[0\]\.max_concurrency: max_concurrency must be a whole number from 1 to"):
        config_apply(document=document.replace("max_concurrency: 3", "max_concurrency: 0"), prune=False)
    assert Backend.objects.get(name="slow").max_concurrency == 3


def test_the_console_form_edits_it_and_the_page_shows_it(admin_client: Client) -> None:
    backend = backend_factory(urls=[URL])
    base = f"/console/t/{backend.tenant.slug}/backends/{backend.pk}/"
    assert "the deployment's default" in admin_client.get(base).content.decode()
    response = admin_client.post(f"{base}edit/", {"name": backend.name, "transport": "streamable-http", "urls": URL,
                                                  "timeout_seconds": 10, "max_concurrency": 5})
    assert response.status_code == 302
    assert Backend.objects.get(pk=backend.pk).max_concurrency == 5
    assert "5 per gateway instance" in admin_client.get(base).content.decode()


@pytest.mark.django_db(transaction=True)  # the snapshot's own transaction is the outermost one
def test_the_snapshot_carries_the_limit_or_the_deployment_default(settings) -> None:  # noqa: ANN001 - pytest-django
    settings.GATEWAY_BACKEND_MAX_CONCURRENCY = 16
    tenant = tenant_factory()
    own = backend_create(tenant=tenant, name="own", urls=[URL], max_concurrency=2)
    default = backend_create(tenant=tenant, name="default", urls=["http://127.0.0.1:9302/mcp"])
    host = virtual_host_factory(tenant=tenant, mounts={"own": own, "default": default})
    snapshot = tenant_snapshot_load(slug=tenant.slug, http=OpenApiHttp())
    assert snapshot is not None
    mounts = snapshot.virtual_host(host.slug).mounts
    assert (mounts["own"].max_concurrency, mounts["default"].max_concurrency) == (2, 16)
