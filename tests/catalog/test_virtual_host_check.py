"""One virtual host check (`apps.catalog.validators.virtual_host_check`) behind every face that
writes a host: the service, the REST API, the console and a configuration document refuse a bad
host with the same words, and leave the stored host as it was."""

from __future__ import annotations

import html
import json

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from apps.catalog.models import ToolAlias, VirtualHost
from apps.catalog.services import ToolTarget, tool_alias_set, virtual_host_tool_search_set, virtual_host_update
from apps.catalog.validators import VirtualHostFields, virtual_host_check
from apps.configuration.document import ConfigInvalid
from apps.configuration.services import config_apply
from tests.factories import backend_factory, tenant_factory, virtual_host_factory

pytestmark = pytest.mark.django_db

ANONYMOUS = "allowing anonymous callers needs an anonymous key"
SHARED_NAME = "'add' is an alias of this host; tool_search and an alias cannot share a name"
UNMOUNTED = "map key 'nope' is not mounted on this virtual host (alias 'find' routes to it)"


@pytest.fixture
def host() -> VirtualHost:
    tenant = tenant_factory()
    backend = backend_factory(tenant=tenant, name="demo", urls=["http://127.0.0.1:9301/mcp"])
    return virtual_host_factory(tenant=tenant, slug="cloud", mounts={"demo": backend},
                                tool_aliases={"add": ToolTarget("demo", "add")})


def _stored(host: VirtualHost) -> tuple[object, ...]:
    host = VirtualHost.objects.get(pk=host.pk)
    return (host.allow_anonymous, host.tool_search, host.tool_search_name,
            sorted(host.tool_aliases.values_list("alias", "map_key")))


def test_the_check_passes_a_good_host_and_names_each_problem() -> None:
    good = VirtualHostFields(map_keys={"demo"}, aliases=[("add", "demo")], tool_search="listed", tool_search_name="find")
    assert virtual_host_check(good) == []
    bad = VirtualHostFields(map_keys={"demo"}, aliases=[("add", "demo"), ("find", "nope")], allow_anonymous=True,
                            tool_search="sometimes", tool_search_name="add")
    assert [(p.field, p.message) for p in virtual_host_check(bad)] == [
        ("tool_search", "tool_search must be one of auto, off, listed, only"),
        ("tool_search_name", SHARED_NAME),
        ("anonymous_key", ANONYMOUS),
        ("tool_aliases.find", UNMOUNTED),
    ]
    # The name may be an alias's while the host has no tool_search.
    assert virtual_host_check(VirtualHostFields(map_keys={"demo"}, aliases=[("add", "demo")], tool_search="off",
                                                tool_search_name="add")) == []


def test_the_service_refuses_each(host: VirtualHost) -> None:
    before = _stored(host)
    for change, words in [
        (lambda: virtual_host_update(virtual_host=host, allow_anonymous=True, anonymous_key=None), ANONYMOUS),
        (lambda: virtual_host_tool_search_set(virtual_host=host, mode="listed", name="add"), SHARED_NAME),
        (lambda: tool_alias_set(virtual_host=host, alias="find", target=ToolTarget("nope", "search")), UNMOUNTED),
    ]:
        with pytest.raises(ValidationError) as refused:
            change()
        assert words in refused.value.messages
        assert _stored(host) == before


def test_the_api_refuses_each(admin_client: Client, host: VirtualHost) -> None:
    before = _stored(host)
    api = f"/api/v1/tenants/{host.tenant.slug}/virtual-hosts/{host.pk}"
    for method, url, body, words in [
        ("put", api, {"allow_anonymous": True}, ANONYMOUS),
        ("put", api, {"tool_search": "listed", "tool_search_name": "add"}, SHARED_NAME),
        ("post", f"{api}/aliases", {"alias": "find", "map_key": "nope", "tool": "search"}, UNMOUNTED),
    ]:
        response = getattr(admin_client, method)(url, body, content_type="application/json")
        assert response.status_code == 400 and words in response.json()["detail"], response.json()
        assert _stored(host) == before


def test_the_console_refuses_each(admin_client: Client, host: VirtualHost) -> None:
    # (An alias's map key is picked from the mounted ones there: an unmounted one cannot be sent.)
    before = _stored(host)
    edit = f"/console/t/{host.tenant.slug}/virtual-hosts/{host.pk}/edit/"
    form = {"slug": host.slug, "tool_search": "auto", "tool_search_name": "tool_search"}
    for changes, words in [({"allow_anonymous": "on"}, ANONYMOUS),
                           ({"tool_search": "listed", "tool_search_name": "add"}, SHARED_NAME)]:
        response = admin_client.post(edit, {**form, **changes})
        assert response.status_code == 400 and html.escape(words) in response.content.decode()
        assert _stored(host) == before


@pytest.mark.parametrize(("change", "words"), [
    ({"allow_anonymous": True}, ANONYMOUS),
    ({"tool_search": "listed", "tool_search_name": "add"}, SHARED_NAME),
    ({"tool_aliases": {"add": "demo:add", "find": "nope:search"}}, UNMOUNTED),
])
def test_a_configuration_document_refuses_each(change: dict[str, object], words: str) -> None:
    host = {"tenant": "acme", "slug": "cloud", "backends": {"demo": "demo"}, "tool_aliases": {"add": "demo:add"}}
    document = {"tenants": [{"slug": "acme", "name": "Acme"}],
                "backends": [{"tenant": "acme", "name": "demo", "urls": ["http://127.0.0.1:9301/mcp"]}],
                "virtual_hosts": [{**host, **change}]}
    with pytest.raises(ConfigInvalid) as refused:
        config_apply(document=json.dumps(document), prune=False)
    assert words in str(refused.value)
    assert not VirtualHost.objects.filter(slug="cloud").exists()


def test_the_console_shows_an_alias_that_takes_tool_searchs_name_as_a_refusal(admin_client: Client, host: VirtualHost) -> None:
    # The check names `tool_search_name`, a field the alias form does not have: shown above the form.
    before = _stored(host)
    response = admin_client.post(f"/console/t/{host.tenant.slug}/virtual-hosts/{host.pk}/aliases/",
                                 {"alias": "tool_search", "map_key": "demo", "upstream_name": "add"})
    words = "'tool_search' is an alias of this host; tool_search and an alias cannot share a name"
    assert response.status_code == 400 and html.escape(words) in response.content.decode()
    assert _stored(host) == before


def test_a_stored_problem_does_not_block_an_unrelated_change(admin_client: Client, host: VirtualHost) -> None:
    # Written past the services (as the Django admin can): an alias to a map key nothing mounts.
    ToolAlias.objects.create(virtual_host=host, alias="old", map_key="gone", upstream_name="x")
    virtual_host_tool_search_set(virtual_host=host, mode="listed", name="find")
    assert VirtualHost.objects.get(pk=host.pk).tool_search == "listed"
    edit = f"/console/t/{host.tenant.slug}/virtual-hosts/{host.pk}/edit/"
    response = admin_client.post(edit, {"slug": host.slug, "tool_search": "only", "tool_search_name": "find"})
    assert response.status_code == 302 and VirtualHost.objects.get(pk=host.pk).tool_search == "only"
    # What a change would add is still refused.
    with pytest.raises(ValidationError, match="map key 'nope' is not mounted"):
        tool_alias_set(virtual_host=host, alias="find2", target=ToolTarget("nope", "search"))
