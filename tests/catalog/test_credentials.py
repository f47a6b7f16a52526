"""Egress credentials and tenant secrets (the services), and the plans the gateway builds from them:
secrets encrypted at rest, refused settings leave the stored credential as it was, and each caller
gets its own credential."""

from __future__ import annotations

import asyncio

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from apps.catalog.credentials import IdentitySecret, egress_credential_set, tenant_secret_delete, tenant_secret_set
from apps.catalog.models import Backend, EgressCredential, SpecVersion
from apps.catalog.openapi import Credential
from apps.catalog.selectors import egress_credential_state
from apps.catalog.specs import spec_upload
from apps.common.secrets import secret_decrypt
from apps.gateway.adapters.egress_credentials import EgressPlan, egress_plan_build
from apps.gateway.pipeline.ports import CredentialUnavailable
from apps.kernel.identity import Principal
from tests.backends.specs import as_json, service_spec
from tests.factories import backend_factory, openapi_backend_factory, tenant_factory

pytestmark = pytest.mark.django_db


def plan(backend: Backend) -> EgressPlan:
    backend = Backend.objects.select_related("credential__tenant_secret", "active_spec").get(pk=backend.pk)
    built = egress_plan_build(backend=backend, tokens=None, allow_private=True)
    assert built is not None
    return built


def sent(backend: Backend, principal: Principal | None = None) -> Credential | None:
    """What the backend's requests on behalf of `principal` carry (None: nothing)."""
    return asyncio.run(plan(backend).credential(principal))


def headers(backend: Backend, principal: Principal | None = None) -> tuple[tuple[str, str], ...]:
    return asyncio.run(plan(backend).headers(principal))


def caller(key: str, *, team: str | None = None, issuer: str | None = None) -> Principal:
    return Principal(1, "acme", 7, key, team, issuer=issuer)


def stored_column(table: str, where: str, value: int) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT secret FROM {table} WHERE {where} = %s", [value])  # noqa: S608 - test constants
        return [row[0] for row in cursor.fetchall()]


def test_a_static_credential_is_encrypted_at_rest_and_sent_as_its_kind_says() -> None:
    backend = openapi_backend_factory()
    egress_credential_set(backend=backend, kind="bearer", secret="s3cret-token-value")
    (stored,) = stored_column("catalog_egresscredential", "backend_id", backend.pk)
    assert "s3cret-token-value" not in stored and secret_decrypt(stored) == "s3cret-token-value"
    credential = sent(backend, caller("anyone"))
    assert (credential.kind, credential.value) == ("bearer", "s3cret-token-value")
    assert headers(backend) == (("Authorization", "Bearer s3cret-token-value"),)


def test_a_credential_without_a_kind_follows_the_specs_security_scheme(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    with django_capture_on_commit_callbacks(execute=True):
        spec_upload(backend=backend, document=as_json(service_spec()), filename="spec.json")
    assert SpecVersion.objects.get(backend=backend).status == SpecVersion.Status.READY
    egress_credential_set(backend=backend, secret="k-123")
    credential = sent(backend)
    assert (credential.kind, credential.name, credential.value) == ("api_key_header", "X-API-Key", "k-123")


def test_an_mcp_backend_takes_a_header_credential_and_bearer_when_no_kind_is_given() -> None:
    backend = backend_factory()
    egress_credential_set(backend=backend, secret="t0ken")
    assert headers(backend) == (("Authorization", "Bearer t0ken"),)
    egress_credential_set(backend=backend, kind="api_key_header", name="X-Upstream-Key", secret="k")
    assert headers(backend) == (("X-Upstream-Key", "k"),)
    egress_credential_set(backend=backend, kind="basic", username="gw", secret="pw")
    assert headers(backend) == (("Authorization", "Basic Z3c6cHc="),)
    with pytest.raises(ValidationError, match="in a header"):
        egress_credential_set(backend=backend, kind="api_key_query", name="key", secret="k")
    for reserved in ("Mcp-Session-Id", "content-type", "traceparent", "mcp-param-region"):
        with pytest.raises(ValidationError, match="carries the MCP exchange itself"):
            egress_credential_set(backend=backend, kind="api_key_header", name=reserved, secret="k")
    assert EgressCredential.objects.get(backend=backend).kind == "basic"  # the old one stays


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "api_key_header", "secret": "v"}, "needs the header, parameter or cookie name"),
        ({"kind": "basic", "username": "a:b", "secret": "v"}, "':'"),
        ({"kind": "bearer", "secret": "line\nbreak"}, "CR, LF"),
        ({"kind": "oauth", "secret": "v"}, "unknown credential kind"),
        ({"kind": "bearer", "secret": ""}, "empty"),
        ({"source": "vault", "secret": "v"}, "unknown credential source"),
        ({"source": "tenant_secret", "tenant_secret": "missing"}, "no secret named 'missing'"),
        ({"source": "per_identity"}, "at least one"),
        ({"source": "per_identity", "identities": [IdentitySecret("user", "x", "v")]}, "unknown subject kind"),
        ({"source": "per_identity", "identities": [IdentitySecret("key", "a", "v"), IdentitySecret("key", "a", "w")]},
         "listed twice"),
        ({"source": "per_identity", "identities": [IdentitySecret("team", "ops", "")]}, "team:ops is empty"),
        ({"source": "per_identity", "identities": [IdentitySecret("key", "a", "v", issuer="https://idp")]},
         "only token subject entries name an issuer"),
        ({"source": "oauth_client_credentials", "token_url": "ftp://x", "client_id": "c", "secret": "s"}, "token endpoint"),
        ({"source": "oauth_client_credentials", "token_url": "https://idp.example/token", "secret": "s"}, "client id"),
        ({"source": "oauth_client_credentials", "token_url": "http://idp.example/token", "client_id": "c",
          "secret": "s"}, "must use https"),
        ({"source": "oauth_client_credentials", "token_url": "https://idp.example/token", "client_id": "c",
          "secret": "s", "kind": "basic"}, "bearer or api_key_header"),
    ],
)
def test_unusable_credentials_are_refused_and_the_stored_one_stays(fields: dict, message: str) -> None:
    backend = openapi_backend_factory()
    egress_credential_set(backend=backend, kind="bearer", secret="before")
    with pytest.raises(ValidationError, match=message):
        egress_credential_set(backend=backend, **fields)
    stored = EgressCredential.objects.get(backend=backend)
    assert (stored.kind, stored.source, secret_decrypt(stored.secret)) == ("bearer", "static", "before")


def test_a_tenant_secret_is_shared_by_backends_and_rotates_everywhere() -> None:
    tenant = tenant_factory()
    tenant_secret_set(tenant=tenant, name="github", value="ghp_one")
    first, second = backend_factory(tenant=tenant), openapi_backend_factory(tenant=tenant)
    for backend in (first, second):
        egress_credential_set(backend=backend, kind="bearer", source="tenant_secret", tenant_secret="github")
    assert [sent(b).value for b in (first, second)] == ["ghp_one", "ghp_one"]
    tenant_secret_set(tenant=tenant, name="github", value="ghp_two")
    assert [sent(b).value for b in (first, second)] == ["ghp_two", "ghp_two"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT value FROM catalog_tenantsecret WHERE tenant_id = %s", [tenant.pk])
        assert "ghp_two" not in cursor.fetchone()[0]
    with pytest.raises(ValidationError, match="used by the credential of"):
        tenant_secret_delete(tenant=tenant, name="github")
    # Another tenant cannot name it.
    with pytest.raises(ValidationError, match="no secret named 'github'"):
        egress_credential_set(backend=backend_factory(), source="tenant_secret", tenant_secret="github")


def test_per_identity_credentials_go_by_key_then_token_subject_then_team_then_default() -> None:
    backend = backend_factory()
    identities = [IdentitySecret("key", "agent", "for-agent"), IdentitySecret("subject", "alice", "for-alice"),
                  IdentitySecret("team", "platform", "for-platform"),
                  IdentitySecret("subject", "bob", "for-bob-of-idp", issuer="https://idp")]
    egress_credential_set(backend=backend, source="per_identity", identities=identities)
    credential = EgressCredential.objects.get(backend=backend)
    stored = stored_column("catalog_egressidentity", "credential_id", credential.pk)
    assert len(stored) == 4 and not any("for-" in s for s in stored)

    def value(principal: Principal | None) -> str | None:
        found = sent(backend, principal)
        return None if found is None else found.value

    assert value(caller("agent", team="platform")) == "for-agent"
    assert value(caller("other", team="platform")) == "for-platform"
    assert value(caller("alice", team="platform", issuer="https://idp")) == "for-alice"
    # A key named like a token subject is not that subject, and the other way round.
    assert value(caller("alice", team="platform")) == "for-platform"
    assert value(caller("agent", team="platform", issuer="https://idp")) == "for-platform"
    # A subject entry naming its issuer is for that issuer's tokens only.
    assert value(caller("bob", team="platform", issuer="https://idp")) == "for-bob-of-idp"
    assert value(caller("bob", team="platform", issuer="https://other-idp")) == "for-platform"
    with pytest.raises(CredentialUnavailable, match="no credential for key:stranger"):
        value(caller("stranger"))
    assert value(None) is None  # the gateway's own requests: no default, no credential

    egress_credential_set(backend=backend, source="per_identity", identities=identities[:1], secret="default")
    assert value(caller("stranger")) == "default"
    assert value(None) == "default"
    assert EgressCredential.objects.get(backend=backend).identities.count() == 1  # replaced, not added


def test_an_oauth_token_goes_as_a_bearer_token_whatever_the_spec_says(django_capture_on_commit_callbacks) -> None:
    backend = openapi_backend_factory()
    with django_capture_on_commit_callbacks(execute=True):
        spec_upload(backend=backend, document=as_json(service_spec()), filename="spec.json")  # an API key scheme
    egress_credential_set(backend=backend, source="oauth_client_credentials", token_url="https://idp.example/token",
                          client_id="gateway", secret="s")
    state = egress_credential_state(backend=backend)
    assert (state.applied_kind, state.applied_name) == ("bearer", "")  # not the spec's api_key_header
