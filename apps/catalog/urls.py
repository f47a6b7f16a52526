"""The catalog's URLs: the REST API (mounted under `api/v1/`) and the console pages (under `console/`)."""

from __future__ import annotations

from django.urls import path

from apps.catalog import api, views

api_urls = (
    [
        path("backends/<int:backend_id>/spec", api.SpecUploadView.as_view(), name="spec-upload"),
        path("backends/<int:backend_id>/specs", api.SpecVersionListView.as_view(), name="spec-version-list"),
        path(
            "backends/<int:backend_id>/specs/<int:number>",
            api.SpecVersionDetailView.as_view(),
            name="spec-version-detail",
        ),
        path(
            "backends/<int:backend_id>/specs/<int:number>/document",
            api.SpecVersionDocumentView.as_view(),
            name="spec-version-document",
        ),
        path("backends/<int:backend_id>/credential", api.EgressCredentialView.as_view(), name="credential"),
    ],
    "catalog-api",
)

console_urls = (
    [
        path("", views.console_home, name="home"),
        path("backends/", views.backend_list, name="backend-list"),
        path("backends/<int:backend_id>/spec/", views.backend_spec, name="backend-spec"),
        path("backends/<int:backend_id>/spec/history/", views.backend_spec_history, name="backend-spec-history"),
        path("backends/<int:backend_id>/credential/", views.credential_set, name="credential-set"),
        path("backends/<int:backend_id>/credential/remove/", views.credential_remove, name="credential-remove"),
    ],
    "catalog-console",
)
