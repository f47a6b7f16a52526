"""Local development: `make run`. A secret key is generated once and kept under var/."""

import secrets

from .base import *  # noqa: F403
from .base import SECRET_KEY, VAR_DIR, env_bool

# Django's debug pages show settings, tracebacks and their locals to whoever reaches the port:
# only when asked for (GATEWAY_DEBUG=1).
DEBUG = env_bool("GATEWAY_DEBUG", False)
GATEWAY_SERVE_STATIC = env_bool("GATEWAY_SERVE_STATIC", True)
# The demo backends of `make run` listen on loopback.
GATEWAY_ALLOW_PRIVATE_NETWORKS = env_bool("GATEWAY_ALLOW_PRIVATE_NETWORKS", True)

if not SECRET_KEY:
    _key_file = VAR_DIR / "secret_key"
    if not _key_file.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        _key_file.write_text(secrets.token_urlsafe(48))
        _key_file.chmod(0o600)
    SECRET_KEY = _key_file.read_text().strip()
