"""The tenants REST API: `api_urls` under `api/v1/tenants/<tenant>/` (teams, members, keys) and
`platform_api_urls` under `api/v1/` (tenants, plans, the caller's admin tokens)."""

from __future__ import annotations

from django.urls import path

from apps.tenants import api

api_urls = (
    [
        path("teams", api.TeamListView.as_view(), name="team-list"),
        path("teams/<int:team_id>", api.TeamDetailView.as_view(), name="team-detail"),
        path("members", api.MemberListView.as_view(), name="member-list"),
        path("members/<int:membership_id>", api.MemberDetailView.as_view(), name="member-detail"),
        path("keys", api.KeyListView.as_view(), name="key-list"),
        path("keys/<int:key_id>", api.KeyDetailView.as_view(), name="key-detail"),
        path("keys/<int:key_id>/revoke", api.KeyRevokeView.as_view(), name="key-revoke"),
    ],
    "tenants-api",
)

platform_api_urls = (
    [
        path("tenants", api.TenantListView.as_view(), name="tenant-list"),
        path("tenants/<slug:slug>", api.TenantDetailView.as_view(), name="tenant-detail"),
        path("plans", api.PlanListView.as_view(), name="plan-list"),
        path("plans/<slug:name>", api.PlanDetailView.as_view(), name="plan-detail"),
        path("me/tokens", api.MyTokenListView.as_view(), name="my-token-list"),
        path("me/tokens/<int:token_id>/revoke", api.MyTokenRevokeView.as_view(), name="my-token-revoke"),
    ],
    "platform-api",
)
