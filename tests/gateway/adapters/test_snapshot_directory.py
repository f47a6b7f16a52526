"""Configuration snapshots: what the hot path reads about OpenAPI backends, and at what cost."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.catalog.credentials import egress_credential_set
from apps.catalog.services import virtual_host_tool_search_set
from apps.catalog.specs import spec_upload
from apps.common.redis import async_redis_client
from apps.gateway.adapters.openapi_tool_server import OpenApiHttp
from apps.gateway.adapters.snapshot_directory import SnapshotDirectory, tenant_snapshot_load
from apps.gateway.pipeline.values import ToolSearchConfig
from apps.tenants.models import Tenant
from apps.tenants.services import IssuedKey
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


# --- Invalidation: one tenant's edit reloads that tenant only ---------------------------------------

def _directory() -> SnapshotDirectory:
    return SnapshotDirectory(async_redis_client(), check_seconds=0, http=OpenApiHttp())


@pytest.mark.django_db(transaction=True)
def test_an_edit_reloads_only_the_edited_tenants_snapshot() -> None:
    edited, other = factories.tenant_factory(), factories.tenant_factory()

    async def scenario() -> None:
        directory = _directory()
        first, kept = await directory.tenant(edited.slug), await directory.tenant(other.slug)
        assert await directory.tenant(edited.slug) is first  # served from memory
        issued = await sync_to_async(factories.api_key_factory)(tenant=edited)  # commits: the counter moves
        again = await directory.tenant(edited.slug)
        assert again is not first and again.principal_for_credential(issued.secret) is not None
        assert await directory.tenant(other.slug) is kept  # not reloaded

    async_to_sync(scenario)()


@pytest.mark.django_db(transaction=True)
def test_a_slug_found_missing_is_served_once_its_tenant_exists() -> None:
    async def scenario() -> None:
        directory = _directory()
        assert await directory.tenant("born-later") is None
        assert await directory.tenant("born-later") is None  # remembered as missing
        await sync_to_async(factories.tenant_factory)(slug="born-later")
        assert (await directory.tenant("born-later")).tenant_id > 0  # type: ignore[union-attr]

    async_to_sync(scenario)()


@pytest.mark.django_db(transaction=True)
def test_a_slug_whose_tenant_was_replaced_without_a_word_serves_the_new_tenant() -> None:
    """The old tenant's rows went without a counter moving (a restore, a test's truncation): the new
    tenant of the same slug moves the slug's counter when it is created."""
    old = factories.tenant_factory(slug="reborn")

    async def scenario() -> None:
        directory = _directory()
        assert (await directory.tenant("reborn")).tenant_id == old.pk  # type: ignore[union-attr]
        await sync_to_async(lambda: Tenant.objects.filter(pk=old.pk).delete())()
        new = await sync_to_async(factories.tenant_factory)(slug="reborn")
        assert (await directory.tenant("reborn")).tenant_id == new.pk  # type: ignore[union-attr]

    async_to_sync(scenario)()


@pytest.mark.django_db(transaction=True)
def test_an_edit_committed_while_a_snapshot_loads_is_picked_up_by_the_next_check() -> None:
    """The edit lands after the load read the configuration (the snapshot misses it) and moves the
    counter after the load read that: the next check drops the snapshot."""
    tenant = factories.tenant_factory()
    issued: list[IssuedKey] = []

    async def scenario() -> None:
        directory = _directory()
        load = directory._load

        async def load_then_edit(**kwargs: object) -> object:
            snapshot = await load(**kwargs)
            if not issued:
                issued.append(await sync_to_async(factories.api_key_factory)(tenant=tenant))
            return snapshot

        directory._load = load_then_edit  # type: ignore[method-assign]
        stale = await directory.tenant(tenant.slug)
        assert stale.principal_for_credential(issued[0].secret) is None  # type: ignore[union-attr]
        fresh = await directory.tenant(tenant.slug)
        assert fresh.principal_for_credential(issued[0].secret) is not None  # type: ignore[union-attr]

    async_to_sync(scenario)()
