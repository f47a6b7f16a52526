from django.contrib import admin
from django.urls import path

from apps.common.views import healthz, readyz

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz),
    path("readyz", readyz),
]
