"""The tenant's people pages: API keys (secret shown once; members manage their own), teams,
members, and every user's own REST API tokens."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore
from django.test import Client
from django.utils import timezone

from apps.tenants.keys import key_hash
from apps.tenants.models import AdminToken, ApiKey, Membership, Team, Tenant
from apps.tenants.services import admin_token_issue, api_key_issue, membership_set
from tests.factories import team_factory, tenant_factory

pytestmark = pytest.mark.django_db


def _user(django_user_model: Any, tenant: Tenant | None, role: str | None, name: str) -> Any:
    user = django_user_model.objects.create_user(username=name, password="a-long-password")
    if tenant is not None and role is not None:
        membership_set(tenant=tenant, user=user, role=role)
    return user


def _secret_on(page: str) -> str:
    found = re.search(r'<code id="the-secret"[^>]*>([^<]+)</code>', page)
    assert found, page
    return found.group(1)


@pytest.fixture
def tenant() -> Tenant:
    return tenant_factory(slug="acme")


@pytest.fixture
def admin(django_user_model: Any, tenant: Tenant) -> Any:
    return _user(django_user_model, tenant, "admin", "ada")


@pytest.fixture
def member(django_user_model: Any, tenant: Tenant) -> Any:
    return _user(django_user_model, tenant, "member", "max")


# API keys


def test_an_admin_issues_a_key_and_sees_its_secret_once(client: Client, tenant: Tenant, admin: Any) -> None:
    team = team_factory(tenant=tenant, slug="data")
    client.force_login(admin)
    expiry = (timezone.now() + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M")
    posted = client.post("/console/t/acme/keys/new/", {"name": "ci", "team": team.pk, "expires_at": expiry,
                                                       "scopes": "tools:call, read  write"})
    key = ApiKey.objects.get(tenant=tenant, name="ci")
    # Post/redirect/get: reloading the page that shows the secret issues no second key.
    assert posted.status_code == 302 and posted["Location"] == f"/console/t/acme/keys/{key.pk}/created/"
    response = client.get(posted["Location"])
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    page = response.content.decode()
    secret = _secret_on(page)
    assert "shown only this once" in page and 'data-copy="#the-secret"' in page
    assert key.secret_hash == key_hash(secret) and key.owner == admin and key.team == team
    assert key.scopes == ["read", "tools:call", "write"] and key.expires_at is not None
    # Never again: not on a reload, nor the list, nor the edit page; and never in the stored session.
    reloaded = client.get(posted["Location"])
    assert reloaded.status_code == 200 and secret not in reloaded.content.decode()
    assert "was shown once" in reloaded.content.decode() and ApiKey.objects.filter(tenant=tenant).count() == 1
    assert secret not in client.get("/console/t/acme/keys/").content.decode()
    assert secret not in client.get(f"/console/t/acme/keys/{key.pk}/edit/").content.decode()


def test_the_secret_kept_for_its_one_showing_is_encrypted_and_for_its_issuer_only(
    client: Client, tenant: Tenant, admin: Any, member: Any
) -> None:
    client.force_login(admin)
    posted = client.post("/console/t/acme/keys/new/", {"name": "ci", "scopes": ""})
    session = SessionStore(session_key=client.cookies[settings.SESSION_COOKIE_NAME].value)
    stored = json.dumps(session.load())
    key = ApiKey.objects.get(tenant=tenant, name="ci")
    assert key.prefix[:8] not in stored and "mgw_" not in stored  # kept encrypted, until it is shown
    # Another user (a member, who may not manage the admin's key) never gets it.
    other = Client()
    other.force_login(member)
    assert other.get(posted["Location"]).status_code == 403
    assert key.secret_hash == key_hash(_secret_on(client.get(posted["Location"]).content.decode()))


def test_a_refused_key_keeps_nothing_and_says_why(client: Client, tenant: Tenant, admin: Any) -> None:
    api_key_issue(tenant=tenant, name="taken")
    client.force_login(admin)
    response = client.post("/console/t/acme/keys/new/", {"name": "taken", "scopes": ""})
    assert response.status_code == 400 and "already exists" in response.content.decode()
    past = (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    response = client.post("/console/t/acme/keys/new/", {"name": "old", "expires_at": past})
    assert response.status_code == 400 and "must be in the future" in response.content.decode()
    response = client.post("/console/t/acme/keys/new/", {"name": "bad", "scopes": "ok not*ok"})
    assert response.status_code == 400 and "not*ok" in response.content.decode()
    assert list(ApiKey.objects.filter(tenant=tenant).values_list("name", flat=True)) == ["taken"]


def test_a_team_of_another_tenant_is_no_choice(client: Client, tenant: Tenant, admin: Any) -> None:
    foreign = team_factory(tenant=tenant_factory(), slug="foreign")
    client.force_login(admin)
    assert "foreign" not in client.get("/console/t/acme/keys/new/").content.decode()
    response = client.post("/console/t/acme/keys/new/", {"name": "k", "team": foreign.pk})
    assert response.status_code == 400 and "valid choice" in response.content.decode()
    key = api_key_issue(tenant=tenant, name="mine").api_key
    response = client.post(f"/console/t/acme/keys/{key.pk}/edit/", {"team": foreign.pk})
    assert response.status_code == 400
    key.refresh_from_db()
    assert key.team is None


def test_an_admin_edits_and_revokes_a_key(client: Client, tenant: Tenant, admin: Any) -> None:
    team = team_factory(tenant=tenant, slug="ops")
    key = api_key_issue(tenant=tenant, name="deploy", scopes=["a"]).api_key
    client.force_login(admin)
    response = client.post(f"/console/t/acme/keys/{key.pk}/edit/", {"team": team.pk, "scopes": "b c"})
    assert response.status_code == 302
    key.refresh_from_db()
    assert (key.team, key.scopes, key.expires_at) == (team, ["b", "c"], None)
    confirm = client.get(f"/console/t/acme/keys/{key.pk}/revoke/").content.decode()
    assert "Revoke key deploy?" in confirm and "stops working" in confirm
    assert client.post(f"/console/t/acme/keys/{key.pk}/revoke/").status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert "revoked" in client.get("/console/t/acme/keys/").content.decode()


def test_members_see_and_manage_only_their_own_keys(client: Client, tenant: Tenant, member: Any,
                                                     django_user_model: Any) -> None:
    other = _user(django_user_model, tenant, "member", "olga")
    theirs = api_key_issue(tenant=tenant, name="olgas-key", owner=other).api_key
    unowned = api_key_issue(tenant=tenant, name="config-key").api_key
    client.force_login(member)
    response = client.post("/console/t/acme/keys/new/", {"name": "maxs-key"})
    mine = ApiKey.objects.get(name="maxs-key")
    assert response.status_code == 302 and client.get(response["Location"]).status_code == 200
    assert mine.owner == member
    assert client.get(f"/console/t/acme/keys/{theirs.pk}/created/").status_code == 403
    page = client.get("/console/t/acme/keys/").content.decode()
    assert "maxs-key" in page and "olgas-key" not in page and "config-key" not in page
    for key in (theirs, unowned):
        assert client.get(f"/console/t/acme/keys/{key.pk}/edit/").status_code == 403
        assert client.post(f"/console/t/acme/keys/{key.pk}/edit/", {"scopes": "x"}).status_code == 403
        assert client.post(f"/console/t/acme/keys/{key.pk}/revoke/").status_code == 403
        key.refresh_from_db()
        assert key.revoked_at is None and key.scopes == []
    assert client.post(f"/console/t/acme/keys/{mine.pk}/edit/", {"scopes": "mine"}).status_code == 302
    assert client.post(f"/console/t/acme/keys/{mine.pk}/revoke/").status_code == 302
    mine.refresh_from_db()
    assert mine.scopes == ["mine"] and mine.revoked_at is not None


def test_keys_of_another_tenant_are_not_found(client: Client, tenant: Tenant, admin: Any) -> None:
    other = tenant_factory(slug="other")
    foreign = api_key_issue(tenant=other, name="foreign").api_key
    client.force_login(admin)
    assert client.get("/console/t/other/keys/").status_code == 404
    assert client.post("/console/t/other/keys/new/", {"name": "sneaky"}).status_code == 404
    # Another tenant's key id under my tenant: not found either.
    assert client.get(f"/console/t/acme/keys/{foreign.pk}/edit/").status_code == 404
    assert client.post(f"/console/t/acme/keys/{foreign.pk}/revoke/").status_code == 404
    foreign.refresh_from_db()
    assert foreign.revoked_at is None and not ApiKey.objects.filter(name="sneaky").exists()


def test_anonymous_visitors_are_sent_to_sign_in(client: Client, tenant: Tenant) -> None:
    for url in ("/console/t/acme/keys/", "/console/t/acme/teams/", "/console/t/acme/members/", "/console/tokens/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/console/login/")


def test_every_form_needs_the_csrf_token(tenant: Tenant, admin: Any) -> None:
    key = api_key_issue(tenant=tenant, name="k", owner=admin).api_key
    team = team_factory(tenant=tenant)
    membership = Membership.objects.get(user=admin)
    token = admin_token_issue(user=admin, name="t").admin_token
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    posts = {
        "/console/t/acme/keys/new/": {"name": "x"},
        f"/console/t/acme/keys/{key.pk}/edit/": {"scopes": "x"},
        f"/console/t/acme/keys/{key.pk}/revoke/": {},
        "/console/t/acme/teams/": {"slug": "x"},
        f"/console/t/acme/teams/{team.pk}/delete/": {},
        "/console/t/acme/members/add/": {"username": "ada", "role": "member"},
        f"/console/t/acme/members/{membership.pk}/role/": {"role": "member"},
        f"/console/t/acme/members/{membership.pk}/remove/": {},
        "/console/tokens/": {"name": "x"},
        f"/console/tokens/{token.pk}/revoke/": {},
    }
    for url, data in posts.items():
        assert client.post(url, data).status_code == 403, url
    key.refresh_from_db()
    assert key.revoked_at is None and Team.objects.filter(pk=team.pk).exists()
    assert Membership.objects.get(pk=membership.pk).role == "admin"


def test_lists_are_paginated_with_a_bounded_query_count(client: Client, tenant: Tenant, admin: Any,
                                                        django_user_model: Any,
                                                        django_assert_max_num_queries: Any) -> None:
    team = team_factory(tenant=tenant, slug="t")
    users = django_user_model.objects.bulk_create(
        [django_user_model(username=f"u{i:03}") for i in range(60)])
    Membership.objects.bulk_create([Membership(tenant=tenant, user=u, role="member") for u in users])
    ApiKey.objects.bulk_create([
        ApiKey(tenant=tenant, name=f"k{i:03}", prefix="mgw_x", secret_hash=f"{i:064}", team=team, owner=users[i])
        for i in range(60)])
    Team.objects.bulk_create([Team(tenant=tenant, slug=f"team-{i:03}") for i in range(60)])
    AdminToken.objects.bulk_create([
        AdminToken(user=admin, name=f"t{i:03}", prefix="gwa_x", secret_hash=f"{i:064}") for i in range(60)])
    client.force_login(admin)
    for url, first, second in (("/console/t/acme/keys/", "k000", "k055"),
                               ("/console/t/acme/teams/", "team-000", "team-055"),
                               ("/console/t/acme/members/", "u000", "u055"),
                               ("/console/tokens/", "t000", "t055")):
        with django_assert_max_num_queries(12):
            page = client.get(url).content.decode()
        assert first in page and second not in page and "Page 1 of 2" in page, url
        assert second in client.get(url + "?page=2").content.decode()


# Teams


def test_admins_create_and_delete_teams_members_only_read(client: Client, tenant: Tenant, admin: Any,
                                                          member: Any) -> None:
    client.force_login(admin)
    assert client.post("/console/t/acme/teams/", {"slug": "data"}).status_code == 302
    refused = client.post("/console/t/acme/teams/", {"slug": "Not A Slug"})
    assert refused.status_code == 400 and "lowercase" in refused.content.decode()
    team = Team.objects.get(tenant=tenant, slug="data")
    key = api_key_issue(tenant=tenant, name="k", team=team).api_key
    assert "1 key stay" in client.get(f"/console/t/acme/teams/{team.pk}/delete/").content.decode()
    client.force_login(member)
    assert "data" in client.get("/console/t/acme/teams/").content.decode()
    assert client.post("/console/t/acme/teams/", {"slug": "mine"}).status_code == 403
    assert client.get(f"/console/t/acme/teams/{team.pk}/delete/").status_code == 403
    assert client.post(f"/console/t/acme/teams/{team.pk}/delete/").status_code == 403
    client.force_login(admin)
    assert client.post(f"/console/t/acme/teams/{team.pk}/delete/").status_code == 302
    key.refresh_from_db()
    assert key.team is None and not Team.objects.filter(slug__in=["data", "mine"]).exists()


def test_teams_of_another_tenant_are_not_found(client: Client, tenant: Tenant, admin: Any) -> None:
    foreign = team_factory(tenant=tenant_factory(), slug="foreign")
    client.force_login(admin)
    assert client.post(f"/console/t/acme/teams/{foreign.pk}/delete/").status_code == 404
    assert Team.objects.filter(pk=foreign.pk).exists()


# Members


def test_an_admin_adds_changes_and_removes_members(client: Client, tenant: Tenant, admin: Any,
                                                    django_user_model: Any) -> None:
    bea = _user(django_user_model, None, None, "bea")
    client.force_login(admin)
    assert client.post("/console/t/acme/members/add/", {"username": "bea", "role": "member"}).status_code == 302
    membership = Membership.objects.get(tenant=tenant, user=bea)
    assert membership.role == "member"
    unknown = client.post("/console/t/acme/members/add/", {"username": "nobody", "role": "member"})
    assert unknown.status_code == 400 and "no console user" in unknown.content.decode()
    assert client.post(f"/console/t/acme/members/{membership.pk}/role/", {"role": "admin"}).status_code == 302
    assert Membership.objects.get(pk=membership.pk).role == "admin"
    assert "bea loses access" in client.get(f"/console/t/acme/members/{membership.pk}/remove/").content.decode()
    assert client.post(f"/console/t/acme/members/{membership.pk}/remove/").status_code == 302
    assert not Membership.objects.filter(pk=membership.pk).exists()
    # Only platform admins create console users.
    assert "Create a console user" not in client.get("/console/t/acme/members/").content.decode()
    response = client.post("/console/t/acme/members/new-user/", {"new_username": "cy", "password": "x" * 20,
                                                                  "new_role": "member"})
    assert response.status_code == 403 and not django_user_model.objects.filter(username="cy").exists()


def test_members_of_a_tenant_read_its_members_but_change_nothing(client: Client, tenant: Tenant, admin: Any,
                                                                 member: Any) -> None:
    client.force_login(member)
    page = client.get("/console/t/acme/members/").content.decode()
    assert "ada" in page and "Add a member" not in page
    mine = Membership.objects.get(user=member)
    theirs = Membership.objects.get(user=admin)
    assert client.post(f"/console/t/acme/members/{mine.pk}/role/", {"role": "admin"}).status_code == 403
    assert client.post(f"/console/t/acme/members/{theirs.pk}/remove/").status_code == 403
    assert client.post("/console/t/acme/members/add/", {"username": "max", "role": "admin"}).status_code == 403
    assert Membership.objects.get(pk=mine.pk).role == "member" and Membership.objects.filter(pk=theirs.pk).exists()


def test_memberships_of_another_tenant_are_not_found(client: Client, tenant: Tenant, admin: Any,
                                                     django_user_model: Any) -> None:
    other = tenant_factory()
    outsider = _user(django_user_model, other, "member", "out")
    foreign = Membership.objects.get(user=outsider)
    client.force_login(admin)
    assert client.post(f"/console/t/acme/members/{foreign.pk}/role/", {"role": "admin"}).status_code == 404
    assert client.post(f"/console/t/acme/members/{foreign.pk}/remove/").status_code == 404
    assert Membership.objects.get(pk=foreign.pk).role == "member"
    assert client.get(f"/console/t/{other.slug}/members/").status_code == 404


def test_a_platform_admin_creates_a_user_with_a_checked_password(admin_client: Client, tenant: Tenant,
                                                                  django_user_model: Any, settings: Any) -> None:
    settings.AUTH_PASSWORD_VALIDATORS = [
        {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}}]
    assert "Create a console user" in admin_client.get("/console/t/acme/members/").content.decode()
    short = admin_client.post("/console/t/acme/members/new-user/",
                              {"new_username": "cy", "password": "short", "new_role": "admin"})
    assert short.status_code == 400 and "too short" in short.content.decode()
    assert not django_user_model.objects.filter(username="cy").exists()
    made = admin_client.post("/console/t/acme/members/new-user/",
                             {"new_username": "cy", "password": "a-long-enough-one", "new_role": "admin"})
    assert made.status_code == 302
    cy = django_user_model.objects.get(username="cy")
    assert cy.check_password("a-long-enough-one") and Membership.objects.get(user=cy, tenant=tenant).role == "admin"
    again = admin_client.post("/console/t/acme/members/new-user/",
                              {"new_username": "cy", "password": "a-long-enough-one", "new_role": "admin"})
    assert again.status_code == 400 and "already exists" in again.content.decode()


# My API tokens


def test_every_user_manages_their_own_tokens(client: Client, django_user_model: Any) -> None:
    lone = _user(django_user_model, None, None, "lone")  # no tenant at all
    other = _user(django_user_model, None, None, "other")
    theirs = admin_token_issue(user=other, name="theirs").admin_token
    client.force_login(lone)
    posted = client.post("/console/tokens/", {"name": "terraform"})
    token = AdminToken.objects.get(user=lone, name="terraform")
    assert posted.status_code == 302 and posted["Location"] == f"/console/tokens/{token.pk}/created/"
    response = client.get(posted["Location"])
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    secret = _secret_on(response.content.decode())
    assert secret not in client.get(posted["Location"]).content.decode()  # a reload: shown once
    assert token.secret_hash == key_hash(secret) and secret.startswith("gwa_")
    page = client.get("/console/tokens/").content.decode()
    assert "terraform" in page and secret not in page and "theirs" not in page
    again = client.post("/console/tokens/", {"name": "terraform"})
    assert again.status_code == 400 and "already have a token" in again.content.decode()
    assert client.post(f"/console/tokens/{theirs.pk}/revoke/").status_code == 404
    assert client.post(f"/console/tokens/{token.pk}/revoke/").status_code == 302
    token.refresh_from_db()
    theirs.refresh_from_db()
    assert token.revoked_at is not None and theirs.revoked_at is None


def test_a_secret_whose_page_is_never_opened_is_forgotten(
    client: Client, tenant: Tenant, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from apps.console import shown_once

    client.force_login(admin)
    posted = client.post("/console/t/acme/keys/new/", {"name": "ci", "scopes": ""})
    later = time.time() + shown_once.SHOWN_ONCE_SECONDS + 1
    monkeypatch.setattr(shown_once.time, "time", lambda: later)
    page = client.get(posted["Location"]).content.decode()
    assert "was shown once" in page and "mgw_" not in page
    session = SessionStore(session_key=client.cookies[settings.SESSION_COOKIE_NAME].value)
    assert session.load().get("console:shown-once") == {}  # nothing of it is left in the session
