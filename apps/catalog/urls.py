"""The catalog's REST API, mounted under `api/v1/tenants/<tenant>/`."""

from __future__ import annotations

from django.urls import path

from apps.catalog import api, api_backends, api_curation, api_tools, api_vhosts

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
        path(
            "backends/<int:backend_id>/specs/<int:number>/publish",
            api.SpecVersionPublishView.as_view(),
            name="spec-version-publish",
        ),
        path(
            "backends/<int:backend_id>/specs/<int:number>/rollback",
            api.SpecVersionRollbackView.as_view(),
            name="spec-version-rollback",
        ),
        path("backends/<int:backend_id>/credential", api.EgressCredentialView.as_view(), name="credential"),
        *api_tools.urls,
        *api_backends.urls,
        *api_vhosts.urls,
        *api_curation.urls,
    ],
    "catalog-api",
)
