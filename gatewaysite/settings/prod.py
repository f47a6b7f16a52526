"""Production: every secret and address must come from the environment, and the process refuses
to start with a missing, default or example secret (docs/security.md, "Production settings")."""

import os

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import ALLOWED_HOSTS, LOGGING, SECRET_KEY, VAR_DIR, env_bool, log_format
from .startup_checks import production_problems

_problems = production_problems(
    os.environ, secret_key=SECRET_KEY, allowed_hosts=ALLOWED_HOSTS,
    any_host_allowed=env_bool("GATEWAY_ALLOW_ANY_HOST", False), dev_key_file=VAR_DIR / "secret_key",
)
if _problems:
    raise ImproperlyConfigured("the production settings refuse to start:\n- " + "\n- ".join(_problems))

SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
# TLS terminates at the proxy in front (nginx), which says so in X-Forwarded-Proto; a gateway
# reached without such a proxy must not trust the header (GATEWAY_TRUST_X_FORWARDED_PROTO=false).
if env_bool("GATEWAY_TRUST_X_FORWARDED_PROTO", True):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# HSTS on requests that came over TLS: a year, for the gateway's host and its subdomains.
SECURE_HSTS_SECONDS = int(os.environ.get("GATEWAY_HSTS_SECONDS", "31536000"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("GATEWAY_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("GATEWAY_HSTS_PRELOAD", False)
# Plain HTTP is redirected to HTTPS by the TLS-terminating proxy, not here: the health checks and
# in-cluster MCP clients speak plain HTTP to the gateway itself. GATEWAY_SSL_REDIRECT=true makes the
# gateway redirect too (health and metrics endpoints excepted).
SECURE_SSL_REDIRECT = env_bool("GATEWAY_SSL_REDIRECT", False)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SILENCED_SYSTEM_CHECKS = [
    # Deliberate and documented (docs/security.md): the proxy redirects (W008) when the gateway
    # does not; preloading (W021) commits the whole registrable domain, the owner's decision. Set
    # either and its check is no longer silenced.
    *([] if SECURE_SSL_REDIRECT else ["security.W008"]),
    *([] if SECURE_HSTS_PRELOAD else ["security.W021"]),
]

# Log collectors read one JSON object per line (GATEWAY_LOG_FORMAT=plain for people reading a terminal).
LOGGING["handlers"]["console"]["formatter"] = log_format("json")
