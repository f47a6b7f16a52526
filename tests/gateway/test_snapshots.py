"""Configuration snapshots: what the hot path reads about OpenAPI backends, and at what cost."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.catalog.credentials import egress_credential_set
from apps.catalog.specs import spec_upload
from apps.gateway.openapi import OpenApiHttp
from apps.gateway.snapshots import tenant_snapshot_load
from tests import factories
from tests.backends.specs import as_json, service_spec


@pytest.mark.django_db(transaction=True)  # the snapshot's own transaction is the outermost one
def test_a_snapshot_serves_the_active_tools_without_reading_spec_documents(django_capture_on_commit_callbacks) -> None:
    tenant = factories.tenant_factory()
    backend = factories.openapi_backend_factory(tenant=tenant, base_url="http://127.0.0.1:9")
    with django_capture_on_commit_callbacks(execute=True):
        spec_upload(backend=backend, document=as_json(service_spec()))
    egress_credential_set(backend=backend, secret="k")
    factories.virtual_host_factory(tenant=tenant, slug="api", mounts={"svc": backend})
    with CaptureQueriesContext(connection) as queries:
        snapshot = tenant_snapshot_load(slug=tenant.slug, http=OpenApiHttp())
    assert not any('"document"' in query["sql"] for query in queries.captured_queries)
    assert any("REPEATABLE READ" in query["sql"] for query in queries.captured_queries)
    view = snapshot.virtual_host("api").mounts["svc"]
    assert view.kind == "openapi" and view.server is not None
    assert view.server.has_tool("getPet") and view.server.info.server_info["title"] == "Recording service"
