"""What every REST API view shares: authentication (a console session, or an admin token sent as
`Authorization: Bearer gwa_…`), and the resolution of the tenant in the URL through
`apps.tenants.access`, so that no endpoint reaches an object of a tenant its caller may not see.

Errors answer `{"detail": "…"}`: 401 without credentials, 403 for a role that may not do it, 404
for a tenant or object the caller may not see (or that does not exist: the two look the same)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from rest_framework import status
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import SAFE_METHODS, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.tenants.access import Access, access_get, platform_admin_check, tenant_get_for
from apps.tenants.authentication import AdminTokenAuthentication
from apps.tenants.models import Tenant


def problem(message: str, status_code: int = status.HTTP_400_BAD_REQUEST) -> Response:
    return Response({"detail": message}, status=status_code)


def refused(error: ValidationError) -> Response:
    """A service's refusal, as 400 with its messages."""
    return problem("; ".join(error.messages))


class AccessAPIView(APIView):
    """Signed-in callers only; `self.access` says what they may do."""

    authentication_classes = [AdminTokenAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]
    access: Access

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.access = access_get(user=request.user)


class PlatformAPIView(AccessAPIView):
    """Platform admins only (tenants and plans); reads are open to every signed-in user that
    `get` lets through."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if request.method not in SAFE_METHODS:
            platform_admin_check(access=self.access)


class TenantAPIView(AccessAPIView):
    """`/api/v1/tenants/<tenant>/…`: `self.tenant` is the URL's tenant, which the caller may see.
    Writes need a tenant admin unless `members_write` (API keys: members manage their own)."""

    members_write = False
    tenant: Tenant

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        manage = request.method not in SAFE_METHODS and not self.members_write
        self.tenant = tenant_get_for(access=self.access, slug=kwargs["tenant"], manage=manage)
