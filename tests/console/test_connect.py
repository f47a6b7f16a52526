"""The console's Connect page and the client configurations it shows (apps.catalog.connect)."""

from __future__ import annotations

import html
import json
import re
import tomllib
from typing import Any

import pytest
from django.test import Client

from apps.catalog.connect import KEY_ENV_VAR, KEY_PLACEHOLDER, client_configs
from apps.console.views.connect import CONNECT_KEY_SESSION
from apps.tenants.services import membership_set
from tests.factories import tenant_factory, virtual_host_factory

URL = "https://gw.example.com/mcp/acme/tools"


def _by_client(key: str = KEY_PLACEHOLDER) -> dict[str, str]:
    return {c.client: c.text for c in client_configs(url=URL, name="acme-tools", key=key)}


def test_each_client_gets_its_own_format_with_the_bearer_header() -> None:
    configs = _by_client()
    desktop = json.loads(configs["claude-desktop"])["mcpServers"]["acme-tools"]
    assert desktop["command"] == "npx" and desktop["args"][:3] == ["-y", "mcp-remote", URL]
    assert desktop["args"][3:] == ["--header", "Authorization:${AUTH_HEADER}"]
    assert desktop["env"] == {"AUTH_HEADER": f"Bearer {KEY_PLACEHOLDER}"}
    assert configs["claude-code"] == (
        f'claude mcp add --transport http acme-tools {URL} --header "Authorization: Bearer {KEY_PLACEHOLDER}"')
    assert json.loads(configs["cursor"]) == {
        "mcpServers": {"acme-tools": {"url": URL, "headers": {"Authorization": f"Bearer {KEY_PLACEHOLDER}"}}}}
    # VS Code asks for the key when it starts the server and keeps it in its secret storage: the file,
    # often committed with a project, names no key.
    assert json.loads(configs["vscode"]) == {
        "inputs": [{"type": "promptString", "id": "acme-tools-key", "description": "API key for acme-tools",
                    "password": True}],
        "servers": {"acme-tools": {
            "type": "http", "url": URL, "headers": {"Authorization": "Bearer ${input:acme-tools-key}"}}}}
    assert "mgw_" not in _by_client(key="mgw_just-issued")["vscode"]
    assert json.loads(configs["windsurf"]) == {
        "mcpServers": {"acme-tools": {"serverUrl": URL, "headers": {"Authorization": f"Bearer {KEY_PLACEHOLDER}"}}}}
    assert tomllib.loads(configs["codex"]) == {
        "mcp_servers": {"acme-tools": {"url": URL, "bearer_token_env_var": KEY_ENV_VAR}}}
    script = configs["python"]
    compile(script, "connect.py", "exec")  # a runnable script, not pseudo-code
    assert "streamable_http_client(URL, http_client=http)" in script and f'URL = "{URL}"' in script


def test_a_server_name_that_is_no_bare_toml_key_is_quoted() -> None:
    text = next(c.text for c in client_configs(url=URL, name="a b") if c.client == "codex")
    assert tomllib.loads(text)["mcp_servers"]["a b"]["url"] == URL


@pytest.mark.django_db
def test_the_page_builds_the_url_from_the_request_and_shows_a_placeholder(admin_client: Client, settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["testserver", "gw.example.com"]
    tenant = tenant_factory(slug="acme")
    host = virtual_host_factory(tenant=tenant, slug="tools")
    virtual_host_factory(tenant=tenant, slug="other")
    picker = admin_client.get("/console/t/acme/connect/").content.decode()
    assert f'href="/console/t/acme/connect/{host.pk}/"' in picker
    page = admin_client.get(f"/console/t/acme/connect/{host.pk}/", HTTP_HOST="gw.example.com").content.decode()
    assert "<code>http://gw.example.com/mcp/acme/tools/mcp</code>" in page
    assert "<code>http://gw.example.com/mcp/acme/tools/sse</code>" in page
    blocks = re.findall(r'<pre id="config-text-([a-z-]+)"[^>]*><code>(.*?)</code></pre>', page, re.S)
    assert [name for name, _ in blocks] == ["claude-desktop", "claude-code", "cursor", "vscode", "windsurf", "codex", "python"]
    for name, text in blocks:
        assert f'data-copy="#config-text-{name}"' in page
        assert (KEY_PLACEHOLDER in html.unescape(text)) == (name != "vscode") and "mgw_" not in text
    assert json.loads(html.unescape(dict(blocks)["cursor"]))["mcpServers"]["acme-tools"]["url"] == (
        "http://gw.example.com/mcp/acme/tools/mcp")


@pytest.mark.django_db
def test_a_single_host_goes_straight_to_its_configuration(admin_client: Client) -> None:
    host = virtual_host_factory()
    response = admin_client.get(f"/console/t/{host.tenant.slug}/connect/")
    assert response["Location"] == f"/console/t/{host.tenant.slug}/connect/{host.pk}/"


@pytest.mark.django_db
def test_a_key_just_issued_is_filled_in_once(admin_client: Client) -> None:
    host = virtual_host_factory()
    session = admin_client.session
    session[CONNECT_KEY_SESSION] = {"tenant": host.tenant.slug, "secret": "mgw_just-issued"}
    session.save()
    url = f"/console/t/{host.tenant.slug}/connect/{host.pk}/"
    first = admin_client.get(url).content.decode()
    assert "Bearer mgw_just-issued" in html.unescape(first) and KEY_PLACEHOLDER not in first.split("<h2", 1)[1]
    assert "mgw_just-issued" not in admin_client.get(url).content.decode()


@pytest.mark.django_db
def test_members_may_read_and_other_tenants_get_404(client: Client, django_user_model: Any) -> None:
    host, foreign = virtual_host_factory(), virtual_host_factory()
    user = django_user_model.objects.create_user(username="member", password="pw")
    membership_set(tenant=host.tenant, user=user, role="member")
    client.force_login(user)
    assert client.get(f"/console/t/{host.tenant.slug}/connect/{host.pk}/").status_code == 200
    assert client.get(f"/console/t/{host.tenant.slug}/connect/{foreign.pk}/").status_code == 404
    assert client.get(f"/console/t/{foreign.tenant.slug}/connect/{foreign.pk}/").status_code == 404


@pytest.mark.django_db
def test_anonymous_visitors_go_to_the_login(client: Client) -> None:
    host = virtual_host_factory()
    assert client.get(f"/console/t/{host.tenant.slug}/connect/")["Location"].startswith("/console/login/")


def test_clients_that_sign_people_in_get_the_url_only() -> None:
    from apps.catalog.connect import client_configs_signed_in

    configs = {c.client: c.text for c in client_configs_signed_in(url=URL, name="acme-tools")}
    assert all("Bearer" not in text and KEY_PLACEHOLDER not in text for text in configs.values())
    assert json.loads(configs["cursor"]) == {"mcpServers": {"acme-tools": {"url": URL}}}
    assert json.loads(configs["vscode"]) == {"servers": {"acme-tools": {"type": "http", "url": URL}}}
    assert json.loads(configs["windsurf"]) == {"mcpServers": {"acme-tools": {"serverUrl": URL}}}
    assert configs["claude-code"].startswith(f"claude mcp add --transport http acme-tools {URL}\n")
    assert URL in configs["claude-desktop"]
    compile(configs["python"], "connect.py", "exec")
    assert "OAuthClientProvider(" in configs["python"] and f'URL = "{URL}"' in configs["python"]


@pytest.mark.django_db
def test_the_page_offers_signing_in_when_the_tenant_signs_people_in(admin_client: Client) -> None:
    from apps.oauth.services import authorization_server_enable

    tenant = tenant_factory()
    host = virtual_host_factory(tenant=tenant)
    url = f"/console/t/{tenant.slug}/connect/{host.pk}/"
    assert "By signing in (OAuth)" not in admin_client.get(url).content.decode()
    assert KEY_PLACEHOLDER in admin_client.get(url, {"auth": "sign-in"}).content.decode()  # not offered: keys
    authorization_server_enable(tenant=tenant)
    page = admin_client.get(url).content.decode()
    assert "By signing in (OAuth)" in page and KEY_PLACEHOLDER in page
    signed_in = admin_client.get(url, {"auth": "sign-in"}).content.decode()
    assert KEY_PLACEHOLDER not in signed_in and "Nothing to paste" in signed_in
    assert html.escape('"url": "http://testserver/mcp/') in signed_in
