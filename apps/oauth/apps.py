from django.apps import AppConfig


class OAuthConfig(AppConfig):
    name = "apps.oauth"
    label = "oauth"
    verbose_name = "OAuth for people"
