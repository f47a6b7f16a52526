"""A virtual host's tool curation in the REST API (apps/catalog/api_curation.py): rules, bulk hide and
show, descriptions; and mounts that are added, not silently replaced. What the gateway then serves:
tests/gateway/test_curation.py."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.catalog.models import ToolOverride, ToolRule
from apps.tenants.models import Tenant
from apps.tenants.services import membership_set
from tests.factories import backend_factory, tenant_factory, virtual_host_factory

pytestmark = pytest.mark.django_db


def _host_api(tenant: Tenant, host_id: int) -> str:
    return f"/api/v1/tenants/{tenant.slug}/virtual-hosts/{host_id}"


def _host(*keys: str) -> Any:
    tenant = tenant_factory()
    return virtual_host_factory(tenant=tenant, mounts={key: backend_factory(tenant=tenant) for key in keys})


def _post(client: Client, url: str, body: Any) -> Any:
    return client.post(url, body, content_type="application/json")


def test_rules_are_added_listed_refused_and_removed(admin_client: Client) -> None:
    host = _host("ec2", "s3")
    url = f"{_host_api(host.tenant, host.pk)}/tool-rules"
    made = _post(admin_client, url, {"action": "exclude", "match": "glob", "pattern": "Delete*", "map_key": "s3"})
    assert made.status_code == 201, made.json()
    rule = made.json()
    assert (rule["action"], rule["match"], rule["pattern"], rule["map_key"]) == ("exclude", "glob", "Delete*", "s3")
    again = _post(admin_client, url, {"action": "exclude", "match": "glob", "pattern": "Delete*", "map_key": "s3"})
    assert again.status_code == 201 and again.json()["id"] == rule["id"]  # the same rule, not a second one
    assert [r["id"] for r in admin_client.get(url).json()["results"]] == [rule["id"]]
    assert admin_client.get(_host_api(host.tenant, host.pk)).json()["tool_rules"] == [rule]

    for body, words in [
        ({"action": "exclude", "match": "glob", "pattern": "Describe["}, "never closed"),
        ({"action": "exclude", "match": "name", "pattern": "x", "map_key": "gone"}, "not mounted"),
        ({"action": "hide", "match": "name", "pattern": "x"}, "action"),
        ({"action": "include", "match": "regex", "pattern": "x"}, "match"),
    ]:
        refused = _post(admin_client, url, body)
        assert refused.status_code == 400 and words in refused.json()["detail"], (body, refused.json())
    assert ToolRule.objects.filter(virtual_host=host).count() == 1

    assert admin_client.delete(f"{url}/{rule['id']}").status_code == 204
    assert admin_client.delete(f"{url}/{rule['id']}").status_code == 404
    assert not ToolRule.objects.filter(virtual_host=host).exists()


def test_hide_and_show_in_bulk(admin_client: Client) -> None:
    host = _host("a", "b")
    base = _host_api(host.tenant, host.pk)
    hidden = _post(admin_client, f"{base}/tools/hide", {"tools": [{"map_key": "a", "tool": "echo"},
                                                                   {"map_key": "b", "tool": "add"}]})
    assert hidden.status_code == 200
    assert {(r["map_key"], r["pattern"], r["action"]) for r in hidden.json()} == {("a", "echo", "exclude"),
                                                                                 ("b", "add", "exclude")}
    # A glob still hides b's "add" after its exact rule goes: said, not done silently.
    _post(admin_client, f"{base}/tool-rules", {"action": "exclude", "match": "glob", "pattern": "ad*", "map_key": "b"})
    shown = _post(admin_client, f"{base}/tools/show", {"tools": [{"map_key": "a", "tool": "echo"},
                                                                 {"map_key": "b", "tool": "add"}]}).json()
    assert shown["removed"] == 2 and shown["added"] == 0
    assert shown["still_hidden"] == [{"map_key": "b", "tool": "add",
                                      "reason": "hidden by the rule exclude glob 'ad*' of b"}]
    # Include rules leave a tool out: showing it adds an include rule naming it.
    _post(admin_client, f"{base}/tool-rules", {"action": "include", "match": "name", "pattern": "echo", "map_key": "a"})
    shown = _post(admin_client, f"{base}/tools/show", {"tools": [{"map_key": "a", "tool": "add"}]}).json()
    assert (shown["added"], shown["still_hidden"]) == (1, [])
    assert ToolRule.objects.filter(virtual_host=host, action="include", map_key="a", pattern="add").exists()

    # A rule of every backend that names the tool is narrowed, not dropped: the other backends' stays hidden.
    _post(admin_client, f"{base}/tool-rules", {"action": "exclude", "match": "name", "pattern": "ping"})
    shown = _post(admin_client, f"{base}/tools/show", {"tools": [{"map_key": "a", "tool": "ping"}]}).json()
    assert (shown["removed"], shown["still_hidden"]) == (1, [])
    # (a's include rules leave ping out too, so one naming it is added.)
    assert set(ToolRule.objects.filter(virtual_host=host, pattern="ping").values_list("action", "map_key")) == {
        ("exclude", "b"), ("include", "a")}

    refused = _post(admin_client, f"{base}/tools/hide", {"tools": [{"map_key": "zz", "tool": "echo"}]})
    assert refused.status_code == 400 and "'zz' is not mounted" in refused.json()["detail"]
    assert _post(admin_client, f"{base}/tools/hide", {"tools": []}).status_code == 400
    many = [{"map_key": "a", "tool": f"t{i}"} for i in range(501)]
    assert _post(admin_client, f"{base}/tools/hide", {"tools": many}).status_code == 400
    assert not ToolRule.objects.filter(virtual_host=host, pattern="t0").exists()


def test_descriptions_are_set_and_removed(admin_client: Client) -> None:
    host = _host("a")
    url = f"{_host_api(host.tenant, host.pk)}/tool-descriptions"
    made = _post(admin_client, url, {"map_key": "a", "tool": "echo", "description": "Say it back."})
    assert made.status_code == 201 and made.json() == {"map_key": "a", "tool": "echo", "description": "Say it back."}
    _post(admin_client, url, {"map_key": "a", "tool": "echo", "description": "Say it back, twice."})
    assert ToolOverride.objects.get(virtual_host=host).description == "Say it back, twice."
    assert _post(admin_client, url, {"map_key": "a", "tool": "echo", "description": "  "}).status_code == 400
    assert _post(admin_client, url, {"map_key": "b", "tool": "echo", "description": "x"}).status_code == 400
    assert admin_client.delete(f"{url}/a/echo").status_code == 204
    assert admin_client.delete(f"{url}/a/echo").status_code == 404


def test_a_mount_is_added_once_and_replaced_only_on_purpose(admin_client: Client) -> None:
    tenant = tenant_factory()
    first, second = backend_factory(tenant=tenant), backend_factory(tenant=tenant)
    host = virtual_host_factory(tenant=tenant, mounts={"a": first})
    mounts = f"{_host_api(tenant, host.pk)}/mounts"
    twice = _post(admin_client, mounts, {"map_key": "a", "backend": second.pk})
    assert twice.status_code == 400 and "already mounts backend" in twice.json()["detail"]
    assert host.mounts.get(map_key="a").backend == first
    replaced = admin_client.put(f"{mounts}/a", {"backend": second.pk}, content_type="application/json")
    assert replaced.status_code == 200 and replaced.json()["backend"] == second.pk
    # Unmounting takes the key's curation with it.
    _post(admin_client, f"{_host_api(tenant, host.pk)}/tool-rules", {"action": "exclude", "match": "name",
                                                                     "pattern": "x", "map_key": "a"})
    assert admin_client.delete(f"{mounts}/a").status_code == 204
    assert not ToolRule.objects.filter(virtual_host=host).exists()


def test_members_read_and_other_tenants_see_nothing(client: Client, django_user_model: Any) -> None:
    host = virtual_host_factory()
    user = django_user_model.objects.create_user(username="m", password="pw")
    membership_set(tenant=host.tenant, user=user, role="member")
    client.force_login(user)
    base = _host_api(host.tenant, host.pk)
    assert client.get(f"{base}/tool-rules").status_code == 200
    body = {"action": "exclude", "match": "name", "pattern": "x"}
    assert _post(client, f"{base}/tool-rules", body).status_code == 403
    other = virtual_host_factory()
    assert client.get(f"{_host_api(other.tenant, other.pk)}/tool-rules").status_code == 404
    assert client.get(f"{_host_api(host.tenant, other.pk)}/tool-rules").status_code == 404
