"""The tools a virtual host serves, through the REST API: named by the gateway's naming contract,
an MCP backend's tools asked of the real demo backend."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.catalog.services import ToolTarget, tool_alias_set
from apps.tenants.models import Tenant
from tests.factories import backend_factory, tenant_factory, virtual_host_factory

pytestmark = pytest.mark.django_db


def _api(tenant: Tenant) -> str:
    return f"/api/v1/tenants/{tenant.slug}/virtual-hosts"


def test_exposed_tools_use_the_gateways_naming(admin_client: Client, demo_backend_url: str) -> None:
    tenant = tenant_factory()
    demo = backend_factory(tenant=tenant, urls=[demo_backend_url])
    host = virtual_host_factory(tenant=tenant, mounts={"x": demo, "y": demo}, tool_aliases={"sum": ToolTarget("x", "add")})
    admin_client.put(f"{_api(tenant)}/{host.pk}", {"tool_search": "listed"}, content_type="application/json")
    body = admin_client.get(f"{_api(tenant)}/{host.pk}/exposed-tools").json()
    names = {t["name"]: (t["map_key"], t["upstream_name"]) for t in body["tools"]}
    assert names["sum"] == ("x", "add") and names["y-add"] == ("y", "add") and names["x-echo"] == ("x", "echo")
    assert "x-add" not in names
    assert body["tool_search"] == "tool_search" and body["unavailable"] == {} and body["dropped"] == []


def test_exposed_tools_are_curated_searched_and_paged(admin_client: Client, demo_backend_url: str) -> None:
    from apps.catalog.curation import tool_override_set, tools_hide

    tenant = tenant_factory()
    demo = backend_factory(tenant=tenant, urls=[demo_backend_url])
    host = virtual_host_factory(tenant=tenant, mounts={"x": demo, "y": demo})
    tools_hide(virtual_host=host, tools=[("y", "echo")])
    tool_override_set(virtual_host=host, map_key="x", upstream_name="echo", description="Say it back, curated.")
    url = f"{_api(tenant)}/{host.pk}/exposed-tools"
    served = admin_client.get(url).json()
    assert served["hidden"] == 1 and served["served"] == served["count"] == len(served["tools"])
    assert "y-echo" not in {t["name"] for t in served["tools"]}
    echo = next(t for t in served["tools"] if t["name"] == "x-echo")
    assert (echo["description"], echo["described"], echo["hidden"]) == ("Say it back, curated.", True, "")
    hidden = admin_client.get(url, {"state": "hidden"}).json()["tools"]
    assert [(t["map_key"], t["upstream_name"], t["hidden"]) for t in hidden] == [
        ("y", "echo", "hidden by the rule exclude name 'echo' of y")]
    # A search ranks a match in the name above one in the description; paging cuts the ranked list.
    found = admin_client.get(url, {"search": "echo", "state": "all"}).json()
    assert found["count"] == 2 and [t["upstream_name"] for t in found["tools"]] == ["echo", "echo"]
    page = admin_client.get(url, {"limit": 2, "offset": 1}).json()
    assert page["count"] == served["count"] and [t["name"] for t in page["tools"]] == [
        t["name"] for t in served["tools"]][1:3]
    for bad in ({"state": "gone"}, {"limit": 0}, {"limit": "x"}, {"offset": -1}):
        assert admin_client.get(url, bad).status_code == 400, bad


def test_a_hosts_listing_is_worked_out_again_only_when_what_it_is_made_of_changes(
    django_capture_on_commit_callbacks: Any, django_assert_max_num_queries: Any,
) -> None:
    from apps.catalog.curation import tools_hide
    from apps.catalog.specs import spec_upload
    from apps.gateway.exposure import virtual_host_exposed_tools
    from tests.backends.specs import as_json, service_spec
    from tests.factories import openapi_backend_factory

    tenant = tenant_factory()
    api = openapi_backend_factory(tenant=tenant)
    with django_capture_on_commit_callbacks(execute=True):
        spec_upload(backend=api, document=as_json(service_spec()), filename="s.json")
    host = virtual_host_factory(tenant=tenant, mounts={"api": api})
    first = virtual_host_exposed_tools(virtual_host=host)
    virtual_host_factory()  # another tenant's change
    with django_assert_max_num_queries(5):  # what the listing is made of, and the tool_search mode: no tool rows
        assert virtual_host_exposed_tools(virtual_host=host) == first
    tools_hide(virtual_host=host, tools=[("api", first.tools[0].upstream_name)])
    after = virtual_host_exposed_tools(virtual_host=host)
    assert after.served == first.served - 1 and after.hidden == 1


def test_a_change_to_one_mount_names_only_that_mounts_tools_again(
    demo_backend_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from apps.catalog.curation import tool_override_set, tool_rules_add, tools_hide, tools_show
    from apps.catalog.services import tool_alias_set
    from apps.gateway.exposure import exposed_tools_forget, virtual_host_exposed_tools
    from apps.kernel.curation import ToolRuleSpec
    from apps.kernel.names import Naming

    tenant = tenant_factory()
    demo = backend_factory(tenant=tenant, urls=[demo_backend_url])
    host = virtual_host_factory(tenant=tenant, mounts={"x": demo, "y": demo, "z": demo})
    named: list[str] = []
    bulk = Naming.tool_names_all
    monkeypatch.setattr(Naming, "tool_names_all", lambda self, key, names: named.append(key) or bulk(self, key, names))

    def listed() -> list[tuple[str, str, str, str]]:
        tools = virtual_host_exposed_tools(virtual_host=host, state="all").tools
        return [(t.name, t.map_key, t.upstream_name, t.description + t.hidden) for t in tools]

    def fresh() -> list[tuple[str, str, str, str]]:
        exposed_tools_forget()
        return listed()

    assert listed() == fresh() and sorted(named) == ["x", "x", "y", "y", "z", "z"]
    edits = [
        (lambda: tools_hide(virtual_host=host, tools=[("y", "echo")]), ["y"]),
        (lambda: tool_override_set(virtual_host=host, map_key="z", upstream_name="add", description="Sum."), ["z"]),
        (lambda: tools_show(virtual_host=host, tools=[("y", "echo")]), ["y"]),
        # What every mount's names depend on: every backend's rules, aliases.
        (lambda: tool_rules_add(virtual_host=host, rules=[ToolRuleSpec("exclude", "glob", "e*", "")]), ["x", "y", "z"]),
        (lambda: tool_alias_set(virtual_host=host, alias="sum", target=ToolTarget("x", "add")), ["x", "y", "z"]),
    ]
    for edit, renamed in edits:
        before = listed()
        edit()
        named.clear()
        after = listed()
        assert sorted(named) == renamed and after != before
        assert after == fresh()


def test_a_search_after_a_change_finds_what_the_change_made(demo_backend_url: str) -> None:
    from apps.catalog.curation import tool_override_set, tool_rules_add
    from apps.gateway.exposure import virtual_host_exposed_tools
    from apps.kernel.curation import ToolRuleSpec

    tenant = tenant_factory()
    demo = backend_factory(tenant=tenant, urls=[demo_backend_url])
    host = virtual_host_factory(tenant=tenant, mounts={"x": demo, "y": demo})

    def found(search: str) -> list[str]:
        return [t.name for t in virtual_host_exposed_tools(virtual_host=host, search=search).tools]

    assert found("echo") == ["x-echo", "y-echo"] and found("zebra") == []  # the words are made here...
    tool_override_set(virtual_host=host, map_key="y", upstream_name="echo", description="Repeat what a zebra says.")
    assert found("zebra") == ["y-echo"]  # ...and a changed tool is searched by its new text
    tool_rules_add(virtual_host=host, rules=[ToolRuleSpec("exclude", "name", "echo", "x")])
    assert found("echo") == ["y-echo"] and found("zebra") == ["y-echo"]
    tool_alias_set(virtual_host=host, alias="say", target=ToolTarget("y", "echo"))  # a change to every mount
    assert found("zebra") == ["say"] and found("say") == ["say"]
