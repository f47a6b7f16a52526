"""Settings shared by every environment. Everything comes from environment variables; when they are
unset the embedded PostgreSQL and Redis started by `scripts/services.sh` are used."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import unquote, urlsplit

from apps.common.redis_topology import celery_broker, channel_layer_hosts, redis_topology

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
    "apps.oauth",
    "apps.connections",
]

MIDDLEWARE = [
    "apps.common.probe_hosts.probe_hosts_middleware",  # /healthz, /readyz (and a guarded /metrics) under any Host
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "apps.common.security_headers.security_headers_middleware",  # CSP, Permissions-Policy
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

# One server, a Redis Cluster or a Sentinel master (apps/common/redis_topology.py, docs/scale.md).
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6390/0")
redis_topology(REDIS_URL)  # a URL that cannot work stops the start here, saying why
# The channel layer's Redis servers (default: REDIS_URL's), separated by spaces (a Sentinel URL has
# commas): each a single server or a Sentinel master, messages sharded over them. Required when
# REDIS_URL is a cluster (channels-redis has no cluster client).
CHANNEL_LAYER_URLS = os.environ.get("GATEWAY_CHANNEL_LAYER_URLS", "").split() or [REDIS_URL]



def channel_layers(redis_urls: list[str], prefix: str) -> dict[str, object]:
    """The channel layer on `redis_urls` (channels-redis shards channels and groups over them). Each receive blocks in Redis for up to
    `RedisChannelLayer.brpop_timeout` (5 s) waiting for a message, and redis-py (8.x) gives up on a
    read after its default socket timeout, also 5 s: an idle stream's receive raced its own read,
    failed with "Timeout reading from ...", and a message Redis popped at that moment was lost with
    the connection. So reads have no client-side timeout: Redis itself ends every blocking pop
    within 5 s, and TCP keepalive notices a Redis that went away without closing the connection.
    (A client timeout longer than the pop is no fix: a receive cancelled mid-read then never ends.)"""
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    host for url in redis_urls
                    for host in channel_layer_hosts(url, socket_timeout=None, socket_connect_timeout=5,
                                                    socket_keepalive=True)
                ],
                "prefix": prefix,
            },
        }
    }


CHANNEL_LAYERS = channel_layers(CHANNEL_LAYER_URLS, "gw-channels")

# A Sentinel URL becomes kombu's own form; a cluster is refused with the reason (kombu has no
# cluster client): set both to a single server or a Sentinel master then.
CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = celery_broker(os.environ.get("CELERY_BROKER_URL", REDIS_URL))
CELERY_RESULT_BACKEND, CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = celery_broker(
    os.environ.get("CELERY_RESULT_BACKEND", os.environ.get("CELERY_BROKER_URL", REDIS_URL)))
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Tool index builds (a backend's whole list, embedded) have a queue of their own, so no tenant's
# backend keeps another's spec compile waiting: run workers for both queues (docs/deploy.md).
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_ROUTES = {"apps.retrieval.tasks.*": {"queue": "indexing"}}
CELERY_BEAT_SCHEDULE = {
    # Spec uploads whose compilation was never queued (broker down) or whose worker died.
    "spec-compile-requeue": {"task": "apps.catalog.tasks.spec_compile_requeue", "schedule": 60.0},
    # Audit days past their retention (GATEWAY_AUDIT_RETENTION_DAYS).
    "audit-prune": {"task": "apps.audit.tasks.audit_prune", "schedule": 3600.0},
    # The audit log's daily partitions, made a week ahead.
    "audit-partitions": {"task": "apps.audit.tasks.audit_partitions", "schedule": 3600.0},
    # MCP servers' tools, indexed again for tool_search (only what changed is embedded).
    "tool-index-refresh": {"task": "apps.retrieval.tasks.tool_index_refresh", "schedule": 600.0},
    # The authorization server's spent codes, replaced refresh tokens and long-revoked grants.
    "oauth-prune": {"task": "apps.oauth.tasks.oauth_prune", "schedule": 3600.0},
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
# Largest request body anywhere else (REST API, console, admin), refused with 413 by the HTTP server
# before it is read; OpenAPI uploads by a tenant's admins may reach GATEWAY_SPEC_MAX_BYTES.
GATEWAY_API_MAX_BODY_BYTES = int(os.environ.get("GATEWAY_API_MAX_BODY_BYTES", str(1024 * 1024)))
# A request's line and headers must arrive within this time of its first byte; a body that stalls
# for GATEWAY_HTTP_BODY_IDLE_SECONDS is cut. Both answer 408; a request fully received is not timed.
GATEWAY_HTTP_HEADERS_TIMEOUT_SECONDS = float(os.environ.get("GATEWAY_HTTP_HEADERS_TIMEOUT_SECONDS", "10"))
GATEWAY_HTTP_BODY_IDLE_SECONDS = float(os.environ.get("GATEWAY_HTTP_BODY_IDLE_SECONDS", "10"))
# Origins allowed besides loopback and the request's own host (DNS-rebinding protection).
GATEWAY_ALLOWED_ORIGINS = env_list("GATEWAY_ALLOWED_ORIGINS")
# Idle lifetime of a downstream legacy session.
GATEWAY_SESSION_TTL_SECONDS = int(os.environ.get("GATEWAY_SESSION_TTL_SECONDS", "3600"))
# How often each instance ends sessions idle past that time and closes their backend sessions.
GATEWAY_SESSION_SWEEP_SECONDS = float(os.environ.get("GATEWAY_SESSION_SWEEP_SECONDS", "30"))
# Usable sessions one key may hold at once, across all instances (0: no cap); an anonymous host's
# callers share its configured key's. Past it, initialize gets -32005 until one ends or expires.
GATEWAY_MAX_SESSIONS_PER_KEY = int(os.environ.get("GATEWAY_MAX_SESSIONS_PER_KEY", "1000"))
# Largest `capabilities` and `clientInfo` (each, as JSON) an initialize may send: both are kept
# with the session in Redis. Larger is -32602 naming the field.
GATEWAY_MAX_CLIENT_METADATA_BYTES = int(os.environ.get("GATEWAY_MAX_CLIENT_METADATA_BYTES", "8192"))
# Most messages in one JSON-RPC batch (2025-03-26 sessions); longer batches are refused whole. At
# most GATEWAY_BATCH_CONCURRENCY of a batch's messages are handled at once.
GATEWAY_MAX_BATCH_ITEMS = int(os.environ.get("GATEWAY_MAX_BATCH_ITEMS", "50"))
GATEWAY_BATCH_CONCURRENCY = int(os.environ.get("GATEWAY_BATCH_CONCURRENCY", "8"))
# Pages of every list the gateway hands out (docs/virtual-hosts.md, "Lists"): at most this many
# entries, in a response of at most this many bytes (under the 1 MiB an SDK's SSE reader takes in one
# event) unless one entry alone is bigger. A backend's own page over the size is cut in pieces.
GATEWAY_LIST_PAGE_SIZE = int(os.environ.get("GATEWAY_LIST_PAGE_SIZE", "1000"))
GATEWAY_LIST_PAGE_BYTES = int(os.environ.get("GATEWAY_LIST_PAGE_BYTES", "1000000"))
GATEWAY_LIST_TIMEOUT_SECONDS = float(os.environ.get("GATEWAY_LIST_TIMEOUT_SECONDS", "5"))
GATEWAY_LIST_CACHE_SECONDS = float(os.environ.get("GATEWAY_LIST_CACHE_SECONDS", "60"))
# The most of one MCP backend's list the gateway takes in (merged lists, lists it filters, the tool
# index): entries, and bytes of responses across its pages. A backend over either is left out of the
# list (logged, counted in list_backend_omitted with reason "too_large") and not indexed.
GATEWAY_BACKEND_MAX_TOOLS = int(os.environ.get("GATEWAY_BACKEND_MAX_TOOLS", "10000"))
GATEWAY_BACKEND_MAX_LIST_BYTES = int(os.environ.get("GATEWAY_BACKEND_MAX_LIST_BYTES", str(8 * 1024 * 1024)))
# When Redis cannot be reached, admit calls that rate limits would check (the audit row says
# "unchecked"); false refuses them instead.
GATEWAY_RATE_LIMIT_FAIL_OPEN = env_bool("GATEWAY_RATE_LIMIT_FAIL_OPEN", True)
# How often (seconds) an instance checks the configuration version counter in Redis.
GATEWAY_SNAPSHOT_CHECK_SECONDS = float(os.environ.get("GATEWAY_SNAPSHOT_CHECK_SECONDS", "0.5"))
# How long audit rows are kept (days): at least this, less than a day more (Celery beat drops whole days).
GATEWAY_AUDIT_RETENTION_DAYS = int(os.environ.get("GATEWAY_AUDIT_RETENTION_DAYS", "90"))
# How often (seconds) queued audit rows are written.
GATEWAY_AUDIT_FLUSH_SECONDS = float(os.environ.get("GATEWAY_AUDIT_FLUSH_SECONDS", "0.25"))
# Name of this gateway instance; part of every session id it mints (the owner hint). Host name and
# pid: in containers every instance is pid 1, and instances sharing a name ignore each other's news.
GATEWAY_INSTANCE_ID = os.environ.get("GATEWAY_INSTANCE_ID", f"{socket.gethostname()}-{os.getpid()}")
# --- Resource limits and shutdown (docs/deploy.md, "Limits and shutdown") ---
# Largest response body, and largest single event of a stream, read from an MCP backend; over it
# the call fails with -32004 and the connection is dropped.
GATEWAY_UPSTREAM_MAX_RESPONSE_BYTES = int(os.environ.get("GATEWAY_UPSTREAM_MAX_RESPONSE_BYTES", str(16 * 1024 * 1024)))
# Calls one instance forwards to one backend at once, for backends with no `max_concurrency` of
# their own (0: no limit); calls over it wait up to GATEWAY_BACKEND_QUEUE_SECONDS, then get -32004.
GATEWAY_BACKEND_MAX_CONCURRENCY = int(os.environ.get("GATEWAY_BACKEND_MAX_CONCURRENCY", "0"))
# How long an instance uses a person's token for a `per_person` backend before it looks in Redis
# again: a disconnected account can still be used here for this long (docs/identity.md).
GATEWAY_PERSON_TOKEN_FRESH_SECONDS = float(os.environ.get("GATEWAY_PERSON_TOKEN_FRESH_SECONDS", "5"))
GATEWAY_BACKEND_QUEUE_SECONDS = float(os.environ.get("GATEWAY_BACKEND_QUEUE_SECONDS", "5"))
# What a backend's event stream answering one request may bring (0: no cap): requests and
# notifications it sends the client during the call, bytes of events, and seconds since the call
# began. Past one, the call ends with -32004 and the backend request is cancelled.
GATEWAY_CALL_MAX_BACKEND_MESSAGES = int(os.environ.get("GATEWAY_CALL_MAX_BACKEND_MESSAGES", "1000"))
GATEWAY_CALL_MAX_STREAM_BYTES = int(os.environ.get("GATEWAY_CALL_MAX_STREAM_BYTES", str(64 * 1024 * 1024)))
GATEWAY_CALL_MAX_STREAM_SECONDS = float(os.environ.get("GATEWAY_CALL_MAX_STREAM_SECONDS", "3600"))
# On SIGTERM, how long calls in flight may still run before the instance cuts them and exits
# (keep it below the orchestrator's kill timeout: Kubernetes waits 30 s by default).
GATEWAY_SHUTDOWN_GRACE_SECONDS = float(os.environ.get("GATEWAY_SHUTDOWN_GRACE_SECONDS", "25"))

# Serve /static/ from the gateway process itself (development and tests; production uses nginx).
GATEWAY_SERVE_STATIC = env_bool("GATEWAY_SERVE_STATIC", False)
# --- Security (docs/security.md) ---
# Whether tenants without a setting of their own may reach backends, token endpoints and key sets
# at private addresses (loopback, RFC 1918, fc00::/7, ...). Link-local and metadata addresses never.
GATEWAY_ALLOW_PRIVATE_NETWORKS = env_bool("GATEWAY_ALLOW_PRIVATE_NETWORKS", False)
# The Content-Security-Policy and Permissions-Policy of the console, admin, REST API and its docs
# (no inline script or style anywhere; the audit tail's WebSocket is same-origin).
GATEWAY_CONTENT_SECURITY_POLICY = os.environ.get(
    "GATEWAY_CONTENT_SECURITY_POLICY",
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
)
GATEWAY_PERMISSIONS_POLICY = os.environ.get(
    "GATEWAY_PERMISSIONS_POLICY",
    "accelerometer=(), camera=(), geolocation=(), gyroscope=(), magnetometer=(), microphone=(), payment=(), usb=()",
)
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# Fernet keys for secrets at rest (egress credentials), newest first; empty: derived from the secret key.
GATEWAY_ENCRYPTION_KEYS = env_list("GATEWAY_ENCRYPTION_KEYS")
# The server key of API key and admin token hashes (HMAC-SHA256); empty: derived from the secret
# key. Set it to rotate GATEWAY_SECRET_KEY without invalidating every key; changing it invalidates them.
GATEWAY_KEY_HASH_SECRET = os.environ.get("GATEWAY_KEY_HASH_SECRET", "")
# Largest OpenAPI document accepted for upload, in bytes.
GATEWAY_SPEC_MAX_BYTES = int(os.environ.get("GATEWAY_SPEC_MAX_BYTES", str(50 * 1024 * 1024)))
# Largest response body read from an OpenAPI service; larger ones are a tool error.
GATEWAY_OPENAPI_MAX_RESPONSE_BYTES = int(os.environ.get("GATEWAY_OPENAPI_MAX_RESPONSE_BYTES", str(8 * 1024 * 1024)))

# --- Metrics and health (docs/observability.md) ---
# Bearer token a scraper must send to /metrics; empty: /metrics answers anyone who reaches it.
GATEWAY_METRICS_TOKEN = os.environ.get("GATEWAY_METRICS_TOKEN", "")
# Distinct tool and backend label values per process; later ones are counted as "other". Tool
# names also have a cap per tenant, so one tenant's names never push another's into "other".
GATEWAY_METRICS_MAX_TOOLS = int(os.environ.get("GATEWAY_METRICS_MAX_TOOLS", "1000"))
GATEWAY_METRICS_MAX_TOOLS_PER_TENANT = int(os.environ.get("GATEWAY_METRICS_MAX_TOOLS_PER_TENANT", "200"))
GATEWAY_METRICS_MAX_BACKENDS = int(os.environ.get("GATEWAY_METRICS_MAX_BACKENDS", "200"))
# How long /readyz waits for the database and for Redis (each) before calling it unreachable.
GATEWAY_READYZ_TIMEOUT_SECONDS = float(os.environ.get("GATEWAY_READYZ_TIMEOUT_SECONDS", "1"))
# How often beat schedules the worker heartbeat, and the age past which /readyz reports it.
GATEWAY_WORKER_HEARTBEAT_SECONDS = float(os.environ.get("GATEWAY_WORKER_HEARTBEAT_SECONDS", "15"))
GATEWAY_WORKER_HEARTBEAT_MAX_AGE_SECONDS = float(os.environ.get("GATEWAY_WORKER_HEARTBEAT_MAX_AGE_SECONDS", "120"))
# A missing or stale heartbeat in /readyz: "warn" (200, listed under warnings) or "fail" (503).
GATEWAY_READYZ_WORKER = os.environ.get("GATEWAY_READYZ_WORKER", "warn").strip().lower()
if GATEWAY_READYZ_WORKER not in {"warn", "fail"}:
    raise ValueError(f"GATEWAY_READYZ_WORKER must be 'warn' or 'fail', got {GATEWAY_READYZ_WORKER!r}")
CELERY_BEAT_SCHEDULE["worker-heartbeat"] = {
    "task": "apps.common.tasks.worker_heartbeat",
    "schedule": GATEWAY_WORKER_HEARTBEAT_SECONDS,
    # A heartbeat no worker took in time is dropped, not run late: a late run would say "alive now".
    "options": {"expires": GATEWAY_WORKER_HEARTBEAT_SECONDS},
}

# --- Tracing and logs (docs/observability.md, "Tracing" and "Logs") ---
# OpenTelemetry spans, exported by OTLP/HTTP: on when GATEWAY_TRACING is true, or when it is unset
# and OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) names a collector. The exporter, service
# name and sampler read the standard OTEL_* variables; OTEL_SDK_DISABLED=true turns it off.
GATEWAY_TRACING = env_bool("GATEWAY_TRACING", bool(
    os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
)) and not env_bool("OTEL_SDK_DISABLED", False)


def log_format(default: str) -> str:
    """GATEWAY_LOG_FORMAT: "json" (one object per line, with request, session and trace ids) or "plain"."""
    value = os.environ.get("GATEWAY_LOG_FORMAT", default).strip().lower()
    if value not in {"json", "plain"}:
        raise ValueError(f"GATEWAY_LOG_FORMAT must be 'json' or 'plain', got {value!r}")
    return value


LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "apps.gateway.logs.JsonFormatter"},
    },
    # Credentials in query strings (`?api_key=...`) never reach a log line (apps/common/log_redaction.py).
    "filters": {"redact": {"()": "apps.gateway.logs.RedactCredentials"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": log_format("plain"), "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("GATEWAY_LOG_LEVEL", "INFO")},
    "loggers": {"daphne": {"level": "WARNING"}, "django.channels.server": {"level": "WARNING"}},
}

# tool_search (docs/tool-search.md): the embedding model (a name in apps.retrieval.embeddings.PACKAGED_MODELS or
# a model directory), torch threads per process, and whether a backend's tools are indexed (in Celery)
# whenever they change.
GATEWAY_EMBEDDING_MODEL = os.environ.get("GATEWAY_EMBEDDING_MODEL", "all-MiniLM-L6-v2")
GATEWAY_EMBEDDING_THREADS = int(os.environ.get("GATEWAY_EMBEDDING_THREADS", "1"))
# Where a model run by ONNX Runtime (a name ending in "-int8") keeps the file exported from its weights.
GATEWAY_EMBEDDING_CACHE_DIR = Path(os.environ.get("GATEWAY_EMBEDDING_CACHE_DIR", VAR_DIR / "embeddings"))
GATEWAY_TOOL_INDEX = env_bool("GATEWAY_TOOL_INDEX", True)
# `tool_search: auto` lists the search tool alone on a host whose backends offer more tools than this.
GATEWAY_TOOL_SEARCH_AUTO_TOOLS = int(os.environ.get("GATEWAY_TOOL_SEARCH_AUTO_TOOLS", "64"))
# An MCP server that announces a tools list change is indexed again this many seconds after it (changes
# within that window are taken by the same run: apps/gateway/reindex.py).
GATEWAY_TOOL_REINDEX_SECONDS = float(os.environ.get("GATEWAY_TOOL_REINDEX_SECONDS", "5"))
