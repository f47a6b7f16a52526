from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "apps.tenants"
    label = "tenants"

    def ready(self) -> None:
        from apps.tenants import schema  # noqa: F401  - registers the admin token with drf-spectacular
