"""One credential check (`apps.catalog.credentials.egress_credential_check`) behind every face that
sets a backend's egress credential: the service, the REST API, the console form and a configuration
document refuse a bad one with the same words, and nothing is stored."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from apps.catalog.credentials import (
    CredentialFields,
    IdentitySecret,
    egress_credential_check,
    egress_credential_set,
)
from apps.catalog.models import EgressCredential
from apps.configuration.document import ConfigInvalid
from apps.configuration.services import config_apply
from apps.tenants.services import token_issuer_set
from tests.factories import backend_factory, openapi_backend_factory

pytestmark = pytest.mark.django_db

SECRET = "s3cr3t-value-not-to-echo"
URL = "http://127.0.0.1:9001/mcp"
# (the credential's fields, the words every face refuses it with)
CASES = [
    ({"kind": "basic", "username": "a:b", "secret": SECRET}, "a basic-auth username cannot contain ':'"),
    ({"kind": "api_key_header", "secret": SECRET}, "credential kind 'api_key_header' needs the header, parameter or cookie name"),
    ({"kind": "bearer", "secret": "a\nb" + SECRET}, "credential fields must be strings without CR, LF or NUL"),
    ({"kind": "api_key_header", "name": "Mcp-Session-Id", "secret": SECRET}, "carries the MCP exchange itself"),
    ({"kind": "basic", "username": "u" * 129, "secret": SECRET}, "username must be at most 128 characters"),
    ({"kind": "api_key_query", "name": "key", "secret": SECRET}, "an MCP backend takes its credential in a header"),
    ({"kind": "bearer", "secret": ""}, "the secret is empty"),
]
IDS = ["basic-colon", "header-unnamed", "line-break", "reserved-header", "username-long", "query-on-mcp", "empty"]


def test_the_check_names_each_wrong_field() -> None:
    assert egress_credential_check(CredentialFields(kind="bearer", secret=SECRET), backend_kind="mcp",
                                   allow_private=True) == []
    problems = egress_credential_check(CredentialFields(
        kind="api_key_header", source="static", tenant_secret="shared", token_url="https://idp/token",
        identities=(IdentitySecret("key", "agent", SECRET),)), backend_kind="mcp", allow_private=True)
    assert [p.field for p in problems] == ["name", "secret", "tenant_secret", "identities", "token_url"]


@pytest.mark.parametrize(("fields", "words"), CASES, ids=IDS)
def test_every_face_refuses_it(admin_client: Client, fields: dict[str, Any], words: str) -> None:
    backend = backend_factory(urls=[URL])
    with pytest.raises(ValidationError) as refused:
        egress_credential_set(backend=backend, **fields)
    assert any(words in message for message in refused.value.messages), refused.value.messages

    response = admin_client.put(f"/api/v1/tenants/{backend.tenant.slug}/backends/{backend.pk}/credential", fields,
                                content_type="application/json")
    assert response.status_code == 400 and words in response.json()["detail"], response.json()

    form = {"name": "", "username": "", **fields}
    response = admin_client.post(f"/console/t/{backend.tenant.slug}/backends/{backend.pk}/credential/", form)
    page = response.content.decode()
    assert response.status_code == 400 and html.escape(words) in page and SECRET not in page

    document = {"tenants": [{"slug": "doc", "name": "Doc"}],
                "backends": [{"tenant": "doc", "name": "demo", "urls": [URL], "credential": fields}]}
    with pytest.raises(ConfigInvalid) as refused_document:
        config_apply(document=json.dumps(document), prune=False)
    assert words in str(refused_document.value) and SECRET not in str(refused_document.value)
    assert not EgressCredential.objects.exists()


def test_a_field_of_another_source_is_refused_where_it_can_be_given() -> None:
    # client_auth belongs to OAuth credentials only; the console's form has no such field.
    backend = backend_factory(urls=[URL])
    fields = {"kind": "bearer", "secret": SECRET, "client_auth": "client_secret_post"}
    words = "client_auth is only for source oauth_client_credentials"
    with pytest.raises(ValidationError, match=words):
        egress_credential_set(backend=backend, **fields)
    document = {"tenants": [{"slug": "doc", "name": "Doc"}],
                "backends": [{"tenant": "doc", "name": "demo", "urls": [URL], "credential": fields}]}
    with pytest.raises(ConfigInvalid, match=words):
        config_apply(document=json.dumps(document), prune=False)
    assert not EgressCredential.objects.exists()


def test_the_api_refuses_a_field_of_another_source(admin_client: Client) -> None:
    backend = backend_factory(urls=[URL])
    response = admin_client.put(f"/api/v1/tenants/{backend.tenant.slug}/backends/{backend.pk}/credential",
                                {"kind": "bearer", "secret": SECRET, "client_auth": "bogus"},
                                content_type="application/json")
    assert response.status_code == 400 and "client_auth is only for source" in response.json()["detail"]
    assert not EgressCredential.objects.exists()


# (the credential's fields, the field at fault, the words): where the credential goes is judged apart
# from the value sent, so a bad name or username is reported at that field, once, on every face.
PLACEMENT_CASES = [
    ({"kind": "api_key_query", "name": "api\nkey", "secret": SECRET}, "name",
     "credential fields must be strings without CR, LF or NUL"),
    ({"kind": "basic", "username": "a:b", "secret": SECRET}, "username", "a basic-auth username cannot contain ':'"),
    ({"kind": "api_key_cookie", "name": "k\x00", "source": "per_identity",
      "identities": [{"key": "a", "secret": SECRET}, {"key": "b", "secret": SECRET}]}, "name",
     "credential fields must be strings without CR, LF or NUL"),
    ({"kind": "bearer", "secret": "a\rb" + SECRET}, "secret", "credential fields must be strings without CR, LF or NUL"),
]


@pytest.mark.parametrize(("fields", "at", "words"), PLACEMENT_CASES, ids=["query-name", "basic-username",
                                                                           "per-identity-name", "secret"])
def test_a_problem_is_reported_at_the_field_at_fault(admin_client: Client, fields: dict[str, Any], at: str,
                                                     words: str) -> None:
    identities = tuple(IdentitySecret("key", i["key"], i["secret"]) for i in fields.get("identities", ()))
    problems = egress_credential_check(CredentialFields(**{**fields, "identities": identities}),
                                       backend_kind="openapi", allow_private=True)
    assert [p.field for p in problems] == [at], problems
    assert words in problems[0].message

    backend = openapi_backend_factory()
    if "identities" not in fields:  # the console's form takes static credentials only
        form = {"name": "", "username": "", **fields}
        page = admin_client.post(f"/console/t/{backend.tenant.slug}/backends/{backend.pk}/credential/", form)
        label = {"name": "Name", "username": "Username", "secret": "Secret"}[at]
        assert page.status_code == 400 and f"<li>{label}: " in page.content.decode()
        assert [label] == re.findall(r"<li>(\w+): ", page.content.decode())

    document = {"tenants": [{"slug": "doc", "name": "Doc"}],
                "backends": [{"tenant": "doc", "name": "api", "kind": "openapi", "base_url": "http://127.0.0.1:9/",
                              "credential": fields}]}
    with pytest.raises(ConfigInvalid) as refused:
        config_apply(document=json.dumps(document), prune=False)
    assert [p.path for p in refused.value.problems] == [f"backends[0].credential.{at}"]
    assert not EgressCredential.objects.exists()


def test_a_token_exchange_names_one_of_the_tenants_issuers(admin_client: Client) -> None:
    # Only the named issuer's tokens go to the token endpoint, so the issuer must be one the tenant trusts.
    backend = backend_factory(urls=[URL])
    exchange = {"source": "token_exchange", "token_url": "https://idp.example.test/token", "client_id": "gw",
                "secret": SECRET, "audience": "https://tools.example.test"}
    with pytest.raises(ValidationError, match="name the token issuer whose callers' tokens are exchanged"):
        egress_credential_set(backend=backend, **exchange)
    with pytest.raises(ValidationError, match="the tenant trusts no token issuer 'https://idp.example.test/'"):
        egress_credential_set(backend=backend, **exchange, subject_issuer="https://idp.example.test/")
    with pytest.raises(ValidationError, match="subject_issuer is only for source token_exchange"):
        egress_credential_set(backend=backend, secret=SECRET, subject_issuer="https://idp.example.test/")
    assert not EgressCredential.objects.exists()

    # One document adds the issuer and the credential that exchanges its tokens, in either order.
    document = {
        "tenants": [{"slug": "doc", "name": "Doc"}],
        "backends": [{"tenant": "doc", "name": "demo", "urls": [URL],
                      "credential": {**exchange, "subject_issuer": "https://idp.example.test/"}}],
        "token_issuers": [{"tenant": "doc", "issuer": "https://idp.example.test/", "audience": "https://gw.test/mcp",
                           "jwks_url": "https://idp.example.test/jwks"}],
    }
    config_apply(document=json.dumps(document), prune=False)
    stored = EgressCredential.objects.get(backend__name="demo")
    response = admin_client.get(f"/api/v1/tenants/doc/backends/{stored.backend_id}/credential")
    assert response.json()["oauth"] == {
        "token_url": "https://idp.example.test/token", "client_id": "gw", "scope": "", "client_auth": "client_secret_basic",
        "audience": "https://tools.example.test", "subject_issuer": "https://idp.example.test/"}
    assert SECRET not in response.content.decode()


@pytest.mark.parametrize(("fields", "words"), [
    ({"source": "per_person", "kind": "api_key_header", "name": "X-Key"}, "a person's access token is sent as a bearer token"),
    ({"source": "per_person", "secret": SECRET}, "a client secret needs the client id it belongs to"),
    ({"source": "per_person", "token_url": "https://idp.example.test/token"},
     "token_url is only for source oauth_client_credentials or token_exchange"),
    ({"source": "per_person", "client_auth": "bogus", "client_id": "gw"}, "unknown client authentication 'bogus'"),
], ids=["not-bearer", "secret-alone", "token-url", "client-auth"])
def test_a_per_person_credential_is_checked_like_every_other(fields: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(words)):
        egress_credential_set(backend=backend_factory(urls=[URL]), **fields)
    assert not EgressCredential.objects.exists()


def test_a_per_person_credential_is_for_mcp_backends() -> None:
    with pytest.raises(ValidationError, match="per_person is for MCP backends"):
        egress_credential_set(backend=openapi_backend_factory(), source="per_person")
    stored = egress_credential_set(backend=backend_factory(urls=[URL]), source="per_person", client_id="gw",
                                   secret=SECRET, client_auth="client_secret_post", scope="tracker")
    assert (stored.client_id, stored.client_auth, stored.scope) == ("gw", "client_secret_post", "tracker")
    assert SECRET not in stored.secret


def test_callers_tokens_go_only_to_their_issuers_own_token_endpoint() -> None:
    # Anywhere else, whoever runs the endpoint would collect every caller's token.
    backend = backend_factory(urls=[URL])
    token_issuer_set(tenant=backend.tenant, issuer="https://idp.example.test/", audience="https://gw.test/mcp",
                     jwks_url="https://idp.example.test/jwks")
    with pytest.raises(ValidationError, match=r"the token endpoint must be https://idp.example.test/'s own: "
                                              r"https://collector.example.test/token is not at its origin"):
        egress_credential_set(backend=backend, source="token_exchange", token_url="https://collector.example.test/token",
                              client_id="gw", secret=SECRET, subject_issuer="https://idp.example.test/")
    assert not EgressCredential.objects.exists()
