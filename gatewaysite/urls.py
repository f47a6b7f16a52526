from django.contrib import admin
from django.urls import include, path

from apps.catalog.urls import api_urls as catalog_api_urls
from apps.catalog.urls import console_urls as catalog_console_urls
from apps.common.views import healthz, readyz

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include(catalog_api_urls)),
    path("console/", include(catalog_console_urls)),
    path("healthz", healthz),
    path("readyz", readyz),
]
