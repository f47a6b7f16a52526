"""Production: every secret and address must come from the environment."""

import os

from .base import *  # noqa: F403
from .base import SECRET_KEY

if not SECRET_KEY or len(SECRET_KEY) < 32:
    raise RuntimeError("GATEWAY_SECRET_KEY must be set to at least 32 random characters")
for _name in ("DATABASE_URL", "REDIS_URL"):
    if not os.environ.get(_name):
        raise RuntimeError(f"{_name} must be set in production")

SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
