"""Mounted at the site's root: the RFC 8414 well-known path, and the server under /oauth/<tenant>/."""

from django.urls import path

from apps.oauth import views

urlpatterns = [
    path(".well-known/oauth-authorization-server/oauth/<slug:tenant>", views.metadata, name="oauth-metadata"),
    path("oauth/<slug:tenant>/jwks", views.key_set, name="oauth-jwks"),
    path("oauth/<slug:tenant>/register", views.register, name="oauth-register"),
    path("oauth/<slug:tenant>/authorize", views.authorize, name="oauth-authorize"),
    path("oauth/<slug:tenant>/token", views.token, name="oauth-token"),
    path("oauth/<slug:tenant>/revoke", views.revoke, name="oauth-revoke"),
    path("oauth/<slug:tenant>/sign-in", views.idp_sign_in, name="oauth-idp-sign-in"),
    path("oauth/<slug:tenant>/sign-in/callback", views.idp_callback, name="oauth-idp-callback"),
]
