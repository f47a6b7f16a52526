"""The gateway's REST API, mounted under `api/v1/tenants/<tenant>/`."""

from __future__ import annotations

from django.urls import path

from apps.gateway import api

api_urls = (
    [
        path("sessions", api.SessionListView.as_view(), name="session-list"),
    ],
    "gateway-api",
)
