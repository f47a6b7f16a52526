import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gatewaysite.settings.dev")

app = Celery("gatewaysite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
