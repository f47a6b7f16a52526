from django.apps import AppConfig


class ConfigurationConfig(AppConfig):
    """Configuration as code: a YAML document of tenants, keys, backends and virtual hosts."""

    name = "apps.configuration"
    label = "configuration"
    default_auto_field = "django.db.models.BigAutoField"
