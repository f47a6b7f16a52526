"""Settings shared by every environment. Everything comes from environment variables; when they are
unset the embedded PostgreSQL and Redis started by `scripts/services.sh` are used."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("GATEWAY_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def database_from_url(url: str) -> dict[str, object]:
    """Turn `postgresql://user:pass@host:port/name?host=/socket/dir` into a Django DATABASES entry."""
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        raise ValueError(f"DATABASE_URL must be a postgresql:// URL, got {parts.scheme!r}")
    query = dict(item.split("=", 1) for item in parts.query.split("&") if "=" in item)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or "postgres"),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": unquote(query.get("host", parts.hostname or "")),
        "PORT": str(parts.port or ""),
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
        "TEST": {"NAME": os.environ.get("GATEWAY_TEST_DB_NAME", "test_gateway")},
    }


SECRET_KEY = os.environ.get("GATEWAY_SECRET_KEY", "")
DEBUG = False
ALLOWED_HOSTS = env_list("GATEWAY_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "apps.common",
    "apps.tenants",
    "apps.catalog",
    "apps.policies",
    "apps.audit",
    "apps.configuration",
    "apps.retrieval",
    "apps.gateway",
    "apps.console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "gatewaysite.urls"
ASGI_APPLICATION = "gatewaysite.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.console.context.console",
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url(
        os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:55432/gateway")
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6390/0")

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "prefix": "gw-channels"},
    }
}

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", REDIS_URL)
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE = {
    # Spec uploads whose compilation was never queued (broker down) or whose worker died.
    "spec-compile-requeue": {"task": "apps.catalog.tasks.spec_compile_requeue", "schedule": 60.0},
    # Audit rows past their retention (GATEWAY_AUDIT_RETENTION_DAYS).
    "audit-prune": {"task": "apps.audit.tasks.audit_prune", "schedule": 3600.0},
    # MCP servers' tools, indexed again for tool_search (only what changed is embedded).
    "tool-index-refresh": {"task": "apps.retrieval.tasks.tool_index_refresh", "schedule": 600.0},
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.tenants.authentication.AdminTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "MCP gateway admin API",
    "DESCRIPTION": "Everything the console does: tenants, keys, backends, virtual hosts, tools, policies, audit.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",  # served from static/, no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SCHEMA_PATH_PREFIX": "/api/v1",
}

# --- The console ----------------------------------------------------------------------------------
LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:home"
# Failed sign-ins before a pause: per username and address, and per address for any username.
CONSOLE_LOGIN_FAILURES_PER_USER = int(os.environ.get("CONSOLE_LOGIN_FAILURES_PER_USER", "5"))
CONSOLE_LOGIN_FAILURES_PER_ADDRESS = int(os.environ.get("CONSOLE_LOGIN_FAILURES_PER_ADDRESS", "30"))
CONSOLE_LOGIN_LOCKOUT_SECONDS = int(os.environ.get("CONSOLE_LOGIN_LOCKOUT_SECONDS", "900"))

# --- The MCP gateway -------------------------------------------------------------------------------
# Largest accepted request body on the MCP endpoint; larger bodies get HTTP 413.
GATEWAY_MAX_BODY_BYTES = int(os.environ.get("GATEWAY_MAX_BODY_BYTES", str(4 * 1024 * 1024)))
# Origins allowed besides loopback and the request's own host (DNS-rebinding protection).
GATEWAY_ALLOWED_ORIGINS = env_list("GATEWAY_ALLOWED_ORIGINS")
# Idle lifetime of a downstream legacy session.
GATEWAY_SESSION_TTL_SECONDS = int(os.environ.get("GATEWAY_SESSION_TTL_SECONDS", "3600"))
# How often each instance ends sessions idle past that time and closes their backend sessions.
GATEWAY_SESSION_SWEEP_SECONDS = float(os.environ.get("GATEWAY_SESSION_SWEEP_SECONDS", "30"))
# Seconds a forwarded request may wait for its backend before -32004.
GATEWAY_UPSTREAM_TIMEOUT_SECONDS = float(os.environ.get("GATEWAY_UPSTREAM_TIMEOUT_SECONDS", "60"))
# Lists of virtual hosts with several backends (docs/config.md, "Virtual hosts with several backends").
GATEWAY_LIST_PAGE_SIZE = int(os.environ.get("GATEWAY_LIST_PAGE_SIZE", "1000"))
GATEWAY_LIST_TIMEOUT_SECONDS = float(os.environ.get("GATEWAY_LIST_TIMEOUT_SECONDS", "5"))
GATEWAY_LIST_CACHE_SECONDS = float(os.environ.get("GATEWAY_LIST_CACHE_SECONDS", "60"))
# When Redis cannot be reached, admit calls that rate limits would check (the audit row says
# "unchecked"); false refuses them instead.
GATEWAY_RATE_LIMIT_FAIL_OPEN = env_bool("GATEWAY_RATE_LIMIT_FAIL_OPEN", True)
# How often (seconds) an instance checks the configuration version counter in Redis.
GATEWAY_SNAPSHOT_CHECK_SECONDS = float(os.environ.get("GATEWAY_SNAPSHOT_CHECK_SECONDS", "0.5"))
# How long audit rows are kept (days); older ones are deleted hourly by Celery beat.
GATEWAY_AUDIT_RETENTION_DAYS = int(os.environ.get("GATEWAY_AUDIT_RETENTION_DAYS", "90"))
# How often (seconds) queued audit rows are written.
GATEWAY_AUDIT_FLUSH_SECONDS = float(os.environ.get("GATEWAY_AUDIT_FLUSH_SECONDS", "0.25"))
# Name of this gateway instance; part of every session id it mints (the owner hint).
GATEWAY_INSTANCE_ID = os.environ.get("GATEWAY_INSTANCE_ID", f"gw{os.getpid()}")

# Serve /static/ from the gateway process itself (development and tests; production uses nginx).
GATEWAY_SERVE_STATIC = env_bool("GATEWAY_SERVE_STATIC", False)
# Fernet keys for secrets at rest (egress credentials), newest first; empty: derived from the secret key.
GATEWAY_ENCRYPTION_KEYS = env_list("GATEWAY_ENCRYPTION_KEYS")
# Largest OpenAPI document accepted for upload, in bytes.
GATEWAY_SPEC_MAX_BYTES = int(os.environ.get("GATEWAY_SPEC_MAX_BYTES", str(50 * 1024 * 1024)))
# Largest response body read from an OpenAPI service; larger ones are a tool error.
GATEWAY_OPENAPI_MAX_RESPONSE_BYTES = int(os.environ.get("GATEWAY_OPENAPI_MAX_RESPONSE_BYTES", str(8 * 1024 * 1024)))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("GATEWAY_LOG_LEVEL", "INFO")},
    "loggers": {"daphne": {"level": "WARNING"}, "django.channels.server": {"level": "WARNING"}},
}

# tool_search (issue 6): the embedding model (a name in apps.retrieval.embeddings.PACKAGED_MODELS or
# a model directory), torch threads per process, and whether a backend's tools are indexed (in Celery)
# whenever they change.
GATEWAY_EMBEDDING_MODEL = os.environ.get("GATEWAY_EMBEDDING_MODEL", "all-MiniLM-L6-v2")
GATEWAY_EMBEDDING_THREADS = int(os.environ.get("GATEWAY_EMBEDDING_THREADS", "1"))
GATEWAY_TOOL_INDEX = env_bool("GATEWAY_TOOL_INDEX", True)
