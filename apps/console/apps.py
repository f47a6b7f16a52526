from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "apps.console"
    default_auto_field = "django.db.models.BigAutoField"
