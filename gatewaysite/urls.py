from django.contrib import admin
from django.urls import include, path, re_path

from apps.catalog.urls import api_urls as catalog_api_urls
from apps.catalog.urls import console_urls as catalog_console_urls
from apps.common.views import healthz, readyz
from apps.gateway.views import protected_resource_metadata
from apps.retrieval.urls import api_urls as retrieval_api_urls

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include(catalog_api_urls)),
    path("api/v1/", include(retrieval_api_urls)),
    path("console/", include(catalog_console_urls)),
    path("healthz", healthz),
    path("readyz", readyz),
    re_path(
        r"^\.well-known/oauth-protected-resource/mcp/(?P<tenant>[a-z0-9-]{1,64})/(?P<vhost>[a-z0-9-]{1,64})/?$",
        protected_resource_metadata,
    ),
]
