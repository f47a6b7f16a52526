from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from apps.catalog.models import Backend, ToolAlias
from apps.catalog.services import (
    ToolTarget,
    backend_create,
    backend_delete,
    backend_update,
    mount_delete,
    mount_set,
    tool_alias_set,
    virtual_host_create,
    virtual_host_update,
)
from tests.factories import api_key_factory, backend_factory, tenant_factory, virtual_host_factory

pytestmark = pytest.mark.django_db


def _urls(backend: Backend) -> list[str]:
    return [r.url for r in Backend.objects.get(pk=backend.pk).replicas.order_by("position")]


def test_backend_keeps_replica_urls_in_order_and_update_replaces_them() -> None:
    tenant = tenant_factory()
    backend = backend_create(tenant=tenant, name="b", urls=["http://a:1/mcp", "http://b:1/mcp"])
    assert _urls(backend) == ["http://a:1/mcp", "http://b:1/mcp"]
    backend_update(
        backend=backend, kind="mcp", transport="sse", urls=["http://b:1/mcp", "http://c:1/mcp"], timeout_seconds=5
    )
    assert _urls(backend) == ["http://b:1/mcp", "http://c:1/mcp"]
    assert Backend.objects.get(pk=backend.pk).transport == "sse"


@pytest.mark.parametrize(
    "urls", [[], ["ftp://x/"], ["http://a:1/mcp", "http://a:1/mcp"]], ids=["none", "scheme", "duplicate"]
)
def test_backend_rejects_bad_replica_urls(urls: list[str]) -> None:
    with pytest.raises(ValidationError):
        backend_create(tenant=tenant_factory(), name="b", urls=urls)


def test_virtual_host_mounts_and_aliases() -> None:
    tenant = tenant_factory()
    one, two = backend_factory(tenant=tenant), backend_factory(tenant=tenant)
    host = virtual_host_create(
        tenant=tenant, slug="main", mounts={"one": one, "two": two},
        tool_aliases={"search": ToolTarget(map_key="one", upstream_name="find")},
    )
    assert {m.map_key: m.backend for m in host.mounts.all()} == {"one": one, "two": two}
    assert ToolAlias.objects.get(virtual_host=host).upstream_name == "find"
    mount_set(virtual_host=host, map_key="two", backend=one)
    assert host.mounts.get(map_key="two").backend == one


def test_alias_needs_a_mounted_map_key_and_mount_with_aliases_cannot_go() -> None:
    host = virtual_host_factory(mounts=None)
    with pytest.raises(ValidationError, match="not mounted"):
        tool_alias_set(virtual_host=host, alias="x", target=ToolTarget(map_key="nope", upstream_name="y"))
    tool_alias_set(virtual_host=host, alias="x", target=ToolTarget(map_key="main", upstream_name="y"))
    with pytest.raises(ValidationError, match="aliases"):
        mount_delete(mount=host.mounts.get(map_key="main"))


def test_mounted_backend_cannot_be_deleted() -> None:
    host = virtual_host_factory()
    with pytest.raises(ValidationError, match="mounted"):
        backend_delete(backend=host.mounts.get().backend)


def test_mount_refuses_another_tenants_backend() -> None:
    host = virtual_host_factory()
    with pytest.raises(ValidationError):
        mount_set(virtual_host=host, map_key="x", backend=backend_factory())


def test_anonymous_access_needs_a_key_of_the_same_tenant() -> None:
    host = virtual_host_factory()
    with pytest.raises(ValidationError):
        virtual_host_update(virtual_host=host, allow_anonymous=True, anonymous_key=None)
    with pytest.raises(ValidationError):
        virtual_host_update(virtual_host=host, allow_anonymous=True, anonymous_key=api_key_factory().api_key)
    key = api_key_factory(tenant=host.tenant).api_key
    assert virtual_host_update(virtual_host=host, allow_anonymous=True, anonymous_key=key).anonymous_key == key
