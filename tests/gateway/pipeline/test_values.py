from types import MappingProxyType

from apps.gateway.pipeline.values import BackendView, VirtualHostView


def _backend(name: str) -> BackendView:
    return BackendView(id=1, name=name, transport="streamable-http", urls=("http://b/mcp",), timeout=5)


def test_a_virtual_host_builds_its_naming_from_its_mounts_and_aliases() -> None:
    vhost = VirtualHostView(
        tenant_id=1, tenant_slug="t", slug="v",
        mounts=MappingProxyType({"gateway": _backend("g"), "gateway-one": _backend("g1")}),
        aliases=MappingProxyType({"Inc.Now": ("gateway-one", "increment")}),
    )
    assert vhost.naming.route_tool("Inc.Now") == ("gateway-one", "increment")
    assert vhost.naming.route_tool("gateway-echo") == ("gateway", "echo")
