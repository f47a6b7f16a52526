"""The tenants REST API (DRF): teams, members and API keys under `/api/v1/tenants/<tenant>/`; tenants,
plans and the caller's own admin tokens under `/api/v1/`.

The same rules as the console's pages: tenant members read the tenant and manage only the API
keys they issued; tenant admins manage the tenant's teams, members and keys; platform admins manage
tenants and plans. Every object is looked up within the URL's tenant (or among the caller's own
tokens). Views are thin: each validates its body, calls one service and shapes the answer; a
service's refusal answers 400 `{"detail": ...}`. Lists are paginated (`?limit=&offset=`)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.tenants import selectors
from apps.tenants.api_base import AccessAPIView, PlatformAPIView, TenantAPIView, problem, refused
from apps.tenants.models import ApiKey, Membership, Plan, Team, Tenant
from apps.tenants.serializers import (
    AdminTokenInputSerializer,
    AdminTokenSerializer,
    ApiKeyCreateSerializer,
    ApiKeySerializer,
    ApiKeyUpdateSerializer,
    IssuedAdminTokenSerializer,
    IssuedApiKeySerializer,
    MembershipInputSerializer,
    MembershipSerializer,
    PlanInputSerializer,
    PlanSerializer,
    RoleSerializer,
    TeamInputSerializer,
    TeamSerializer,
    TenantCreateSerializer,
    TenantSerializer,
    TenantUpdateSerializer,
)
from apps.tenants.services import (
    admin_token_issue,
    admin_token_revoke,
    api_key_issue,
    api_key_revoke,
    api_key_update,
    membership_delete,
    membership_set,
    plan_delete,
    plan_set,
    team_create,
    team_delete,
    tenant_create,
    tenant_delete,
    tenant_plan_set,
    tenant_private_networks_set,
    tenant_update,
)


def _invalid(given: serializers.Serializer) -> Response:
    """A body of the wrong shape, as 400 naming each field's problem."""
    problems = [f"{field}: {message}" for field, messages in given.errors.items() for message in messages]
    return problem("; ".join(problems))


def _team_from_slug(tenant: Tenant, slug: str | None) -> Team | None:
    """The tenant's team named `slug` (None for None); a ValidationError when it has none such."""
    if slug is None:
        return None
    team = selectors.team_get_by_slug(tenant=tenant, slug=slug)
    if team is None:
        raise ValidationError({"team": f"the tenant has no team {slug!r}"})
    return team


# Tenant-scoped: teams


class TeamListView(TenantAPIView, generics.ListAPIView):
    """`GET|POST /api/v1/tenants/<tenant>/teams`: the tenant's teams; POST `{slug}` creates one (201)."""

    serializer_class = TeamSerializer

    def get_queryset(self) -> QuerySet[Team]:
        return selectors.team_list(tenant=self.tenant)

    @extend_schema(request=TeamInputSerializer, responses={201: TeamSerializer})
    def post(self, request: Request, tenant: str) -> Response:
        given = TeamInputSerializer(data=request.data)
        if not given.is_valid():
            return _invalid(given)
        try:
            team = team_create(tenant=self.tenant, **given.validated_data)
        except ValidationError as exc:
            return refused(exc)
        return Response(TeamSerializer(team).data, status=status.HTTP_201_CREATED)


class TeamDetailView(TenantAPIView):
    """`GET|DELETE /api/v1/tenants/<tenant>/teams/<id>`: deleting a team keeps its keys, without a team."""

    serializer_class = TeamSerializer

    def _team(self, team_id: int) -> Team:
        team = selectors.team_get(tenant=self.tenant, team_id=team_id)
        if team is None:
            raise Http404(f"no team with id {team_id}")
        return team

    def get(self, request: Request, tenant: str, team_id: int) -> Response:
        return Response(TeamSerializer(self._team(team_id)).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, tenant: str, team_id: int) -> Response:
        team_delete(team=self._team(team_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


# Tenant-scoped: members


class MemberListView(TenantAPIView, generics.ListAPIView):
    """`GET|POST /api/v1/tenants/<tenant>/members`: the tenant's memberships; POST `{username, role}`
    gives an existing console user that role (replacing the one they had) and answers 201."""

    serializer_class = MembershipSerializer

    def get_queryset(self) -> QuerySet[Membership]:
        return selectors.membership_list(tenant=self.tenant)

    @extend_schema(request=MembershipInputSerializer, responses={201: MembershipSerializer})
    def post(self, request: Request, tenant: str) -> Response:
        given = MembershipInputSerializer(data=request.data)
        if not given.is_valid():
            return _invalid(given)
        user = selectors.user_get_by_username(username=given.validated_data["username"])
        if user is None:
            return problem(f"there is no console user {given.validated_data['username']!r}")
        membership = membership_set(tenant=self.tenant, user=user, role=given.validated_data["role"])
        return Response(MembershipSerializer(membership).data, status=status.HTTP_201_CREATED)


class MemberDetailView(TenantAPIView):
    """`GET|PATCH|DELETE /api/v1/tenants/<tenant>/members/<id>`: PATCH `{role}` changes the role."""

    serializer_class = MembershipSerializer

    def _membership(self, membership_id: int) -> Membership:
        membership = selectors.membership_get(tenant=self.tenant, membership_id=membership_id)
        if membership is None:
            raise Http404(f"no membership with id {membership_id}")
        return membership

    def get(self, request: Request, tenant: str, membership_id: int) -> Response:
        return Response(MembershipSerializer(self._membership(membership_id)).data)

    @extend_schema(request=RoleSerializer, responses=MembershipSerializer)
    def patch(self, request: Request, tenant: str, membership_id: int) -> Response:
        membership = self._membership(membership_id)
        given = RoleSerializer(data=request.data)
        if not given.is_valid():
            return _invalid(given)
        membership = membership_set(tenant=self.tenant, user=membership.user, role=given.validated_data["role"])
        return Response(MembershipSerializer(membership).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, tenant: str, membership_id: int) -> Response:
        membership_delete(membership=self._membership(membership_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


# Tenant-scoped: API keys (members manage their own)


class KeyAPIView(TenantAPIView):
    members_write = True  # checked per key: `Access.manages_key`

    def _key(self, key_id: int, *, change: bool = False) -> ApiKey:
        """A key the caller may see (404 otherwise) and, with `change`, change (403 otherwise)."""
        api_key = selectors.api_key_get(tenant=self.tenant, key_id=key_id)
        if api_key is None:
            raise Http404(f"no key with id {key_id}")
        if not self.access.manages_key(api_key):
            if change:
                raise PermissionDenied("Members may change only the keys they issued.")
            raise Http404(f"no key with id {key_id}")
        return api_key


class KeyListView(KeyAPIView, generics.ListAPIView):
    """`GET|POST /api/v1/tenants/<tenant>/keys`: the keys the caller may see (all for tenant admins,
    their own for members). POST `{name, team, expires_at, scopes}` issues a key owned by the
    caller and answers 201 with its `secret`: the only time it is ever shown."""

    serializer_class = ApiKeySerializer

    def get_queryset(self) -> QuerySet[ApiKey]:
        return selectors.api_key_list_for(tenant=self.tenant, access=self.access)

    @extend_schema(request=ApiKeyCreateSerializer, responses={201: IssuedApiKeySerializer})
    def post(self, request: Request, tenant: str) -> Response:
        given = ApiKeyCreateSerializer(data=request.data)
        if not given.is_valid():
            return _invalid(given)
        data = dict(given.validated_data)
        try:
            data["team"] = _team_from_slug(self.tenant, data["team"])
            issued = api_key_issue(tenant=self.tenant, owner=request.user, **data)
        except ValidationError as exc:
            return refused(exc)
        body = {**ApiKeySerializer(issued.api_key).data, "secret": issued.secret}
        return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"})


class KeyDetailView(KeyAPIView):
    """`GET|PATCH /api/v1/tenants/<tenant>/keys/<id>`: PATCH changes the fields given (`team` by slug;
    null clears `team` or `expires_at`)."""

    serializer_class = ApiKeySerializer

    def get(self, request: Request, tenant: str, key_id: int) -> Response:
        return Response(ApiKeySerializer(self._key(key_id)).data)

    @extend_schema(request=ApiKeyUpdateSerializer, responses=ApiKeySerializer)
    def patch(self, request: Request, tenant: str, key_id: int) -> Response:
        api_key = self._key(key_id, change=True)
        given = ApiKeyUpdateSerializer(data=request.data)
        if not given.is_valid():
            return _invalid(given)
        data: dict[str, Any] = given.validated_data
        try:
            team = _team_from_slug(self.tenant, data["team"]) if "team" in data else api_key.team
            api_key = api_key_update(api_key=api_key, team=team, expires_at=data.get("expires_at", api_key.expires_at),
                                     scopes=data.get("scopes"))
        except ValidationError as exc:
            return refused(exc)
        return Response(ApiKeySerializer(api_key).data)


class KeyRevokeView(KeyAPIView):
    """`POST /api/v1/tenants/<tenant>/keys/<id>/revoke`: revoke the key for good (again: no change)."""

    serializer_class = ApiKeySerializer

    @extend_schema(request=None, responses=ApiKeySerializer)
    def post(self, request: Request, tenant: str, key_id: int) -> Response:
        api_key = api_key_revoke(api_key=self._key(key_id, change=True))
        return Response(ApiKeySerializer(api_key).data)


# Platform: tenants and plans


class TenantListView(PlatformAPIView, generics.ListAPIView):
    """`GET|POST /api/v1/tenants`: the tenants the caller may see (`?q=` filters by slug); POST
    `{slug, name, plan}` creates one (platform admins)."""

    serializer_class = TenantSerializer

    def get_queryset(self) -> QuerySet[Tenant]:
        return selectors.tenant_search(access=self.access, query=self.request.query_params.get("q", "").strip())

    @extend_schema(parameters=[OpenApiParameter("q", str, description="Part of the slug.")])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(request=TenantCreateSerializer, responses={201: TenantSerializer})
    def post(self, request: Request) -> Response:
        given = TenantCreateSerializer(data=request.data)
        if not given.is_valid():
            return _invalid(given)
        try:
            tenant = tenant_create(**given.validated_data)
        except ValidationError as exc:
            return refused(exc)
        return Response(TenantSerializer(tenant).data, status=status.HTTP_201_CREATED)


class TenantDetailView(PlatformAPIView):
    """`GET|PATCH|DELETE /api/v1/tenants/<slug>`: PATCH `{name, plan, audit_arguments, allow_private_networks}` changes the
    fields given; DELETE removes the tenant and everything it owns (platform admins)."""

    serializer_class = TenantSerializer

    def _tenant(self, slug: str) -> Tenant:
        tenant = selectors.tenant_get(slug=slug)
        if tenant is None or not self.access.sees(tenant.pk):
            raise Http404(f"no tenant {slug!r}")
        return tenant

    def get(self, request: Request, slug: str) -> Response:
        return Response(TenantSerializer(self._tenant(slug)).data)

    @extend_schema(request=TenantUpdateSerializer, responses=TenantSerializer)
    def patch(self, request: Request, slug: str) -> Response:
        tenant = self._tenant(slug)
        given = TenantUpdateSerializer(data=request.data)
        if not given.is_valid():
            return _invalid(given)
        data = given.validated_data
        try:
            tenant = tenant_update(tenant=tenant, name=data.get("name", tenant.name),
                                   audit_arguments=data.get("audit_arguments"))
        except ValidationError as exc:
            return refused(exc)
        if "plan" in data:
            tenant = tenant_plan_set(tenant=tenant, plan=data["plan"])
        if "allow_private_networks" in data:
            tenant = tenant_private_networks_set(tenant=tenant, allowed=data["allow_private_networks"])
        return Response(TenantSerializer(tenant).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, slug: str) -> Response:
        tenant_delete(tenant=self._tenant(slug))
        return Response(status=status.HTTP_204_NO_CONTENT)


class PlanListView(PlatformAPIView, generics.ListAPIView):
    """`GET|POST /api/v1/plans`: POST `{name, daily, monthly, limits_editable}` creates a plan (201)."""

    serializer_class = PlanSerializer

    def get_queryset(self) -> QuerySet[Plan]:
        return selectors.plan_list()

    @extend_schema(request=PlanInputSerializer, responses={201: PlanSerializer})
    def post(self, request: Request) -> Response:
        given = PlanInputSerializer(data=request.data)
        if not given.is_valid():
            return _invalid(given)
        data = dict(given.validated_data)
        if "name" not in data:
            return problem("name: This field is required.")
        if selectors.plan_get(name=data["name"]) is not None:
            return problem(f"a plan {data['name']!r} exists; PUT /api/v1/plans/{data['name']} changes it")
        try:
            plan = plan_set(**data)
        except ValidationError as exc:
            return refused(exc)
        return Response(PlanSerializer(plan).data, status=status.HTTP_201_CREATED)


class PlanDetailView(PlatformAPIView):
    """`GET|PUT|DELETE /api/v1/plans/<name>`: PUT replaces the caps (an absent cap: none); DELETE
    answers 400 while tenants are on the plan."""

    serializer_class = PlanSerializer

    def _plan(self, name: str) -> Plan:
        plan = selectors.plan_get(name=name)
        if plan is None:
            raise Http404(f"no plan {name!r}")
        return plan

    def get(self, request: Request, name: str) -> Response:
        return Response(PlanSerializer(self._plan(name)).data)

    @extend_schema(request=PlanInputSerializer, responses=PlanSerializer)
    def put(self, request: Request, name: str) -> Response:
        plan = self._plan(name)
        given = PlanInputSerializer(data=request.data)
        if not given.is_valid():
            return _invalid(given)
        data = {**given.validated_data, "name": plan.name}
        try:
            plan = plan_set(**data)
        except ValidationError as exc:
            return refused(exc)
        return Response(PlanSerializer(plan).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        try:
            plan_delete(plan=self._plan(name))
        except ValidationError as exc:
            return refused(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)


# The caller's own admin tokens


class MyTokenListView(AccessAPIView, generics.ListAPIView):
    """`GET|POST /api/v1/me/tokens`: the caller's REST API tokens; POST `{name, expires_at}` issues
    one and answers 201 with its `secret`, shown this once."""

    serializer_class = AdminTokenSerializer

    def get_queryset(self) -> QuerySet:
        return selectors.admin_token_list(user=self.request.user)

    @extend_schema(request=AdminTokenInputSerializer, responses={201: IssuedAdminTokenSerializer})
    def post(self, request: Request) -> Response:
        given = AdminTokenInputSerializer(data=request.data)
        if not given.is_valid():
            return _invalid(given)
        try:
            issued = admin_token_issue(user=request.user, **given.validated_data)
        except ValidationError as exc:
            return refused(exc)
        body = {**AdminTokenSerializer(issued.admin_token).data, "secret": issued.secret}
        return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"})


class MyTokenRevokeView(AccessAPIView):
    """`POST /api/v1/me/tokens/<id>/revoke`: revoke one of the caller's tokens (another user's: 404)."""

    serializer_class = AdminTokenSerializer

    @extend_schema(request=None, responses=AdminTokenSerializer)
    def post(self, request: Request, token_id: int) -> Response:
        token = selectors.admin_token_get(user=request.user, token_id=token_id)
        if token is None:
            raise Http404(f"you have no token with id {token_id}")
        return Response(AdminTokenSerializer(admin_token_revoke(admin_token=token)).data)
