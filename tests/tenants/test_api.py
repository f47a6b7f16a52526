"""The tenants REST API: teams, members and keys under a tenant; tenants, plans and the caller's own
admin tokens at the top. The same isolation as the console's pages."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.tenants.keys import key_hash
from apps.tenants.models import AdminToken, ApiKey, Membership, Plan, Team, Tenant
from apps.tenants.services import admin_token_issue, api_key_issue, membership_set, plan_set, tenant_plan_set
from tests.factories import team_factory, tenant_factory

pytestmark = pytest.mark.django_db


def _bearer(user: Any) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {admin_token_issue(user=user, name='test').secret}"}


@pytest.fixture
def tenant() -> Tenant:
    return tenant_factory(slug="acme")


@pytest.fixture
def admin(django_user_model: Any, tenant: Tenant) -> Any:
    user = django_user_model.objects.create_user(username="ada", password="pw")
    membership_set(tenant=tenant, user=user, role="admin")
    return user


@pytest.fixture
def member(django_user_model: Any, tenant: Tenant) -> Any:
    user = django_user_model.objects.create_user(username="max", password="pw")
    membership_set(tenant=tenant, user=user, role="member")
    return user


def test_anonymous_callers_get_401(client: Client, tenant: Tenant) -> None:
    for url in ("/api/v1/tenants/acme/keys", "/api/v1/tenants/acme/teams", "/api/v1/tenants/acme/members",
                "/api/v1/tenants", "/api/v1/plans", "/api/v1/me/tokens"):
        assert client.get(url).status_code == 401, url
    assert client.get("/api/v1/me/tokens", HTTP_AUTHORIZATION="Bearer gwa_wrong").status_code == 401


def test_an_admin_issues_a_key_whose_secret_is_answered_once(client: Client, tenant: Tenant, admin: Any) -> None:
    team_factory(tenant=tenant, slug="data")
    auth = _bearer(admin)
    response = client.post("/api/v1/tenants/acme/keys", {"name": "ci", "team": "data", "scopes": ["tools:call"],
                                                         "expires_at": "2099-01-01T00:00:00Z"},
                           content_type="application/json", **auth)
    assert response.status_code == 201, response.content
    body = response.json()
    key = ApiKey.objects.get(pk=body["id"])
    assert key.secret_hash == key_hash(body["secret"]) and key.owner == admin
    assert (body["team"], body["owner"], body["scopes"], body["state"]) == ("data", "ada", ["tools:call"], "active")
    listed = client.get("/api/v1/tenants/acme/keys", **auth).json()
    assert listed["count"] == 1 and "secret" not in listed["results"][0]
    assert "secret" not in client.get(f"/api/v1/tenants/acme/keys/{key.pk}", **auth).json()

    patched = client.patch(f"/api/v1/tenants/acme/keys/{key.pk}", {"team": None, "scopes": ["a", "b"]},
                           content_type="application/json", **auth)
    assert patched.status_code == 200 and (patched.json()["team"], patched.json()["scopes"]) == (None, ["a", "b"])
    assert patched.json()["expires_at"].startswith("2099")
    revoked = client.post(f"/api/v1/tenants/acme/keys/{key.pk}/revoke", **auth)
    assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"


def test_bad_key_input_is_refused_with_a_reason(client: Client, tenant: Tenant, admin: Any) -> None:
    api_key_issue(tenant=tenant, name="taken")
    foreign_team = team_factory(tenant=tenant_factory(), slug="foreign")
    auth = _bearer(admin)
    for data, reason in (({"name": "taken"}, "already exists"),
                         ({"name": "x", "team": foreign_team.slug}, "no team 'foreign'"),
                         ({"name": "x", "scopes": ["bad scope"]}, "a scope is 1-64"),
                         ({"name": ""}, "name"),
                         ({"name": "x", "expires_at": "soon"}, "expires_at"),
                         ({"name": "x", "expires_at": "2001-01-01T00:00:00Z"}, "expires_at: must be in the future")):
        response = client.post("/api/v1/tenants/acme/keys", data, content_type="application/json", **auth)
        assert response.status_code == 400 and reason in response.json()["detail"], (data, response.content)
    assert list(ApiKey.objects.values_list("name", flat=True)) == ["taken"]


def test_members_reach_only_their_own_keys(client: Client, tenant: Tenant, admin: Any, member: Any) -> None:
    theirs = api_key_issue(tenant=tenant, name="admins", owner=admin).api_key
    auth = _bearer(member)
    created = client.post("/api/v1/tenants/acme/keys", {"name": "mine"}, content_type="application/json", **auth)
    assert created.status_code == 201
    mine = created.json()["id"]
    listed = client.get("/api/v1/tenants/acme/keys", **auth).json()
    assert [k["name"] for k in listed["results"]] == ["mine"]
    assert client.get(f"/api/v1/tenants/acme/keys/{theirs.pk}", **auth).status_code == 404
    assert client.post(f"/api/v1/tenants/acme/keys/{theirs.pk}/revoke", **auth).status_code == 403
    assert client.patch(f"/api/v1/tenants/acme/keys/{theirs.pk}", {"scopes": ["x"]},
                        content_type="application/json", **auth).status_code == 403
    theirs.refresh_from_db()
    assert theirs.revoked_at is None and theirs.scopes == []
    assert client.post(f"/api/v1/tenants/acme/keys/{mine}/revoke", **auth).status_code == 200
    # Teams and members: read, never write.
    assert client.get("/api/v1/tenants/acme/teams", **auth).status_code == 200
    assert client.post("/api/v1/tenants/acme/teams", {"slug": "t"}, content_type="application/json",
                       **auth).status_code == 403
    assert client.post("/api/v1/tenants/acme/members", {"username": "max", "role": "admin"},
                       content_type="application/json", **auth).status_code == 403
    assert Membership.objects.get(user=member).role == "member" and not Team.objects.exists()


def test_another_tenants_objects_are_not_found(client: Client, tenant: Tenant, admin: Any,
                                               django_user_model: Any) -> None:
    other = tenant_factory(slug="other")
    key = api_key_issue(tenant=other, name="foreign").api_key
    team = team_factory(tenant=other)
    outsider = django_user_model.objects.create_user(username="out", password="pw")
    membership = membership_set(tenant=other, user=outsider, role="member")
    auth = _bearer(admin)
    for url in ("/api/v1/tenants/other/keys", "/api/v1/tenants/other/teams", "/api/v1/tenants/other/members",
                "/api/v1/tenants/other", f"/api/v1/tenants/acme/keys/{key.pk}", f"/api/v1/tenants/acme/teams/{team.pk}",
                f"/api/v1/tenants/acme/members/{membership.pk}"):
        assert client.get(url, **auth).status_code == 404, url
    assert client.post(f"/api/v1/tenants/acme/keys/{key.pk}/revoke", **auth).status_code == 404
    assert client.delete(f"/api/v1/tenants/acme/teams/{team.pk}", **auth).status_code == 404
    assert client.delete(f"/api/v1/tenants/acme/members/{membership.pk}", **auth).status_code == 404
    assert client.post("/api/v1/tenants/other/keys", {"name": "x"}, content_type="application/json",
                       **auth).status_code == 404
    key.refresh_from_db()
    assert key.revoked_at is None and Team.objects.filter(pk=team.pk).exists()
    assert Membership.objects.filter(pk=membership.pk).exists()
    assert [t["slug"] for t in client.get("/api/v1/tenants", **auth).json()["results"]] == ["acme"]


def test_an_admin_manages_teams_and_members(client: Client, tenant: Tenant, admin: Any,
                                            django_user_model: Any) -> None:
    django_user_model.objects.create_user(username="bea", password="pw")
    auth = _bearer(admin)
    team = client.post("/api/v1/tenants/acme/teams", {"slug": "data"}, content_type="application/json", **auth)
    assert team.status_code == 201 and team.json()["slug"] == "data"
    bad = client.post("/api/v1/tenants/acme/teams", {"slug": "Bad Slug"}, content_type="application/json", **auth)
    assert bad.status_code == 400 and "lowercase" in bad.json()["detail"]
    assert client.delete(f"/api/v1/tenants/acme/teams/{team.json()['id']}", **auth).status_code == 204
    added = client.post("/api/v1/tenants/acme/members", {"username": "bea", "role": "member"},
                        content_type="application/json", **auth)
    assert added.status_code == 201 and added.json()["username"] == "bea"
    unknown = client.post("/api/v1/tenants/acme/members", {"username": "nobody", "role": "member"},
                          content_type="application/json", **auth)
    assert unknown.status_code == 400 and "nobody" in unknown.json()["detail"]
    url = f"/api/v1/tenants/acme/members/{added.json()['id']}"
    assert client.patch(url, {"role": "admin"}, content_type="application/json", **auth).json()["role"] == "admin"
    assert client.patch(url, {"role": "owner"}, content_type="application/json", **auth).status_code == 400
    assert client.delete(url, **auth).status_code == 204
    assert list(Membership.objects.values_list("user__username", flat=True)) == ["ada"]


def test_session_writes_need_the_csrf_token(tenant: Tenant, admin: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    assert client.get("/api/v1/tenants/acme/keys").status_code == 200
    response = client.post("/api/v1/tenants/acme/keys", {"name": "x"}, content_type="application/json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    assert not ApiKey.objects.exists()


def test_platform_admins_manage_tenants_and_plans(client: Client, django_user_model: Any) -> None:
    auth = _bearer(django_user_model.objects.create_superuser(username="root", password="pw"))
    plan = client.post("/api/v1/plans", {"name": "pro", "daily": 100}, content_type="application/json", **auth)
    assert plan.status_code == 201 and plan.json()["monthly"] is None
    again = client.post("/api/v1/plans", {"name": "pro"}, content_type="application/json", **auth)
    assert again.status_code == 400 and "exists" in again.json()["detail"]
    replaced = client.put("/api/v1/plans/pro", {"monthly": 5000, "limits_editable": False},
                          content_type="application/json", **auth)
    assert (replaced.json()["daily"], replaced.json()["monthly"], replaced.json()["limits_editable"]) == (None, 5000,
                                                                                                         False)
    created = client.post("/api/v1/tenants", {"slug": "acme", "name": "Acme", "plan": "pro"},
                          content_type="application/json", **auth)
    assert created.status_code == 201 and created.json()["plan"] == "pro"
    dup = client.post("/api/v1/tenants", {"slug": "acme", "name": "x"}, content_type="application/json", **auth)
    assert dup.status_code == 400 and "already exists" in dup.json()["detail"]
    in_use = client.delete("/api/v1/plans/pro", **auth)
    assert in_use.status_code == 400 and "acme" in in_use.json()["detail"]
    patched = client.patch("/api/v1/tenants/acme", {"plan": None, "audit_arguments": "full"},
                           content_type="application/json", **auth)
    assert (patched.json()["plan"], patched.json()["audit_arguments"], patched.json()["name"]) == (None, "full", "Acme")
    assert client.delete("/api/v1/plans/pro", **auth).status_code == 204
    assert client.delete("/api/v1/tenants/acme", **auth).status_code == 204
    assert not Tenant.objects.exists() and not Plan.objects.exists()


def test_only_platform_admins_change_tenants_and_plans(client: Client, tenant: Tenant, admin: Any) -> None:
    plan = plan_set(name="pro", daily=1, monthly=None)
    tenant_plan_set(tenant=tenant, plan=plan)
    auth = _bearer(admin)
    assert client.get("/api/v1/tenants/acme", **auth).json()["plan"] == "pro"
    assert client.patch("/api/v1/tenants/acme", {"plan": None}, content_type="application/json",
                        **auth).status_code == 403
    assert client.delete("/api/v1/tenants/acme", **auth).status_code == 403
    assert client.post("/api/v1/tenants", {"slug": "mine", "name": "x"}, content_type="application/json",
                       **auth).status_code == 403
    assert client.put("/api/v1/plans/pro", {"daily": 999}, content_type="application/json", **auth).status_code == 403
    assert client.delete("/api/v1/plans/pro", **auth).status_code == 403
    tenant.refresh_from_db()
    assert tenant.plan == plan and Plan.objects.get(name="pro").daily == 1 and Tenant.objects.count() == 1


def test_every_user_manages_only_their_own_admin_tokens(client: Client, admin: Any, django_user_model: Any) -> None:
    other = django_user_model.objects.create_user(username="other", password="pw")
    theirs = admin_token_issue(user=other, name="theirs").admin_token
    client.force_login(admin)
    created = client.post("/api/v1/me/tokens", {"name": "terraform"}, content_type="application/json")
    assert created.status_code == 201 and created.json()["secret"].startswith("gwa_")
    token = AdminToken.objects.get(pk=created.json()["id"])
    assert token.user == admin and token.secret_hash == key_hash(created.json()["secret"])
    # The new token works on its own, and lists only the caller's tokens, without secrets.
    client.logout()
    listed = client.get("/api/v1/me/tokens", HTTP_AUTHORIZATION=f"Bearer {created.json()['secret']}").json()
    assert [t["name"] for t in listed["results"]] == ["terraform"] and "secret" not in listed["results"][0]
    client.force_login(admin)
    assert client.post(f"/api/v1/me/tokens/{theirs.pk}/revoke").status_code == 404
    assert client.post(f"/api/v1/me/tokens/{token.pk}/revoke").json()["revoked_at"] is not None
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_lists_are_paginated_with_a_bounded_query_count(client: Client, tenant: Tenant, admin: Any,
                                                        django_user_model: Any,
                                                        django_assert_max_num_queries: Any) -> None:
    team = team_factory(tenant=tenant)
    users = django_user_model.objects.bulk_create([django_user_model(username=f"u{i:03}") for i in range(60)])
    Membership.objects.bulk_create([Membership(tenant=tenant, user=u, role="member") for u in users])
    ApiKey.objects.bulk_create([
        ApiKey(tenant=tenant, name=f"k{i:03}", prefix="mgw_x", secret_hash=f"{i:064}", team=team, owner=users[i])
        for i in range(60)])
    Team.objects.bulk_create([Team(tenant=tenant, slug=f"team-{i:03}") for i in range(60)])
    client.force_login(admin)
    for url in ("/api/v1/tenants/acme/keys", "/api/v1/tenants/acme/teams", "/api/v1/tenants/acme/members"):
        with django_assert_max_num_queries(8):
            body = client.get(url).json()
        assert body["count"] >= 60 and len(body["results"]) == 50 and body["next"], url
        rest = client.get(url + "?limit=10&offset=55").json()
        assert len(rest["results"]) == body["count"] - 55 and rest["next"] is None


def test_tenant_and_plan_lists_are_paginated_with_a_bounded_query_count(
    admin_client: Client, django_assert_max_num_queries: Any
) -> None:
    plan = plan_set(name="basic", daily=None, monthly=None)
    Plan.objects.bulk_create([Plan(name=f"p-{i:03}") for i in range(60)])
    Tenant.objects.bulk_create([Tenant(slug=f"t-{i:03}", name="t", plan=plan) for i in range(60)])
    for url in ("/api/v1/tenants", "/api/v1/plans"):
        with django_assert_max_num_queries(6):
            body = admin_client.get(url).json()
        assert body["count"] >= 60 and len(body["results"]) == 50, url
    assert [t["slug"] for t in admin_client.get("/api/v1/tenants?q=t-05").json()["results"]] == [
        f"t-05{i}" for i in range(10)]
