"""What the authorization server no longer needs goes (Celery beat, hourly); what it still needs stays."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from apps.oauth.models import AuthorizationCode, Grant, OAuthClient, RefreshToken
from apps.oauth.services import oauth_rows_prune
from tests.factories import tenant_factory

pytestmark = pytest.mark.django_db


def test_spent_and_long_revoked_rows_go_and_live_ones_stay() -> None:
    now = timezone.now()
    tenant = tenant_factory()
    user = get_user_model().objects.create_user(username="ana", password="pw")
    client = OAuthClient.objects.create(tenant=tenant, client_id="gwc_x", kind="registered", redirect_uris=["https://a.example/cb"])
    live = Grant.objects.create(tenant=tenant, user=user, client=client, resource="http://127.0.0.1/mcp/t/main")
    old = Grant.objects.create(tenant=tenant, user=user, client=client, resource="http://127.0.0.1/mcp/t/main",
                               revoked_at=now - timedelta(days=31))
    recent = Grant.objects.create(tenant=tenant, user=user, client=client, resource="http://127.0.0.1/mcp/t/main",
                                  revoked_at=now - timedelta(days=2))

    def code(name: str, grant: Grant, expires: timedelta) -> None:
        AuthorizationCode.objects.create(grant=grant, code_hash=name, redirect_uri="https://a.example/cb",
                                         code_challenge="c", expires_at=now + expires)

    def token(name: str, grant: Grant, expires: timedelta, replaced: timedelta | None = None) -> None:
        RefreshToken.objects.create(grant=grant, token_hash=name, expires_at=now + expires,
                                    replaced_at=now + replaced if replaced is not None else None)

    code("fresh", live, timedelta(minutes=5))
    code("stale", live, -timedelta(days=2))
    code("of-old", old, timedelta(minutes=5))
    token("current", live, timedelta(days=29))
    token("replaced-long-ago", live, timedelta(days=29), replaced=-timedelta(days=2))
    token("replaced-just-now", live, timedelta(days=29), replaced=-timedelta(minutes=1))  # reuse is still detected
    token("expired", live, -timedelta(days=2))
    assert oauth_rows_prune(now=now) == {"codes": 1, "refresh_tokens": 2, "grants": 1}  # (the old grant took its code)
    assert set(AuthorizationCode.objects.values_list("code_hash", flat=True)) == {"fresh"}
    assert set(RefreshToken.objects.values_list("token_hash", flat=True)) == {"current", "replaced-just-now"}
    assert set(Grant.objects.values_list("pk", flat=True)) == {live.pk, recent.pk}
