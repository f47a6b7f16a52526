from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "apps.console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.console.signals import live_tail_revocation_connect  # models are loaded only now

        live_tail_revocation_connect()
