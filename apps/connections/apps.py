from django.apps import AppConfig


class ConnectionsConfig(AppConfig):
    name = "apps.connections"
    label = "connections"
    verbose_name = "Connected accounts"
