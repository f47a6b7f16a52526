"""`apps.tenants.access`: roles, and admin tokens for the REST API."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.test import Client
from django.utils import timezone

from apps.tenants.access import access_get, tenant_get_for, tenant_list_for
from apps.tenants.models import AdminToken
from apps.tenants.services import admin_token_issue, admin_token_revoke, api_key_issue, membership_set
from tests.factories import openapi_backend_factory, tenant_factory

pytestmark = pytest.mark.django_db


def test_roles_decide_what_a_user_sees_and_changes(django_user_model: Any, django_assert_num_queries: Any) -> None:
    a, b, c = tenant_factory(), tenant_factory(), tenant_factory()
    user = django_user_model.objects.create_user(username="u", password="pw")
    membership_set(tenant=a, user=user, role="admin")
    membership_set(tenant=b, user=user, role="member")
    with django_assert_num_queries(1):
        access = access_get(user=user)
    assert (access.sees(a.pk), access.sees(b.pk), access.sees(c.pk)) == (True, True, False)
    assert (access.manages(a.pk), access.manages(b.pk)) == (True, False)
    assert [t.slug for t in tenant_list_for(access=access)] == sorted([a.slug, b.slug])
    assert tenant_get_for(access=access, slug=b.slug) == b
    with pytest.raises(PermissionDenied):
        tenant_get_for(access=access, slug=b.slug, manage=True)
    with pytest.raises(Http404):
        tenant_get_for(access=access, slug=c.slug)
    root = access_get(user=django_user_model.objects.create_superuser(username="r", password="pw"))
    assert root.manages(c.pk) and tenant_list_for(access=root).count() >= 3


def test_members_manage_only_their_own_keys(django_user_model: Any) -> None:
    tenant = tenant_factory()
    member, other = (django_user_model.objects.create_user(username=n, password="pw") for n in ("m", "o"))
    membership_set(tenant=tenant, user=member, role="member")
    access = access_get(user=member)
    own = api_key_issue(tenant=tenant, name="own", owner=member).api_key
    theirs = api_key_issue(tenant=tenant, name="theirs", owner=other).api_key
    unowned = api_key_issue(tenant=tenant, name="config").api_key
    assert [access.manages_key(k) for k in (own, theirs, unowned)] == [True, False, False]


def test_an_inactive_user_has_no_access(django_user_model: Any) -> None:
    tenant = tenant_factory()
    user = django_user_model.objects.create_user(username="gone", password="pw", is_active=False)
    membership_set(tenant=tenant, user=user, role="admin")
    assert not access_get(user=user).sees(tenant.pk)


def test_admin_tokens_act_as_their_user_until_revoked_or_expired(django_user_model: Any) -> None:
    backend = openapi_backend_factory()
    user = django_user_model.objects.create_user(username="bot", password="pw")
    membership_set(tenant=backend.tenant, user=user, role="admin")
    issued = admin_token_issue(user=user, name="ci")
    assert issued.secret.startswith("gwa_") and issued.secret not in repr(issued)
    assert AdminToken.objects.get().secret_hash != issued.secret
    url = f"/api/v1/tenants/{backend.tenant.slug}/backends/{backend.pk}/specs"
    assert Client(HTTP_AUTHORIZATION=f"Bearer {issued.secret}").get(url).status_code == 200
    assert AdminToken.objects.get().last_used_at is not None
    assert Client(HTTP_AUTHORIZATION="Bearer gwa_not-a-token").get(url).status_code == 401
    expired = admin_token_issue(user=user, name="old", expires_at=timezone.now() - timedelta(seconds=1))
    assert Client(HTTP_AUTHORIZATION=f"Bearer {expired.secret}").get(url).status_code == 401
    admin_token_revoke(admin_token=issued.admin_token)
    assert Client(HTTP_AUTHORIZATION=f"Bearer {issued.secret}").get(url).status_code == 401
    # The token's user's roles apply: another tenant stays unseen.
    other = openapi_backend_factory()
    fresh = admin_token_issue(user=user, name="new").secret
    assert Client(HTTP_AUTHORIZATION=f"Bearer {fresh}").get(
        f"/api/v1/tenants/{other.tenant.slug}/backends/{other.pk}/specs").status_code == 404
