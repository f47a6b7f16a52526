"""Signing in to the console, login throttling, and who reaches which tenant's pages."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.common.redis import redis_client
from apps.tenants.services import membership_set
from tests.factories import backend_factory, tenant_factory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_failures_counted() -> None:
    for key in redis_client().scan_iter("gw:login-fail*"):
        redis_client().delete(key)


def _sign_in(client: Client, username: str, password: str) -> Any:
    return client.post("/console/login/", {"username": username, "password": password})


def test_signing_in_lands_on_the_first_tenants_pages(client: Client, django_user_model: Any) -> None:
    user = django_user_model.objects.create_user(username="ana", password="a-long-password")
    tenant = tenant_factory(slug="acme")
    membership_set(tenant=tenant, user=user, role="admin")
    response = _sign_in(client, "ana", "a-long-password")
    assert response.status_code == 302
    home = client.get(response["Location"])
    assert home.status_code == 302 and home["Location"].startswith("/console/t/acme/")
    page = client.get(home["Location"]).content.decode()
    assert "acme" in page and "Log out" in page and "(admin)" in page


def test_a_user_without_a_tenant_is_told_so(client: Client, django_user_model: Any) -> None:
    client.force_login(django_user_model.objects.create_user(username="lone", password="pw"))
    assert "not a member of any tenant" in client.get("/console/").content.decode()


def test_wrong_passwords_are_throttled_per_username_and_address(client: Client, django_user_model: Any,
                                                                settings: Any) -> None:
    settings.CONSOLE_LOGIN_FAILURES_PER_USER = 3
    django_user_model.objects.create_user(username="bob", password="right-password")
    for _ in range(3):
        assert "Please enter a correct username" in _sign_in(client, "bob", "wrong").content.decode()
    refused = _sign_in(client, "bob", "right-password")  # even the right password waits now
    assert refused.status_code == 200 and "Too many failed sign-ins" in refused.content.decode()
    assert not client.session.get("_auth_user_id")
    # Another username from the same address is not locked by bob's failures.
    django_user_model.objects.create_user(username="carol", password="carols-password")
    assert _sign_in(client, "carol", "carols-password").status_code == 302


def test_sign_in_needs_the_csrf_token(django_user_model: Any) -> None:
    django_user_model.objects.create_user(username="dan", password="dans-password")
    client = Client(enforce_csrf_checks=True)
    assert _sign_in(client, "dan", "dans-password").status_code == 403


def test_logging_out_takes_a_post(client: Client, django_user_model: Any) -> None:
    client.force_login(django_user_model.objects.create_user(username="eve", password="pw"))
    assert client.get("/console/logout/").status_code == 405
    assert client.post("/console/logout/")["Location"] == "/console/login/"
    assert client.get("/console/")["Location"].startswith("/console/login/")


def test_a_tenant_is_reachable_only_by_its_members_and_platform_admins(client: Client, django_user_model: Any) -> None:
    mine, theirs = tenant_factory(), tenant_factory()
    backend_factory(tenant=theirs, name="secret-backend")
    user = django_user_model.objects.create_user(username="frank", password="pw")
    membership_set(tenant=mine, user=user, role="member")
    client.force_login(user)
    assert client.get(f"/console/t/{mine.slug}/backends/").status_code == 200
    response = client.get(f"/console/t/{theirs.slug}/backends/")
    assert response.status_code == 404 and b"secret-backend" not in response.content
    assert client.get("/console/t/no-such-tenant/backends/").status_code == 404
    # The tenant switcher offers only the user's own tenants.
    page = client.get(f"/console/t/{mine.slug}/backends/").content.decode()
    assert theirs.slug not in page
    admin = django_user_model.objects.create_superuser(username="root", password="pw")
    client.force_login(admin)
    assert b"secret-backend" in client.get(f"/console/t/{theirs.slug}/backends/").content
