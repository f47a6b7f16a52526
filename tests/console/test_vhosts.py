"""The console's virtual host pages: list, create/edit/delete, mounts, aliases and the preview of
the tool names a host serves (named by the gateway's own naming contract, against the real demo backend)."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.test import Client

from apps.catalog.models import ToolAlias, VirtualHost, VirtualHostBackend
from apps.catalog.services import ToolTarget
from apps.tenants.models import Tenant
from apps.tenants.services import membership_set
from tests.factories import api_key_factory, backend_factory, tenant_factory, virtual_host_factory
from tests.processes import free_port

pytestmark = pytest.mark.django_db


def _base(tenant: Tenant) -> str:
    return f"/console/t/{tenant.slug}/virtual-hosts/"


def _user(django_user_model: Any, tenant: Tenant, role: str) -> Any:
    user = django_user_model.objects.create_user(username=f"{role}-{tenant.slug}", password="pw")
    membership_set(tenant=tenant, user=user, role=role)
    return user


def test_the_list_pages_by_50_with_bounded_queries(admin_client: Client, django_assert_max_num_queries: Any) -> None:
    tenant = tenant_factory()
    backend = backend_factory(tenant=tenant)
    for n in range(53):
        virtual_host_factory(tenant=tenant, slug=f"h-{n:02d}", mounts={"main": backend})
    with django_assert_max_num_queries(12):
        listing = admin_client.get(_base(tenant)).content.decode()
    assert "Page 1 of 2 (53 in all)" in listing and "h-49" in listing and "h-50" not in listing
    host = VirtualHost.objects.get(tenant=tenant, slug="h-00")
    assert f'href="/console/t/{tenant.slug}/connect/{host.pk}/"' in listing


def test_create_with_tool_search_then_edit_anonymous_access(admin_client: Client) -> None:
    tenant = tenant_factory()
    key = api_key_factory(tenant=tenant).api_key
    response = admin_client.post(_base(tenant) + "new/", {
        "slug": "tools", "tool_search": "listed", "tool_search_name": "find_tools",
    })
    host = VirtualHost.objects.get(tenant=tenant, slug="tools")
    assert response["Location"] == f"{_base(tenant)}{host.pk}/"
    assert (host.tool_search, host.tool_search_name) == ("listed", "find_tools")
    response = admin_client.post(f"{_base(tenant)}{host.pk}/edit/", {
        "slug": "ignored", "tool_search": "off", "tool_search_name": "tool_search",
        "allow_anonymous": "on", "anonymous_key": key.pk,
    })
    assert response.status_code == 302
    host.refresh_from_db()
    assert host.slug == "tools" and host.allow_anonymous and host.anonymous_key == key and host.tool_search == "off"


def test_anonymous_access_needs_a_key_of_the_same_tenant(admin_client: Client) -> None:
    host = virtual_host_factory()
    foreign = api_key_factory().api_key
    edit = f"{_base(host.tenant)}{host.pk}/edit/"
    base = {"tool_search": "off", "tool_search_name": "tool_search", "allow_anonymous": "on"}
    response = admin_client.post(edit, {**base, "anonymous_key": foreign.pk})
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    response = admin_client.post(edit, base)
    assert response.status_code == 400 and "allowing anonymous callers needs an anonymous key" in response.content.decode()
    host.refresh_from_db()
    assert not host.allow_anonymous


def test_mounts_and_aliases_add_and_remove(admin_client: Client) -> None:
    tenant = tenant_factory()
    one, two = backend_factory(tenant=tenant, name="one"), backend_factory(tenant=tenant, name="two")
    host = virtual_host_factory(tenant=tenant, mounts={"a": one})
    page = f"{_base(tenant)}{host.pk}/"
    assert admin_client.post(page + "mounts/", {"map_key": "b", "backend": two.name})["Location"] == page
    assert admin_client.post(page + "aliases/", {"alias": "Find", "map_key": "b", "upstream_name": "search"}).status_code == 302
    alias = ToolAlias.objects.get(virtual_host=host, alias="Find")
    assert (alias.map_key, alias.upstream_name) == ("b", "search")
    mount_b = VirtualHostBackend.objects.get(virtual_host=host, map_key="b")
    refused = admin_client.post(f"{page}mounts/{mount_b.pk}/remove/")
    assert refused.status_code == 400 and "map key 'b' is the target of aliases Find" in html.unescape(refused.content.decode())
    bad = admin_client.post(page + "aliases/", {"alias": "x", "map_key": "nope", "upstream_name": "y"})
    assert bad.status_code == 400
    asked = admin_client.get(f"{page}aliases/{alias.pk}/remove/").content.decode()
    assert "Remove the alias Find from" in asked and "unknown-tool error" in asked
    assert ToolAlias.objects.filter(pk=alias.pk).exists()  # asking removes nothing
    assert admin_client.post(f"{page}aliases/{alias.pk}/remove/").status_code == 302
    assert admin_client.post(f"{page}mounts/{mount_b.pk}/remove/").status_code == 302
    assert list(host.mounts.values_list("map_key", flat=True)) == ["a"]


def test_mounting_another_tenants_backend_is_refused(admin_client: Client) -> None:
    host = virtual_host_factory()
    foreign = backend_factory()
    response = admin_client.post(f"{_base(host.tenant)}{host.pk}/mounts/", {"map_key": "x", "backend": foreign.name})
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    assert not host.mounts.filter(map_key="x").exists()


def test_the_preview_names_tools_as_the_gateway_does(admin_client: Client, demo_backend_url: str) -> None:
    tenant = tenant_factory()
    demo = backend_factory(tenant=tenant, name="demo", urls=[demo_backend_url])
    down = backend_factory(tenant=tenant, name="down", urls=[f"http://127.0.0.1:{free_port()}/mcp"])
    host = virtual_host_factory(
        tenant=tenant, mounts={"d": demo, "e": demo, "off": down}, tool_aliases={"plus": ToolTarget("d", "add")},
    )
    page = admin_client.get(f"{_base(tenant)}{host.pk}/").content.decode()
    assert f'hx-get="{_base(tenant)}{host.pk}/tools/"' in page
    preview = admin_client.get(f"{_base(tenant)}{host.pk}/tools/").content.decode()
    # Several mounts: names are prefixed by map key; the aliased tool is listed under its alias only.
    assert "<code>plus</code>" in preview and "<code>d-echo</code>" in preview and "<code>e-add</code>" in preview
    assert "<code>d-add</code>" not in preview
    assert "The tools mounted under <code>off</code> could not be listed" in preview


def test_users_of_another_tenant_get_404(client: Client, django_user_model: Any) -> None:
    mine, theirs = tenant_factory(), tenant_factory()
    client.force_login(_user(django_user_model, mine, "admin"))
    host = virtual_host_factory(tenant=theirs)
    mount = host.mounts.get()
    for url in (f"{_base(theirs)}{host.pk}/", f"{_base(mine)}{host.pk}/", f"{_base(mine)}{host.pk}/edit/",
                f"{_base(mine)}{host.pk}/tools/"):
        assert client.get(url).status_code == 404, url
    assert client.post(f"{_base(mine)}{host.pk}/delete/").status_code == 404
    assert client.post(f"{_base(mine)}{host.pk}/mounts/{mount.pk}/remove/").status_code == 404
    # A mount of their host under my host's URL is not found either.
    my_host = virtual_host_factory(tenant=mine)
    assert client.post(f"{_base(mine)}{my_host.pk}/mounts/{mount.pk}/remove/").status_code == 404
    assert VirtualHostBackend.objects.filter(pk=mount.pk).exists()


def test_members_read_but_do_not_change(client: Client, django_user_model: Any) -> None:
    host = virtual_host_factory()
    client.force_login(_user(django_user_model, host.tenant, "member"))
    assert client.get(f"{_base(host.tenant)}{host.pk}/").status_code == 200
    assert client.post(_base(host.tenant) + "new/", {"slug": "x", "tool_search": "off", "tool_search_name": "t"}).status_code == 403
    assert client.post(f"{_base(host.tenant)}{host.pk}/delete/").status_code == 403
    assert client.post(f"{_base(host.tenant)}{host.pk}/mounts/", {"map_key": "x"}).status_code == 403
    assert VirtualHost.objects.filter(pk=host.pk).exists()


def test_delete_asks_then_deletes(admin_client: Client) -> None:
    host = virtual_host_factory()
    url = f"{_base(host.tenant)}{host.pk}/delete/"
    assert "Delete " in admin_client.get(url).content.decode()
    assert admin_client.post(url)["Location"] == _base(host.tenant)
    assert not VirtualHost.objects.filter(pk=host.pk).exists()


def test_every_form_needs_the_csrf_token(admin_user: Any) -> None:
    host = virtual_host_factory()
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    base = f"{_base(host.tenant)}{host.pk}/"
    for url in (_base(host.tenant) + "new/", base + "edit/", base + "delete/", base + "mounts/", base + "aliases/"):
        assert client.post(url, {"slug": "x"}).status_code == 403, url
    assert VirtualHost.objects.filter(pk=host.pk).exists()


def test_anonymous_visitors_go_to_the_login(client: Client) -> None:
    host = virtual_host_factory()
    assert client.get(f"{_base(host.tenant)}{host.pk}/")["Location"].startswith("/console/login/")


def test_a_hosts_tools_are_paged_and_searched_on_the_server(
    admin_client: Client, django_capture_on_commit_callbacks: Any,
) -> None:
    import json

    from apps.catalog.specs import spec_upload
    from tests.factories import openapi_backend_factory

    tenant = tenant_factory()
    api = openapi_backend_factory(tenant=tenant)
    paths = {f"/r{i}": {"get": {"operationId": f"op{i:03}", "summary": f"Operation {i}.",
                                "responses": {"200": {"description": "ok"}}}} for i in range(120)}
    paths["/vpcs"] = {"get": {"operationId": "describeVpcs", "summary": "List them.", "responses": {"200": {"description": "ok"}}}}
    paths["/other"] = {"get": {"operationId": "acceptTransfer", "summary": "Accept a VPC transfer.",
                               "responses": {"200": {"description": "ok"}}}}
    document = {"openapi": "3.0.3", "info": {"title": "Many", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
                "paths": paths}
    with django_capture_on_commit_callbacks(execute=True):
        spec_upload(backend=api, document=json.dumps(document).encode(), filename="many.json")
    host = virtual_host_factory(tenant=tenant, mounts={"api": api})
    url = f"{_base(tenant)}{host.pk}/tools/"

    def names(page: str) -> list[str]:
        return re.findall(r"<td><code>([^<]+)</code></td>\s*<td><code>api</code>", page)

    second = admin_client.get(url, {"page": 2}).content.decode()
    assert names(second) == [f"op{i:03}" for i in range(48, 98)]  # by name: acceptTransfer, describeVpcs first
    assert "Page 2 of 3 (122 in all)" in second
    past = admin_client.get(url, {"page": 99}).content.decode()  # past the end: the last page
    assert "Page 3 of 3" in past and names(past)[-1] == "op119"
    # A search ranks a match in the name before one in the description only.
    assert names(admin_client.get(url, {"q": "vpc"}).content.decode()) == ["describeVpcs", "acceptTransfer"]


def test_the_alias_and_rule_forms_pick_tools_as_one_types(admin_client: Client, demo_backend_url: str) -> None:
    tenant = tenant_factory()
    demo = backend_factory(tenant=tenant, name="demo", urls=[demo_backend_url])
    host = virtual_host_factory(tenant=tenant, mounts={"d": demo, "e": demo})
    page = admin_client.get(f"{_base(tenant)}{host.pk}/").content.decode()
    options = f"{_base(tenant)}{host.pk}/tools/options/"
    for field, listed in (("alias_upstream_name", "alias-tool-options"), ("rule_pattern", "rule-tool-options")):
        tag = re.search(rf'<input[^>]*id="{field}"[^>]*>', page)
        assert tag is not None and f'list="{listed}"' in tag.group(0) and f'hx-get="{options}?list={listed}"' in tag.group(0)
        assert f'<datalist id="{listed}"></datalist>' in page
    # What the pickers get: the host's tools matching what was typed, of the chosen map key.
    picked = admin_client.get(options, {"list": "rule-tool-options", "pattern": "ech", "map_key": "e"}).content.decode()
    assert '<datalist id="rule-tool-options">' in picked
    assert re.findall(r'<option value="([^"]+)">([^<]+)</option>', picked) == [("echo", "e: e-echo")]


def test_a_host_with_many_mounts_pages_each_list_and_picks_from_many_by_typing(
    admin_client: Client, django_assert_max_num_queries: Any,
) -> None:
    from apps.catalog.curation import tool_rules_add
    from apps.kernel.curation import ToolRuleSpec

    tenant = tenant_factory()
    backends = [backend_factory(tenant=tenant, name=f"svc-{i:03}") for i in range(120)]
    host = virtual_host_factory(tenant=tenant, mounts={f"k{i:03}": b for i, b in enumerate(backends)},
                                tool_aliases={f"alias-{i:03}": ToolTarget(f"k{i:03}", "t") for i in range(60)})
    tool_rules_add(virtual_host=host, rules=[ToolRuleSpec("exclude", "name", f"t{i}", "") for i in range(55)])
    page_url = f"{_base(tenant)}{host.pk}/"
    with django_assert_max_num_queries(20):  # not one per mount
        page = admin_client.get(page_url, {"aliases_page": 2, "q": "vpc"}).content.decode()
    mounts = re.findall(r"<td><code>(k\d+)</code></td>\s*<td>svc-", page)
    assert mounts == [f"k{i:03}" for i in range(50)] and "Page 1 of 3 (120 in all)" in page
    aliases = re.findall(r"<td><code>(alias-\d+)</code></td>", page)
    assert aliases == ["alias-050", "alias-051", "alias-052", "alias-053", "alias-054", "alias-055", "alias-056",
                       "alias-057", "alias-058", "alias-059"]
    assert "Page 2 of 2 (60 in all)" in page and "Page 1 of 2 (55 in all)" in page
    # A list's pager keeps the page's other parameters, and the tools fragment gets only its own.
    assert html.escape("?aliases_page=2&q=vpc&mounts_page=2#mounts-heading") in page
    assert f'hx-get="{_base(tenant)}{host.pk}/tools/?q=vpc"' in page
    # Past FEW_CHOICES, a select becomes a text box offering the choices as one types.
    backend_box = re.search(r'<input name="backend"[^>]*>', page)
    assert backend_box is not None and 'list="mount_backend-choices"' in backend_box.group(0)
    assert 'type="text"' in backend_box.group(0) and " required" in backend_box.group(0)
    assert 'placeholder="type to choose"' in backend_box.group(0)  # not the select's "---------"
    assert '<option value="svc-007">svc-007 (MCP server)</option>' in page
    rule_key = re.search(r'<input name="map_key"[^>]*id="rule_map_key"[^>]*>', page)
    assert rule_key is not None and 'placeholder="every backend"' in rule_key.group(0)  # its empty choice
    assert " required" not in rule_key.group(0)
    # Finding a mount keeps the page's other parameters.
    assert '<input type="hidden" name="aliases_page" value="2">' in page and '<input type="hidden" name="q" value="vpc">' in page
    assert '<option value="">' not in page.split('id="rule_map_key"')[1].split("</datalist>")[0]
    # The mounts can be searched by map key or backend name.
    found = admin_client.get(page_url, {"mounts_q": "SVC-11"}).content.decode()
    assert re.findall(r"<td><code>(k\d+)</code></td>\s*<td>svc-", found) == [f"k{i}" for i in range(110, 120)]
    nothing = admin_client.get(page_url, {"mounts_q": "nope"}).content.decode()
    assert "No mount’s map key or backend holds “nope”." in html.unescape(nothing).replace("'", "’")
    # What is typed is sent and checked like a choice.
    extra = backend_factory(tenant=tenant, name="extra")
    assert admin_client.post(page_url + "mounts/", {"map_key": "more", "backend": "extra"}).status_code == 302
    assert host.mounts.get(map_key="more").backend == extra
    refused = admin_client.post(page_url + "mounts/", {"map_key": "other", "backend": "svc-999"})
    assert refused.status_code == 400 and "Select a valid choice" in refused.content.decode()
    assert 'value="svc-999"' in refused.content.decode()  # what was typed stays in the box


def test_a_host_with_few_mounts_keeps_plain_selects(admin_client: Client) -> None:
    tenant = tenant_factory()
    host = virtual_host_factory(tenant=tenant, mounts={"a": backend_factory(tenant=tenant, name="one")})
    page = admin_client.get(f"{_base(tenant)}{host.pk}/").content.decode()
    assert '<select name="backend"' in page and '<select name="map_key" id="alias_map_key"' in page
    assert "Find a mount" not in page and 'class="pager"' not in page


def test_adding_a_rule_says_what_it_did_and_warns_when_it_does_nothing_or_everything(
    admin_client: Client, demo_backend_url: str,
) -> None:
    from apps.gateway.exposure import virtual_host_exposed_tools

    tenant = tenant_factory()
    demo = backend_factory(tenant=tenant, name="demo", urls=[demo_backend_url])
    host = virtual_host_factory(tenant=tenant, mounts={"d": demo, "e": demo})
    served = virtual_host_exposed_tools(virtual_host=host, map_key="d").served
    url = f"{_base(tenant)}{host.pk}/tool-rules/"

    def added(rule: dict[str, str]) -> tuple[str, str]:
        page = admin_client.post(url, rule, follow=True).content.decode()
        found = re.search(r'<li class="message ([a-z]+)"[^>]*>(.*?)</li>', page, re.S)
        assert found is not None, page
        return found.group(1), html.unescape(re.sub(r"<[^>]+>", "", found.group(2)))

    kind, said = added({"action": "exclude", "match": "name", "pattern": "echo", "map_key": "d"})
    assert kind == "success" and said == f"Rule added: exclude name 'echo' of d: 1 of the {served} served tools of d are hidden now."
    kind, said = added({"action": "exclude", "match": "glob", "pattern": "no-such-*", "map_key": ""})
    assert kind == "warning" and "it changes nothing now: it matches no tool it would hide or serve" in said
    # An include rule with a typo leaves a backend with nothing to serve.
    kind, said = added({"action": "include", "match": "name", "pattern": "ad", "map_key": "e"})
    assert (kind, said) == ("warning", f"Warning: Rule added: include name 'ad' of e: {served} of the {served} served tools of e "
                                       "are hidden now; no tool of e is served now.")
