"""The console's signed-in apps: a person sees and signs out their own; tenant admins everyone's."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.oauth.models import Grant, OAuthClient
from apps.oauth.services import authorization_server_enable
from apps.tenants.services import membership_set
from tests.factories import tenant_factory

pytestmark = pytest.mark.django_db


def _grant(tenant: Any, user: Any, name: str) -> Grant:
    client = OAuthClient.objects.create(tenant=tenant, client_id=f"gwc_{name}", kind="registered", client_name=name,
                                        redirect_uris=["https://a.example/cb"])
    return Grant.objects.create(tenant=tenant, user=user, client=client, resource=f"http://127.0.0.1/mcp/{tenant.slug}/main")


def test_people_see_and_sign_out_their_own_apps_and_admins_everyones(client: Client, django_user_model: Any) -> None:
    tenant = tenant_factory()
    authorization_server_enable(tenant=tenant)
    alice = django_user_model.objects.create_user(username="alice", password="pw")
    bob = django_user_model.objects.create_user(username="bob", password="pw")
    admin = django_user_model.objects.create_user(username="carol", password="pw")
    membership_set(tenant=tenant, user=alice, role="member")
    membership_set(tenant=tenant, user=bob, role="member")
    membership_set(tenant=tenant, user=admin, role="admin")
    mine, theirs = _grant(tenant, alice, "Alice's agent"), _grant(tenant, bob, "Bob's agent")
    url = f"/console/t/{tenant.slug}/signed-in-apps/"

    client.force_login(alice)
    page = client.get(url).content.decode()
    assert "Alice&#x27;s agent" in page and "Bob&#x27;s agent" not in page
    assert client.get(f"{url}{theirs.pk}/revoke/").status_code == 404
    assert client.post(f"{url}{theirs.pk}/revoke/").status_code == 404
    asked = client.get(f"{url}{mine.pk}/revoke/").content.decode()
    assert "Sign Alice&#x27;s agent out of" in asked
    assert Grant.objects.get(pk=mine.pk).revoked_at is None  # asking changes nothing
    assert client.post(f"{url}{mine.pk}/revoke/")["Location"] == url
    assert Grant.objects.get(pk=mine.pk).revoked_at is not None
    assert "No app is signed in." in client.get(url).content.decode()

    client.force_login(admin)
    page = client.get(url).content.decode()
    assert "Bob&#x27;s agent" in page and "<td>bob</td>" in page
    assert client.post(f"{url}{theirs.pk}/revoke/").status_code == 302
    assert Grant.objects.get(pk=theirs.pk).revoked_at is not None


def test_another_tenants_people_cannot_see_them(client: Client, django_user_model: Any) -> None:
    tenant, other = tenant_factory(), tenant_factory()
    alice = django_user_model.objects.create_user(username="alice", password="pw")
    membership_set(tenant=other, user=alice, role="admin")
    grant = _grant(tenant, alice, "Agent")
    client.force_login(alice)
    assert client.get(f"/console/t/{tenant.slug}/signed-in-apps/").status_code == 404
    assert client.post(f"/console/t/{other.slug}/signed-in-apps/{grant.pk}/revoke/").status_code == 404
    assert Grant.objects.get(pk=grant.pk).revoked_at is None


def test_tenant_admins_switch_signing_in(client: Client, django_user_model: Any) -> None:
    from apps.oauth.models import AuthorizationServer

    tenant = tenant_factory()
    admin = django_user_model.objects.create_user(username="carol", password="pw")
    member = django_user_model.objects.create_user(username="dave", password="pw")
    membership_set(tenant=tenant, user=admin, role="admin")
    membership_set(tenant=tenant, user=member, role="member")
    url = f"/console/t/{tenant.slug}/signed-in-apps/"
    client.force_login(member)
    assert 'aria-label="Authorization server"' not in client.get(url).content.decode()
    assert client.post(url + "server/", {"enabled": "on"}).status_code == 403
    assert not AuthorizationServer.objects.exists()
    client.force_login(admin)
    assert "is off: no app can sign in now" in client.get(url).content.decode()
    assert client.post(url + "server/", {"enabled": "on", "allow_registration": "on"})["Location"] == url
    server = AuthorizationServer.objects.get(tenant=tenant)
    assert (server.enabled, server.allow_registration, server.allow_metadata_documents) == (True, True, False)
    client.post(url + "server/", {})
    assert not AuthorizationServer.objects.get(tenant=tenant).enabled
    assert client.get(f"/.well-known/oauth-authorization-server/oauth/{tenant.slug}").status_code == 404


def test_tenant_admins_set_and_remove_the_identity_provider(client: Client, django_user_model: Any) -> None:
    from apps.oauth.models import IdentityProvider

    tenant = tenant_factory()
    admin = django_user_model.objects.create_user(username="erin", password="pw")
    member = django_user_model.objects.create_user(username="frank", password="pw")
    membership_set(tenant=tenant, user=admin, role="admin")
    membership_set(tenant=tenant, user=member, role="member")
    url = f"/console/t/{tenant.slug}/signed-in-apps/"
    form = {"issuer": "ftp://idp.example", "client_id": "gw", "client_secret": "s3cret-not-shown", "scope": "openid",
            "role": "member"}
    client.force_login(member)
    assert 'aria-label="Identity provider"' not in client.get(url).content.decode()
    assert client.post(url + "identity-provider/", form).status_code == 403
    client.force_login(admin)
    page = client.get(url).content.decode()
    assert f"/oauth/{tenant.slug}/sign-in/callback" in page  # the redirect URI to register at the provider
    refused = client.post(url + "identity-provider/", form)
    assert refused.status_code == 400 and "is not an https URL" in refused.content.decode()
    assert "s3cret-not-shown" not in refused.content.decode() and not IdentityProvider.objects.exists()
    unreachable = client.post(url + "identity-provider/", {**form, "issuer": "http://127.0.0.1:9/"})
    assert unreachable.status_code == 400 and "cannot be reached" in unreachable.content.decode()
    IdentityProvider.objects.create(tenant=tenant, issuer="https://idp.example", client_id="gw")
    assert "Stop signing people in" in client.get(url + "identity-provider/remove/").content.decode()
    assert IdentityProvider.objects.exists()  # asking first
    assert client.post(url + "identity-provider/remove/").status_code == 302 and not IdentityProvider.objects.exists()
