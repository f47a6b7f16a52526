"""The SSRF guard when URLs are saved: backend replica and base URLs, OAuth token endpoints, JWKS
URLs, the servers of uploaded specs, configuration documents, the REST API and the console. A
refused URL gets an error naming it and the reason, and nothing is stored. Nothing here connects
anywhere: literal addresses are judged as written, `localhost` by what it resolves to."""

from __future__ import annotations

import copy

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from apps.catalog.credentials import egress_credential_set
from apps.catalog.models import Backend, EgressCredential, SpecVersion, Tool
from apps.catalog.services import backend_create, backend_update
from apps.catalog.specs import spec_upload
from apps.configuration.document import ConfigInvalid
from apps.configuration.services import config_apply, config_export
from apps.configuration.validation import config_parse
from apps.tenants.models import Tenant, TokenIssuer
from apps.tenants.services import tenant_private_networks_set, token_issuer_set
from tests.backends.specs import as_json, service_spec
from tests.factories import backend_factory, openapi_backend_factory, tenant_factory

pytestmark = pytest.mark.django_db


def refused(tenant: Tenant, url: str) -> str:
    before = Backend.objects.count()
    with pytest.raises(ValidationError) as error:
        backend_create(tenant=tenant, name="b", urls=[url])
    assert Backend.objects.count() == before
    return error.value.messages[0]


@pytest.mark.parametrize(("url", "reason"), [
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata address"),
    ("http://[fd00:ec2::254]/", "fd00:ec2::254 is a cloud metadata address"),
    ("http://100.100.100.200/", "100.100.100.200 is a cloud metadata address"),
    ("http://metadata.google.internal/computeMetadata/v1/", "metadata.google.internal names a cloud metadata service"),
    ("http://169.254.10.10:8000/mcp", "169.254.10.10 is a link-local address"),
    ("http://[::ffff:169.254.169.254]/mcp", "::ffff:169.254.169.254 is a cloud metadata address"),
    ("http://0.0.0.0:8000/mcp", "0.0.0.0 is the unspecified address"),
    # Numeric host forms the resolver turns into the metadata address.
    ("http://2852039166/", "2852039166 resolves to 169.254.169.254, which is a cloud metadata address"),
    ("http://0xa9.0xfe.0xa9.0xfe/", "0xa9.0xfe.0xa9.0xfe resolves to 169.254.169.254, which is a cloud metadata address"),
])
def test_link_local_and_metadata_urls_are_refused_even_where_private_networks_are_allowed(url: str, reason: str) -> None:
    tenant = tenant_factory()
    tenant_private_networks_set(tenant=tenant, allowed=True)
    assert refused(tenant, url) == f"the URL {url!r} is not allowed: {reason}"


def test_private_urls_follow_the_tenant_setting_and_the_deployment_default(settings) -> None:  # noqa: ANN001
    tenant = tenant_factory()
    tenant_private_networks_set(tenant=tenant, allowed=False)
    assert refused(tenant, "http://10.0.0.5:8000/mcp") == (
        "the URL 'http://10.0.0.5:8000/mcp' is not allowed: 10.0.0.5 is a private address and this tenant does "
        "not allow private networks"
    )
    # A name is judged by what it resolves to.
    assert "localhost resolves to 127.0.0.1, which is a loopback address" in refused(tenant, "http://localhost:9/mcp")
    assert backend_create(tenant=tenant, name="public", urls=["https://8.8.8.8/mcp"]).replicas.count() == 1

    tenant_private_networks_set(tenant=tenant, allowed=None)  # the deployment's default decides
    settings.GATEWAY_ALLOW_PRIVATE_NETWORKS = False
    assert "does not allow private networks" in refused(tenant, "http://192.168.1.10/mcp")
    settings.GATEWAY_ALLOW_PRIVATE_NETWORKS = True
    assert backend_create(tenant=tenant, name="inside", urls=["http://192.168.1.10/mcp"]).pk


def test_an_update_with_a_refused_url_keeps_the_stored_replicas() -> None:
    backend = backend_factory(urls=["http://127.0.0.1:9001/mcp"])
    with pytest.raises(ValidationError, match="cloud metadata"):
        backend_update(backend=backend, kind=backend.kind, transport=backend.transport,
                       urls=["http://169.254.169.254/mcp"], timeout_seconds=5)
    assert [r.url for r in Backend.objects.get(pk=backend.pk).replicas.all()] == ["http://127.0.0.1:9001/mcp"]


def test_openapi_base_urls_token_endpoints_and_jwks_urls_are_checked() -> None:
    tenant = tenant_factory()
    with pytest.raises(ValidationError, match=r"'http://169.254.169.254/' is not allowed: .* cloud metadata"):
        backend_create(tenant=tenant, name="api", urls=[], kind=Backend.Kind.OPENAPI, base_url="http://169.254.169.254/")
    backend = openapi_backend_factory(tenant=tenant)
    with pytest.raises(ValidationError) as error:
        egress_credential_set(backend=backend, source="oauth_client_credentials", kind="bearer",
                              token_url="https://[fe80::1]/token", client_id="gw", secret="s3cret")
    assert error.value.message_dict == {
        "token_url": ["token endpoint: the URL 'https://[fe80::1]/token' is not allowed: fe80::1 is a link-local address"]
    }
    assert not EgressCredential.objects.filter(backend=backend).exists()
    with pytest.raises(ValidationError) as error:
        token_issuer_set(tenant=tenant, issuer="https://login.test/", audience="gw",
                         jwks_url="http://metadata.google.internal/keys")
    assert error.value.message_dict["jwks_url"] == [
        "the URL 'http://metadata.google.internal/keys' is not allowed: metadata.google.internal names a cloud "
        "metadata service"
    ]
    assert not TokenIssuer.objects.filter(tenant=tenant).exists()


def test_a_spec_whose_servers_are_refused_fails_and_publishes_nothing(django_capture_on_commit_callbacks) -> None:  # noqa: ANN001
    backend = openapi_backend_factory(base_url="")
    spec = copy.deepcopy(service_spec())
    spec["servers"] = [{"url": "http://169.254.169.254/latest"}]
    with django_capture_on_commit_callbacks(execute=True):
        version = spec_upload(backend=backend, document=as_json(spec))
    version.refresh_from_db()
    assert version.status == SpecVersion.Status.FAILED
    assert version.errors == [{"pointer": "/servers", "message": (
        "the URL 'http://169.254.169.254/latest' is not allowed: 169.254.169.254 is a cloud metadata address; set "
        "the backend's base URL to where the service is reached")}]
    assert not Tool.objects.filter(backend=backend).exists()
    # With a base URL the spec's servers are not used, so they do not matter.
    backend_update(backend=backend, kind=backend.kind, transport=backend.transport, urls=[], timeout_seconds=5,
                   base_url="http://127.0.0.1:9/")
    with django_capture_on_commit_callbacks(execute=True):
        version = spec_upload(backend=backend, document=as_json(spec))
    version.refresh_from_db()
    assert version.status == SpecVersion.Status.READY


DOCUMENT = """\
tenants:
  - slug: acme
    name: Acme
    allow_private_networks: {private}
backends:
  - tenant: acme
    name: demo
    urls: ["{url}"]
"""


def test_configuration_documents_carry_the_setting_and_are_checked_with_it() -> None:
    problems = _problems(DOCUMENT.format(private="false", url="http://10.1.2.3/mcp"))
    assert problems == ["backends[0].urls[0]: the URL 'http://10.1.2.3/mcp' is not allowed: 10.1.2.3 is a private "
                        "address and this tenant does not allow private networks"]
    assert _problems(DOCUMENT.format(private="true", url="http://169.254.169.254/mcp")) == [
        "backends[0].urls[0]: the URL 'http://169.254.169.254/mcp' is not allowed: 169.254.169.254 is a cloud "
        "metadata address"]
    assert _problems(DOCUMENT.format(private="sometimes", url="http://10.1.2.3/mcp"))[0] == (
        "tenants[0].allow_private_networks: allow_private_networks must be true, false or empty (the deployment's default)")
    # Names are resolved when the document is applied: nothing is stored then.
    with pytest.raises(ConfigInvalid) as error:
        config_apply(document=DOCUMENT.format(private="false", url="http://localhost:9/mcp"), prune=False)
    assert any("localhost resolves to 127.0.0.1" in str(p) for p in error.value.problems)
    assert not Tenant.objects.filter(slug="acme").exists()

    issuer = DOCUMENT.format(private="true", url="http://10.1.2.3/mcp") + (
        "token_issuers:\n  - {tenant: acme, issuer: 'https://login.test/', audience: gw,"
        " jwks_url: 'http://169.254.169.254/keys'}\n")
    with pytest.raises(ConfigInvalid) as error:
        config_apply(document=issuer, prune=False)
    assert [str(p) for p in error.value.problems] == [
        "token_issuers[0].jwks_url: the URL 'http://169.254.169.254/keys' is not allowed: 169.254.169.254 is a "
        "cloud metadata address"]
    config_apply(document=DOCUMENT.format(private="true", url="http://10.1.2.3/mcp"), prune=False)
    assert Tenant.objects.get(slug="acme").allow_private_networks is True
    assert "allow_private_networks: true" in config_export()
    report = config_apply(document=DOCUMENT.format(private="null", url="http://10.1.2.3/mcp"), prune=False)
    assert Tenant.objects.get(slug="acme").allow_private_networks is None
    assert any("private networks default" in change.detail for change in report.changes)
    assert "allow_private_networks" not in config_export()


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigInvalid) as excinfo:
        config_parse(text)
    return [str(p) for p in excinfo.value.problems]


def test_platform_admins_set_it_through_the_rest_api(admin_user) -> None:  # noqa: ANN001
    tenant = tenant_factory()
    client = APIClient()
    client.force_authenticate(admin_user)
    response = client.patch(f"/api/v1/tenants/{tenant.slug}", {"allow_private_networks": False}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["allow_private_networks"] is False
    assert Tenant.objects.get(pk=tenant.pk).allow_private_networks is False
    response = client.patch(f"/api/v1/tenants/{tenant.slug}", {"allow_private_networks": None}, format="json")
    assert response.json()["allow_private_networks"] is None
    created = client.post("/api/v1/tenants", {"slug": "inside", "name": "Inside", "allow_private_networks": True},
                          format="json")
    assert created.status_code == 201 and created.json()["allow_private_networks"] is True
    refused_backend = client.post("/api/v1/tenants/inside/backends",
                                  {"name": "meta", "replicas": ["http://169.254.169.254/"]}, format="json")
    assert refused_backend.status_code == 400
    assert "169.254.169.254 is a cloud metadata address" in refused_backend.content.decode()


def test_platform_admins_set_it_in_the_console(admin_client) -> None:  # noqa: ANN001
    tenant = tenant_factory()
    page = admin_client.get(f"/console/tenants/{tenant.slug}/")
    assert page.status_code == 200 and "Private networks" in page.content.decode()
    response = admin_client.post(f"/console/tenants/{tenant.slug}/", {
        "name": tenant.name, "plan": "", "audit_arguments": "off", "allow_private_networks": "false",
    })
    assert response.status_code == 302, response.content.decode()
    assert Tenant.objects.get(pk=tenant.pk).allow_private_networks is False
