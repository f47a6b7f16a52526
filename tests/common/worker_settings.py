"""Settings of the real Celery worker (with beat) that the probe tests start: tasks travel through
the test Redis database as in production (the test suite itself runs them eagerly)."""

from gatewaysite.settings.test import *  # noqa: F403
from gatewaysite.settings.test import REDIS_URL

CELERY_TASK_ALWAYS_EAGER = False
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
