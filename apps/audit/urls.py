"""The audit REST API, mounted under `api/v1/tenants/<tenant>/`."""

from __future__ import annotations

from django.urls import path

from apps.audit import api

api_urls = (
    [
        path("audit", api.AuditListView.as_view(), name="audit-list"),
        path("audit.csv", api.AuditCsvView.as_view(), name="audit-csv"),
        path("dashboard", api.DashboardView.as_view(), name="dashboard"),
    ],
    "audit-api",
)
