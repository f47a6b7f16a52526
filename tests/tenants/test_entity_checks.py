"""One check per tenants entity (`apps.tenants.validators`) behind every face that writes it: a bad
tenant, team, key or plan is refused with the same words by the service, the REST API, the console
form and a configuration document, and nothing is stored."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from apps.configuration.document import ConfigInvalid
from apps.configuration.services import config_apply
from apps.tenants.models import ApiKey, Plan, Team, Tenant, TokenIssuer
from apps.tenants.services import api_key_issue, api_key_update, plan_set, team_create, tenant_create, token_issuer_set
from apps.tenants.validators import (
    ApiKeyFields,
    PlanFields,
    TenantFields,
    api_key_check,
    plan_check,
    team_check,
    tenant_check,
)
from tests.factories import tenant_factory

pytestmark = pytest.mark.django_db

TENANT_SLUG = "a tenant's slug is 1-64 lowercase letters, digits and inner hyphens"
TEAM_SLUG = "a team's slug is 1-64 lowercase letters, digits and inner hyphens"
PLAN_NAME = "a plan's name is 1-64 lowercase letters, digits and inner hyphens"
TENANT_NAME = "name must be 1-200 characters, not all spaces"
KEY_NAME = "name must be 1-100 characters, not all spaces"
SCOPE = "a scope is 1-64 of A-Z a-z 0-9 _ . : / -, not 'not*ok'"
DAILY = "daily must be a whole number from 0 to 2147483647, or empty"
MONTHLY = "monthly must be a whole number from 0 to 2147483647, or empty"


def _document_refuses(document: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigInvalid) as refused:
        config_apply(document=json.dumps(document), prune=False)
    assert words in str(refused.value), str(refused.value)


def _api_refuses(response: Any, words: str) -> None:
    assert response.status_code == 400 and words in response.json()["detail"], response.json()


def _console_refuses(response: Any, words: str) -> None:
    assert response.status_code == 400 and html.escape(words) in response.content.decode()


def test_the_checks_pass_good_values_and_name_each_wrong_field() -> None:
    assert tenant_check(TenantFields(slug="acme", name="Acme")) == []
    wrong = tenant_check(TenantFields(slug="Acme", name=" ", audit_arguments="all", allow_private_networks="yes"))
    assert [p.field for p in wrong] == ["slug", "name", "audit_arguments", "allow_private_networks"]
    assert team_check(slug="ops") == [] and [p.field for p in team_check(slug=3)] == ["slug"]
    assert api_key_check(ApiKeyFields(name="ci", scopes=["tools:call"])) == []
    wrong = api_key_check(ApiKeyFields(name="", scopes="tools:call", secret="short",
                                       expires_at=datetime(2030, 1, 1)))  # noqa: DTZ001 - the point
    assert [p.field for p in wrong] == ["name", "scopes", "secret", "expires_at"]
    assert api_key_check(ApiKeyFields(name="ci", expires_at=datetime(2030, 1, 1, tzinfo=UTC))) == []
    # The console's test identities are `console:<username>`: no key may pass for one.
    assert [p.message for p in api_key_check(ApiKeyFields(name="console:alice"))] == [
        "key names starting with 'console:' are the console's test identities; choose another name"]
    assert plan_check(PlanFields(name="gold", daily=0, monthly=None)) == []
    wrong = plan_check(PlanFields(name="Gold", daily=True, monthly=-1, limits_editable="no"))
    assert [p.field for p in wrong] == ["name", "daily", "monthly", "limits_editable"]


def test_a_refusal_quotes_a_long_value_shortened() -> None:
    (problem,) = team_check(slug="X" * 10_000)
    assert len(problem.message) < 150 and problem.message.endswith("…")


# --- tenants --------------------------------------------------------------------------------------
TENANT_CASES = [
    ({"slug": "Acme"}, TENANT_SLUG),
    ({"slug": "a" * 65}, TENANT_SLUG),
    ({"slug": "-acme"}, TENANT_SLUG),
    ({"name": "x" * 201}, TENANT_NAME),
    ({"name": "   "}, TENANT_NAME),
]
TENANT_IDS = ["slug-upper", "slug-long", "slug-hyphen", "name-long", "name-spaces"]


def _tenant(bad: dict[str, Any]) -> dict[str, Any]:
    return {"slug": "acme", "name": "Acme", **bad}


@pytest.mark.parametrize(("bad", "words"), TENANT_CASES, ids=TENANT_IDS)
def test_every_face_refuses_a_bad_tenant(admin_client: Client, bad: dict[str, Any], words: str) -> None:
    fields = _tenant(bad)
    with pytest.raises(ValidationError) as refused:
        tenant_create(**fields)
    assert any(words in message for message in refused.value.messages), refused.value.messages
    _api_refuses(admin_client.post("/api/v1/tenants", fields, content_type="application/json"), words)
    _console_refuses(admin_client.post("/console/tenants/new/", {**fields, "plan": "", "allow_private_networks": ""}),
                     words)
    _document_refuses({"tenants": [fields]}, words)
    assert not Tenant.objects.exists()


def test_every_face_refuses_renaming_a_tenant_to_spaces(admin_client: Client) -> None:
    tenant = tenant_factory(name="Acme")
    assert admin_client.patch(f"/api/v1/tenants/{tenant.slug}", {"name": " "},
                              content_type="application/json").status_code == 400
    form = {"name": " ", "plan": "", "audit_arguments": "off", "allow_private_networks": ""}
    _console_refuses(admin_client.post(f"/console/tenants/{tenant.slug}/", form), TENANT_NAME)
    _document_refuses({"tenants": [{"slug": tenant.slug, "name": " "}]}, TENANT_NAME)
    assert Tenant.objects.get(pk=tenant.pk).name == "Acme"


# --- teams ----------------------------------------------------------------------------------------
TEAM_CASES = ["Ops", "-ops", "o" * 65, "ops team"]


@pytest.mark.parametrize("slug", TEAM_CASES, ids=["upper", "hyphen", "long", "space"])
def test_every_face_refuses_a_bad_team(admin_client: Client, slug: str) -> None:
    tenant = tenant_factory()
    with pytest.raises(ValidationError) as refused:
        team_create(tenant=tenant, slug=slug)
    assert any(TEAM_SLUG in message for message in refused.value.messages)
    _api_refuses(admin_client.post(f"/api/v1/tenants/{tenant.slug}/teams", {"slug": slug},
                                   content_type="application/json"), TEAM_SLUG)
    _console_refuses(admin_client.post(f"/console/t/{tenant.slug}/teams/", {"slug": slug}), TEAM_SLUG)
    _document_refuses({"tenants": [{"slug": tenant.slug, "name": tenant.name, "teams": [slug]}]}, TEAM_SLUG)
    assert not Team.objects.filter(tenant=tenant).exists()


# --- keys -----------------------------------------------------------------------------------------
KEY_CASES = [
    ({"name": "k" * 101}, KEY_NAME),
    ({"name": "  "}, KEY_NAME),
    ({"name": "ci", "scopes": ["tools:call", "not*ok"]}, SCOPE),
]
KEY_IDS = ["name-long", "name-spaces", "scope"]


@pytest.mark.parametrize(("fields", "words"), KEY_CASES, ids=KEY_IDS)
def test_every_face_refuses_a_bad_key(admin_client: Client, fields: dict[str, Any], words: str) -> None:
    tenant = tenant_factory()
    with pytest.raises(ValidationError) as refused:
        api_key_issue(tenant=tenant, **fields)
    assert any(words in message for message in refused.value.messages), refused.value.messages
    _api_refuses(admin_client.post(f"/api/v1/tenants/{tenant.slug}/keys", fields, content_type="application/json"),
                 words)
    form = {**fields, "scopes": " ".join(fields.get("scopes", ())), "team": ""}
    _console_refuses(admin_client.post(f"/console/t/{tenant.slug}/keys/new/", form), words)
    _document_refuses({"tenants": [{"slug": tenant.slug, "name": tenant.name, "keys": [fields]}]}, words)
    assert not ApiKey.objects.filter(tenant=tenant).exists()


def test_every_face_refuses_a_bad_scope_on_an_existing_key(admin_client: Client) -> None:
    tenant = tenant_factory()
    key = api_key_issue(tenant=tenant, name="ci", scopes=["tools:call"]).api_key
    _api_refuses(admin_client.patch(f"/api/v1/tenants/{tenant.slug}/keys/{key.pk}", {"scopes": ["not*ok"]},
                                    content_type="application/json"), SCOPE)
    _console_refuses(admin_client.post(f"/console/t/{tenant.slug}/keys/{key.pk}/edit/",
                                       {"team": "", "expires_at": "", "scopes": "not*ok"}), SCOPE)
    assert ApiKey.objects.get(pk=key.pk).scopes == ["tools:call"]


def test_a_weak_secret_is_refused_alike_by_the_service_and_a_document() -> None:
    # Only these two faces take a caller's secret: the API and the console always generate one.
    tenant = tenant_factory()
    words = "the secret is too weak"
    with pytest.raises(ValidationError) as refused:
        api_key_issue(tenant=tenant, name="ci", secret="aaaaaaaaaaaaaaaaaaaaaaaaaaaa")
    assert any(words in message for message in refused.value.messages)
    _document_refuses({"tenants": [{"slug": tenant.slug, "name": tenant.name,
                                    "keys": [{"name": "ci", "secret": "aaaaaaaaaaaaaaaaaaaaaaaaaaaa"}]}]}, words)
    assert not ApiKey.objects.filter(tenant=tenant).exists()


# --- plans ----------------------------------------------------------------------------------------
PLAN_CASES = [
    ({"name": "Gold"}, PLAN_NAME),
    ({"name": "gold", "daily": -1}, DAILY),
    ({"name": "gold", "monthly": 2_147_483_648}, MONTHLY),  # past the database's integer column
]
PLAN_IDS = ["name-upper", "daily-negative", "monthly-too-big"]


@pytest.mark.parametrize(("fields", "words"), PLAN_CASES, ids=PLAN_IDS)
def test_every_face_refuses_a_bad_plan(admin_client: Client, fields: dict[str, Any], words: str) -> None:
    caps = {"daily": None, "monthly": None, **fields}
    with pytest.raises(ValidationError) as refused:
        plan_set(**caps)
    assert any(words in message for message in refused.value.messages), refused.value.messages
    _api_refuses(admin_client.post("/api/v1/plans", fields, content_type="application/json"), words)
    form = {"daily": "", "monthly": "", "limits_editable": "on", **fields}
    _console_refuses(admin_client.post("/console/plans/new/", form), words)
    _document_refuses({"plans": [fields]}, words)
    assert not Plan.objects.exists()


def test_every_face_refuses_a_bad_cap_on_an_existing_plan(admin_client: Client) -> None:
    plan_set(name="gold", daily=10, monthly=None)
    _api_refuses(admin_client.put("/api/v1/plans/gold", {"daily": -5}, content_type="application/json"), DAILY)
    _console_refuses(admin_client.post("/console/plans/gold/", {"daily": "-5", "monthly": "", "limits_editable": "on"}),
                     DAILY)
    _document_refuses({"plans": [{"name": "gold", "daily": -5}]}, DAILY)
    assert Plan.objects.get(name="gold").daily == 10



# --- token issuers (written by the service and by documents only) ----------------------------------
ISSUER_CASES = [
    ({"issuer": "https://idp.example/" + "x" * 490}, "issuer must be 1-500 characters"),
    ({"algorithms": ["RS256", "HS256"]}, "algorithms must be a list of one or more of RS256, ES256, EdDSA, each once"),
    ({"jwks_url": "ftp://idp.example/jwks"}, "jwks_url must be an http:// or https:// URL"),
    ({"team_claim": ""}, "team_claim must be 1-100 characters"),
]


@pytest.mark.parametrize(("bad", "words"), ISSUER_CASES, ids=["issuer-long", "algorithm", "jwks-scheme", "claim"])
def test_the_service_and_a_document_refuse_a_bad_token_issuer_alike(bad: dict[str, Any], words: str) -> None:
    tenant = tenant_factory()
    fields = {"issuer": "https://idp.example/", "audience": "gw", "jwks_url": "https://idp.example/jwks", **bad}
    with pytest.raises(ValidationError) as refused:
        token_issuer_set(tenant=tenant, **fields)
    assert any(words in message for message in refused.value.messages), refused.value.messages
    _document_refuses({"tenants": [{"slug": tenant.slug, "name": tenant.name}],
                       "token_issuers": [{"tenant": tenant.slug, **fields}]}, words)
    assert not TokenIssuer.objects.filter(tenant=tenant).exists()


@pytest.mark.parametrize("source", ["jwks_url", "public_key"])
def test_a_key_source_written_as_null_is_refused_when_the_document_is_checked(source: str) -> None:
    tenant = tenant_factory()
    issuer = {"tenant": tenant.slug, "issuer": "https://idp.example/", "audience": "gw",
              "jwks_url": "https://idp.example/jwks", source: None}
    if source == "jwks_url":
        issuer["public_key"] = "-----BEGIN PUBLIC KEY-----"
    _document_refuses({"tenants": [{"slug": tenant.slug, "name": tenant.name}], "token_issuers": [issuer]},
                      f"token_issuers[0].{source}: {source} must be a string")
    assert not TokenIssuer.objects.filter(tenant=tenant).exists()


def test_a_jwks_url_that_does_not_parse_is_refused() -> None:
    tenant = tenant_factory()
    for url in ("https://idp.example:99999/jwks", "http://[x/jwks", "https:///jwks"):
        with pytest.raises(ValidationError, match="jwks_url must be an http:// or https:// URL"):
            token_issuer_set(tenant=tenant, issuer="https://idp.example/", audience="gw", jwks_url=url)
    assert not TokenIssuer.objects.filter(tenant=tenant).exists()


def test_a_stored_value_that_predates_a_rule_does_not_block_other_changes() -> None:
    # A key named all spaces (an older release let a document write one) can still be re-scoped.
    tenant = tenant_factory()
    key = api_key_issue(tenant=tenant, name="ci").api_key
    ApiKey.objects.filter(pk=key.pk).update(name="   ")
    key.refresh_from_db()
    api_key_update(api_key=key, team=None, expires_at=None, scopes=["tools:call"])
    assert ApiKey.objects.get(pk=key.pk).scopes == ["tools:call"]
