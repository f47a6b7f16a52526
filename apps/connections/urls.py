"""Mounted at the site's root, beside the gateway's own authorization server (apps/oauth/urls.py)."""

from django.urls import path

from apps.connections import views

urlpatterns = [
    path("oauth/<slug:tenant>/clients/<int:backend_id>", views.client_document_view, name="connections-client-document"),
]
