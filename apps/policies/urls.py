"""The policies REST API, mounted under `api/v1/tenants/<tenant>/`."""

from __future__ import annotations

from django.urls import path

from apps.policies import api

api_urls = (
    [
        path("virtual-hosts/<int:virtual_host_id>/access-policy", api.AccessPolicyView.as_view(),
             name="access-policy"),
        path("virtual-hosts/<int:virtual_host_id>/access-policy/simulate", api.AccessSimulateView.as_view(),
             name="access-simulate"),
        path("virtual-hosts/<int:virtual_host_id>/tool-costs", api.ToolCostsView.as_view(), name="tool-costs"),
        path("virtual-hosts/<int:virtual_host_id>/interceptors", api.InterceptorsView.as_view(), name="interceptors"),
        path("virtual-hosts/<int:virtual_host_id>/interceptors/try", api.InterceptorTrialView.as_view(),
             name="interceptors-try"),
        path("rate-limits", api.RateLimitListView.as_view(), name="rate-limit-list"),
        path("rate-limits/<str:scope>/<str:name>", api.RateLimitDetailView.as_view(), name="rate-limit-detail"),
        path("budgets", api.BudgetListView.as_view(), name="budget-list"),
        path("budgets/<str:scope>/<str:name>", api.BudgetDetailView.as_view(), name="budget-detail"),
    ],
    "policies-api",
)
