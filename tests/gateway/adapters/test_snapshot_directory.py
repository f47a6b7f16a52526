"""Configuration snapshots: what the hot path reads about OpenAPI backends, and at what cost."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.catalog.credentials import egress_credential_set
from apps.catalog.services import virtual_host_tool_search_set
from apps.catalog.specs import spec_upload
from apps.gateway.adapters.openapi_tool_server import OpenApiHttp
from apps.gateway.adapters.snapshot_directory import tenant_snapshot_load
from apps.gateway.pipeline.values import ToolSearchConfig
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


@pytest.mark.django_db(transaction=True)
def test_auto_tool_search_is_alone_in_the_list_above_the_threshold_and_off_up_to_it(settings) -> None:  # noqa: ANN001
    tenant = factories.tenant_factory()
    small, big = factories.backend_factory(tenant=tenant), factories.backend_factory(tenant=tenant)
    for backend, count in ((small, 3), (big, 4)):
        for _ in range(count):
            factories.indexed_tool_factory(backend=backend)
    factories.virtual_host_factory(tenant=tenant, slug="one", mounts={"s": small})
    factories.virtual_host_factory(tenant=tenant, slug="both", mounts={"s": small, "b": big})
    old = factories.virtual_host_factory(tenant=tenant, slug="old", mounts={"s": small, "b": big})
    virtual_host_tool_search_set(virtual_host=old, mode="off")  # a host made before auto existed

    settings.GATEWAY_TOOL_SEARCH_AUTO_TOOLS = 3
    snapshot = tenant_snapshot_load(slug=tenant.slug, http=OpenApiHttp())
    assert snapshot.virtual_host("one").tool_search is None  # 3 tools: not more than 3
    assert snapshot.virtual_host("both").tool_search == ToolSearchConfig("tool_search", only=True)  # 7
    assert snapshot.virtual_host("old").tool_search is None

    settings.GATEWAY_TOOL_SEARCH_AUTO_TOOLS = 2
    snapshot = tenant_snapshot_load(slug=tenant.slug, http=OpenApiHttp())
    assert snapshot.virtual_host("one").tool_search == ToolSearchConfig("tool_search", only=True)
    assert snapshot.virtual_host("old").tool_search is None
