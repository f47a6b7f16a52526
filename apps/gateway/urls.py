"""The gateway's REST API, mounted under `api/v1/tenants/<tenant>/`."""

from __future__ import annotations

from django.urls import path

from apps.gateway import api

api_urls = (
    [
        path("sessions", api.SessionListView.as_view(), name="session-list"),
        path("backends/<int:backend_id>/test-connection", api.BackendTestConnectionView.as_view(), name="backend-test"),
        path("backends/<int:backend_id>/health", api.BackendHealthView.as_view(), name="backend-health"),
        path("virtual-hosts/<int:virtual_host_id>/exposed-tools", api.ExposedToolsView.as_view(),
             name="vhost-exposed-tools"),
    ],
    "gateway-api",
)
