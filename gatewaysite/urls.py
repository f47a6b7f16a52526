from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from apps.audit.urls import api_urls as audit_api_urls
from apps.catalog.urls import api_urls as catalog_api_urls
from apps.common.api_routes import api_not_found, api_path
from apps.common.views import healthz, readyz
from apps.connections.urls import urlpatterns as connections_urls
from apps.console.auth import ThrottledAdminAuthenticationForm
from apps.console.urls import console_urls
from apps.gateway.urls import api_urls as gateway_api_urls
from apps.gateway.views import metrics, protected_resource_metadata
from apps.oauth.urls import urlpatterns as oauth_urls
from apps.policies.urls import api_urls as policies_api_urls
from apps.retrieval.urls import api_urls as retrieval_api_urls
from apps.tenants.urls import api_urls as tenants_api_urls
from apps.tenants.urls import platform_api_urls as tenants_platform_api_urls

# Everything under a tenant: the object lookups of these views are all filtered by it.
tenant_api_urls = [
    path("", include(audit_api_urls)),
    path("", include(catalog_api_urls)),
    path("", include(gateway_api_urls)),
    path("", include(retrieval_api_urls)),
    path("", include(policies_api_urls)),
    path("", include(tenants_api_urls)),
]

# The admin's sign-in shares the console's throttle: otherwise it is a second, unthrottled door.
admin.site.login_form = ThrottledAdminAuthenticationForm

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="console:home", permanent=False)),
    # What browsers ask for by themselves; the pages link the same icon.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("admin/", admin.site.urls),
    # Every API path also answers with a trailing slash; any other path under api/ is a JSON 404.
    api_path("api/v1/", [
        path("tenants/<slug:tenant>/", include(tenant_api_urls)),
        path("", include(tenants_platform_api_urls)),
        path("schema", SpectacularAPIView.as_view(), name="api-schema"),
        # The split view serves its start-up script as a file of its own: the CSP allows no inline script.
        path("docs", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    ]),
    re_path(r"^api/", api_not_found),
    path("console/", include(console_urls)),
    path("healthz", healthz),
    path("readyz", readyz),
    path("metrics", metrics),
    re_path(
        r"^\.well-known/oauth-protected-resource/mcp/(?P<tenant>[a-z0-9-]{1,64})/(?P<vhost>[a-z0-9-]{1,64})/?$",
        protected_resource_metadata,
    ),
    path("", include(oauth_urls)),
    path("", include(connections_urls)),
]
