"""REST API authentication by admin token. Kept apart from the views: DRF imports it from its
settings while `rest_framework.views` is still loading."""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from apps.tenants.keys import ADMIN_TOKEN_PREFIX
from apps.tenants.services import admin_token_authenticate


class AdminTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer gwa_…`: acts as the token's user, with that user's roles."""

    keyword = b"bearer"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        parts = get_authorization_header(request).split()
        if len(parts) != 2 or parts[0].lower() != self.keyword:
            return None
        secret = parts[1].decode("latin-1")
        if not secret.startswith(ADMIN_TOKEN_PREFIX):
            return None  # not ours (an MCP key, say): let another scheme or a 401 answer
        token = admin_token_authenticate(secret=secret)
        if token is None:
            raise AuthenticationFailed("The admin token is unknown, revoked or expired.")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'
