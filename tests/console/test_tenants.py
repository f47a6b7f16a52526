"""The platform pages: tenants and plans, for platform admins only."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.tenants.models import Plan, Tenant
from apps.tenants.services import api_key_issue, membership_set, plan_set, tenant_plan_set
from tests.factories import backend_factory, team_factory, tenant_factory

pytestmark = pytest.mark.django_db


def test_a_platform_admin_creates_edits_and_deletes_a_tenant(admin_client: Client) -> None:
    plan = plan_set(name="pro", daily=100, monthly=1000)
    assert admin_client.post("/console/tenants/new/", {"slug": "acme", "name": "Acme", "plan": plan.pk}).status_code == 302
    tenant = Tenant.objects.get(slug="acme")
    assert (tenant.name, tenant.plan) == ("Acme", plan)
    refused = admin_client.post("/console/tenants/new/", {"slug": "acme", "name": "Again"})
    assert refused.status_code == 400 and "already exists" in refused.content.decode()
    bad = admin_client.post("/console/tenants/new/", {"slug": "Not A Slug", "name": "x"})
    assert bad.status_code == 400 and "lowercase" in bad.content.decode()
    response = admin_client.post("/console/tenants/acme/", {"name": "Acme Inc", "plan": "", "audit_arguments": "hash"})
    assert response.status_code == 302
    tenant.refresh_from_db()
    assert (tenant.name, tenant.plan, tenant.audit_arguments) == ("Acme Inc", None, "hash")

    team_factory(tenant=tenant)
    api_key_issue(tenant=tenant, name="k1")
    api_key_issue(tenant=tenant, name="k2")
    backend_factory(tenant=tenant)
    confirm = admin_client.get("/console/tenants/acme/delete/").content.decode()
    assert "Delete tenant acme?" in confirm
    for line in ("teams: 1", "API keys: 2", "backends: 1", "virtual hosts: 0", "members: 0"):
        assert line in confirm
    assert admin_client.post("/console/tenants/acme/delete/").status_code == 302
    assert not Tenant.objects.filter(slug="acme").exists()


def test_the_tenant_list_is_searchable_paginated_and_bounded(admin_client: Client,
                                                             django_assert_max_num_queries: Any) -> None:
    plan = plan_set(name="basic", daily=None, monthly=None)
    Tenant.objects.bulk_create([Tenant(slug=f"t-{i:03}", name=f"T {i}", plan=plan) for i in range(60)])
    with django_assert_max_num_queries(8):
        page = admin_client.get("/console/tenants/").content.decode().split("<main")[1]  # not the tenant switcher
    assert "t-000" in page and "t-055" not in page and "Page 1 of 2" in page and "basic" in page
    page2 = admin_client.get("/console/tenants/?page=2").content.decode().split("<main")[1]
    assert "t-055" in page2
    found = admin_client.get("/console/tenants/?q=t-04").content.decode().split("<main")[1]
    assert "t-041" in found and "t-000" not in found
    assert "No tenant" in admin_client.get("/console/tenants/?q=zzz").content.decode()


def test_plans_are_created_edited_and_deleted_only_when_unused(admin_client: Client) -> None:
    assert admin_client.post("/console/plans/new/", {"name": "pro", "daily": "100", "monthly": "",
                                                     "limits_editable": "on"}).status_code == 302
    plan = Plan.objects.get(name="pro")
    assert (plan.daily, plan.monthly, plan.limits_editable) == (100, None, True)
    again = admin_client.post("/console/plans/new/", {"name": "pro", "daily": "1"})
    assert again.status_code == 400 and "exists" in again.content.decode()
    negative = admin_client.post("/console/plans/pro/", {"daily": "-1"})
    assert negative.status_code == 400
    assert admin_client.post("/console/plans/pro/", {"name": "ignored", "daily": "", "monthly": "5000"}).status_code == 302
    plan.refresh_from_db()
    assert (plan.name, plan.daily, plan.monthly, plan.limits_editable) == ("pro", None, 5000, False)
    assert not Plan.objects.filter(name="ignored").exists()

    tenant = tenant_factory(slug="on-pro")
    tenant_plan_set(tenant=tenant, plan=plan)
    page = admin_client.get("/console/plans/").content.decode()
    assert "pro" in page and "5000" in page
    refused = admin_client.post("/console/plans/pro/delete/", follow=True)
    assert "was not deleted" in refused.content.decode() and "on-pro" in refused.content.decode()
    assert Plan.objects.filter(name="pro").exists()
    tenant_plan_set(tenant=tenant, plan=None)
    admin_client.post("/console/plans/pro/delete/")
    assert not Plan.objects.filter(name="pro").exists()


def test_platform_pages_are_for_platform_admins_only(client: Client, django_user_model: Any) -> None:
    tenant = tenant_factory(slug="acme")
    plan_set(name="pro", daily=1, monthly=None)
    tenant_admin = django_user_model.objects.create_user(username="ta", password="pw")
    membership_set(tenant=tenant, user=tenant_admin, role="admin")
    client.force_login(tenant_admin)
    for url in ("/console/tenants/", "/console/tenants/new/", "/console/tenants/acme/", "/console/tenants/acme/delete/",
                "/console/plans/", "/console/plans/new/", "/console/plans/pro/", "/console/plans/pro/delete/"):
        assert client.get(url).status_code == 403, url
    assert client.post("/console/tenants/acme/delete/").status_code == 403
    assert client.post("/console/plans/pro/delete/").status_code == 403
    assert client.post("/console/tenants/new/", {"slug": "mine", "name": "x"}).status_code == 403
    assert Tenant.objects.filter(slug="acme").exists() and not Tenant.objects.filter(slug="mine").exists()
    assert "Tenants" not in client.get("/console/t/acme/keys/").content.decode().split("<main")[0]
    client.logout()
    assert client.get("/console/tenants/")["Location"].startswith("/console/login/")


def test_platform_forms_need_the_csrf_token(django_user_model: Any) -> None:
    tenant_factory(slug="acme")
    plan_set(name="pro", daily=1, monthly=None)
    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_superuser(username="root", password="pw"))
    for url, data in (("/console/tenants/new/", {"slug": "x", "name": "x"}),
                      ("/console/tenants/acme/", {"name": "y", "audit_arguments": "off"}),
                      ("/console/tenants/acme/delete/", {}),
                      ("/console/plans/new/", {"name": "y"}),
                      ("/console/plans/pro/", {"daily": "2"}),
                      ("/console/plans/pro/delete/", {})):
        assert client.post(url, data).status_code == 403, url
    assert Tenant.objects.filter(slug="acme").exists() and Plan.objects.get(name="pro").daily == 1


def test_unknown_tenants_and_plans_are_not_found(admin_client: Client) -> None:
    for url in ("/console/tenants/nope/", "/console/tenants/nope/delete/", "/console/plans/nope/",
                "/console/plans/nope/delete/"):
        assert admin_client.get(url).status_code == 404, url


def test_the_plan_list_is_paginated_and_bounded(admin_client: Client, django_assert_max_num_queries: Any) -> None:
    plans = Plan.objects.bulk_create([Plan(name=f"p-{i:03}", daily=i) for i in range(60)])
    Tenant.objects.bulk_create([Tenant(slug=f"t-{i:03}", name="t", plan=plans[0]) for i in range(3)])
    with django_assert_max_num_queries(8):
        page = admin_client.get("/console/plans/").content.decode()
    assert "p-000" in page and "p-055" not in page and "Page 1 of 2" in page
    assert '<td>3</td>' in page  # the tenants on p-000
    assert "p-055" in admin_client.get("/console/plans/?page=2").content.decode()
