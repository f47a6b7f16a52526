"""The tool tester end to end: a tenant admin's session posts the form to a gateway under Daphne,
which makes the call on its own call path, against real backends (the demo MCP server, the recording
REST service). The call is audited as made from the console; the chosen key's access rules and rate
limit apply to it; an OpenAPI tool's page shows the HTTP request that went out, credential redacted."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.catalog.credentials import egress_credential_set
from apps.catalog.specs import spec_upload
from apps.kernel.policy import RuleSpec
from apps.policies.services import access_policy_set, rate_limit_set
from apps.retrieval.models import IndexedTool
from apps.tenants.models import Tenant
from apps.tenants.services import membership_set
from tests.audit.helpers import audit_rows
from tests.backends.specs import as_json, service_spec
from tests.console.test_tools import mcp_entry
from tests.factories import (
    api_key_factory,
    backend_factory,
    openapi_backend_factory,
    tenant_factory,
    virtual_host_factory,
)
from tests.gateway.helpers import message_of, modern

pytestmark = pytest.mark.slow

ADD_SCHEMA = {"type": "object", "required": ["a", "b"],
              "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}


@dataclass
class ConsoleSession:
    """A tenant admin's console session on the gateway at `base`."""

    base: str
    http: httpx.Client

    def run(self, path: str, **fields: str) -> str:
        """Open the tester at `path`, post `fields` with the page's CSRF token; the result page's text."""
        form = self.http.get(f"{self.base}{path}")
        assert form.status_code == 200, form.text
        answer = self.http.post(f"{self.base}{path}",
                                data={"csrfmiddlewaretoken": self.http.cookies["csrftoken"], **fields})
        assert answer.status_code == 200, answer.text
        return html.unescape(answer.text)


def _tester(gateway_url: str, tenant: Tenant, username: str = "ada") -> ConsoleSession:
    user = get_user_model().objects.create_user(username=username, password="pw")
    membership_set(tenant=tenant, user=user, role="admin")
    client = Client()
    client.force_login(user)
    return ConsoleSession(gateway_url, httpx.Client(cookies={"sessionid": client.cookies["sessionid"].value}, timeout=30))


def _trace(page: str) -> str:
    found = re.search(r"\?trace=([0-9a-f]{32})&amp;since=|\?trace=([0-9a-f]{32})&since=", page)
    assert found, page
    return found.group(1) or found.group(2)


def _demo(demo_backend_url: str) -> dict[str, Any]:
    """A tenant with team platform and its key agent, the demo server on host main, its `add` indexed."""
    tenant = tenant_factory()
    issued = api_key_factory(tenant=tenant, name="agent")
    demo = backend_factory(tenant=tenant, name="demo", urls=[demo_backend_url])
    host = virtual_host_factory(tenant=tenant, slug="main", mounts={"demo": demo})
    entry = mcp_entry(demo, "add", "Adds two numbers.", ["a", "b"])
    IndexedTool.objects.filter(pk=entry.pk).update(input_schema=ADD_SCHEMA)
    return {"tenant": tenant, "key": issued.api_key, "secret": issued.secret, "host": host,
            "path": f"/console/t/{tenant.slug}/tools/mcp/{entry.pk}/try/"}


def test_a_call_as_my_test_identity_is_answered_and_audited_as_from_the_console(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    demo = _demo(demo_backend_url)
    tester = _tester(gateway_url, demo["tenant"])
    page = tester.run(demo["path"], host="main:demo", caller="me", mode="form", arg_0="2", arg_1="3.5")
    assert re.search(r'<pre class="tool-text">5\.5</pre>', page), page
    assert '<span class="outcome ok">ok</span>' in page and "as <code id=\"try-caller\">key:console:ada</code>" in page
    trace_id = _trace(page)
    [row] = audit_rows(demo["tenant"].slug, 1)
    assert (row.origin, row.console_user, row.principal, row.api_key_id) == ("console", "ada", "key:console:ada", None)
    assert (row.outcome, row.exposed_name, row.virtual_host, row.trace_id) == ("ok", "add", "main", trace_id)
    log = html.unescape(tester.http.get(f"{gateway_url}/console/t/{demo['tenant'].slug}/audit/?trace={trace_id}").text)
    assert "console · ada" in log and "key:console:ada" in log  # the link's page shows the row


def test_the_chosen_keys_access_rules_and_rate_limit_apply(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    demo = _demo(demo_backend_url)
    tenant, key = demo["tenant"], demo["key"]
    access_policy_set(virtual_host=demo["host"], default="allow",
                      rules=[RuleSpec("no-a2", "key", "agent", "deny", ["add"], "arguments.a == 2")])
    rate_limit_set(tenant=tenant, scope="key", name="agent", limit=1, window_seconds=3600)
    tester = _tester(gateway_url, tenant)
    as_agent = {"host": "main:demo", "caller": str(key.pk), "mode": "json"}

    denied = tester.run(demo["path"], **as_agent, arguments_json='{"a": 2, "b": 1}')
    assert "JSON-RPC error -32003" in denied and "no-a2" in denied, denied
    allowed = tester.run(demo["path"], **as_agent, arguments_json='{"a": 1, "b": 1}')
    assert '<pre class="tool-text">2.0</pre>' in allowed  # a refused call spent nothing
    limited = tester.run(demo["path"], **as_agent, arguments_json='{"a": 1, "b": 1}')
    assert "JSON-RPC error -32005" in limited and "Rate limit exceeded: 1 calls per 3600 s for key 'agent'" in limited
    # The key's own limit: an MCP client with the key is refused too; my test identity has none.
    client_call = message_of(modern(f"{gateway_url}/mcp/{tenant.slug}/main", "tools/call",
                                    {"name": "add", "arguments": {"a": 1, "b": 1}}, key=demo["secret"]))
    assert client_call["error"]["code"] == -32005
    mine = tester.run(demo["path"], host="main:demo", caller="me", mode="json", arguments_json='{"a": 1, "b": 1}')
    assert '<pre class="tool-text">2.0</pre>' in mine

    rows = audit_rows(tenant.slug, 5)
    assert [(r.outcome, r.origin, r.api_key_id, r.rule) for r in rows] == [
        ("denied", "console", key.pk, "no-a2"), ("ok", "console", key.pk, ""), ("rate_limited", "console", key.pk, ""),
        ("rate_limited", "mcp", key.pk, ""), ("ok", "console", None, ""),
    ]
    assert {r.console_user for r in rows if r.origin == "console"} == {"ada"}


def test_an_openapi_tool_shows_the_request_sent_with_its_credential_redacted(
    transactional_db: None, gateway_url: str, recording_service_url: str
) -> None:
    tenant = tenant_factory()
    svc = openapi_backend_factory(tenant=tenant, name="svc", base_url=recording_service_url)
    spec_upload(backend=svc, document=as_json(service_spec()), filename="service.json")
    egress_credential_set(backend=svc, secret="s3cret-value-123")  # X-API-Key, as the spec's scheme says
    virtual_host_factory(tenant=tenant, slug="main", mounts={"svc": svc})
    httpx.post(f"{recording_service_url}/__reset")
    tool = svc.tools.get(name="createPet")
    tester = _tester(gateway_url, tenant)
    path = f"/console/t/{tenant.slug}/tools/{tool.pk}/try/"

    page = tester.run(path, host="main:svc", caller="me", mode="form", arg_0="Rex", arg_1="3", arg_2='["good"]')
    assert f"POST {recording_service_url}/pets" in page
    assert re.search(r"<code>X-API-Key</code></th><td><code>\[redacted\]</code>", page), page
    assert '<pre class="request-body">{"name":"Rex","age":3,"tags":["good"]}</pre>' in page
    assert '<strong class="response-status">HTTP 200</strong>' in page
    # (the service echoes what it received in its answer, which the result shows as it came)
    assert "s3cret-value-123" not in page.split("HTTP request sent")[1]
    sent = httpx.get(f"{recording_service_url}/__recorded").json()
    assert ["x-api-key", "s3cret-value-123"] in sent[-1]["headers"]  # what the tester showed went out for real
    [row] = audit_rows(tenant.slug, 1)
    assert (row.origin, row.backend_kind, row.exposed_name) == ("console", "openapi", "createPet")

    refused = tester.run(path, host="main:svc", caller="me", mode="json", arguments_json='{"age": 3}')
    assert "tool error (isError: true)" in refused and "No request was sent" in refused
