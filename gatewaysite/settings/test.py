"""The test suite: real PostgreSQL and Redis (a separate Redis database), fast password hashing."""

import os

from .base import *  # noqa: F403
from .base import REDIS_URL, channel_layers, env_bool

SECRET_KEY = os.environ.get("GATEWAY_SECRET_KEY", "test-secret-key-not-for-production-0123456789")
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
REDIS_URL = os.environ.get("GATEWAY_TEST_REDIS_URL", REDIS_URL.rsplit("/", 1)[0] + "/15")
CHANNEL_LAYERS = channel_layers(os.environ.get("GATEWAY_CHANNEL_LAYER_URLS", "").split() or [REDIS_URL], "gw-test-channels")
CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True  # a task that fails fails the test
GATEWAY_SERVE_STATIC = True  # the browser tests load the console's CSS and htmx
GATEWAY_SNAPSHOT_CHECK_SECONDS = 0.0
# Only a test that asks for tracing gets it (not a developer's OTEL_EXPORTER_OTLP_ENDPOINT).
GATEWAY_TRACING = env_bool("GATEWAY_TRACING", False)
GATEWAY_ALLOW_PRIVATE_NETWORKS = True  # the test backends listen on loopback
GATEWAY_PERSON_TOKEN_FRESH_SECONDS = 0.2  # a disconnected account is seen at once by the test gateways

from .base import DATABASES  # noqa: E402

# Connections opened by worker threads in async tests close when their unit of work ends, so the
# test database can be dropped at the end of the run.
DATABASES["default"]["CONN_MAX_AGE"] = 0

# Indexing a spec's tools embeds every one (EC2: 765 tools, ~13 s of CPU): only the retrieval tests,
# which turn it on (or start a gateway with GATEWAY_TEST_TOOL_INDEX=1), pay for it.
GATEWAY_TOOL_INDEX = env_bool("GATEWAY_TEST_TOOL_INDEX", False)
