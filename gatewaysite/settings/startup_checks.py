"""What the production settings refuse to start with (docs/security.md, "Production settings"):
missing or default secrets, example passwords in service URLs, and host lists that accept any host.

Pure functions of the environment, so that every refusal can be shown by importing the settings in
a process with a controlled environment."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlsplit

_SECRET_MIN_LENGTH = 32
_SECRET_MIN_DISTINCT = 10
#: Values seen in examples, documentation, tests and tutorials; never a production secret.
KNOWN_SECRETS = frozenset({
    "test-secret-key-not-for-production-0123456789",  # gatewaysite/settings/test.py
    "changeme", "change-me", "change_me", "changethis", "secret", "secret-key", "secretkey", "password",
    "insecure", "development", "example", "your-secret-key", "your-secret-key-here", "replace-me",
})
_KNOWN_SECRET_PARTS = ("django-insecure", "changeme", "change-me", "change_me", "not-for-production", "your-secret",
                       "replace-me", "example-secret", "dev-secret")
#: Passwords of examples and images' defaults, for the database and Redis.
KNOWN_PASSWORDS = frozenset({
    "postgres", "password", "changeme", "change-me", "secret", "gateway", "example", "admin", "root", "redis",
    "pass", "test", "123456",
})


def secret_key_problem(key: str, *, dev_key_file: Path | None = None) -> str | None:
    """Why `key` may not be the production secret key, or None."""
    if not key:
        return "GATEWAY_SECRET_KEY is not set: set it to at least 32 random characters (openssl rand -base64 48)"
    low = key.lower()
    if low in KNOWN_SECRETS or any(part in low for part in _KNOWN_SECRET_PARTS):
        return "GATEWAY_SECRET_KEY is an example or default value: generate one (openssl rand -base64 48)"
    if len(key) < _SECRET_MIN_LENGTH:
        return f"GATEWAY_SECRET_KEY has {len(key)} characters: use at least {_SECRET_MIN_LENGTH} random ones"
    if len(set(key)) < _SECRET_MIN_DISTINCT:
        return "GATEWAY_SECRET_KEY repeats a few characters: generate a random one (openssl rand -base64 48)"
    if dev_key_file is not None and dev_key_file.is_file():
        try:
            dev_key = dev_key_file.read_text().strip()
        except OSError:
            dev_key = ""
        if dev_key and dev_key == key:
            return (f"GATEWAY_SECRET_KEY is the development key generated into {dev_key_file}: generate a "
                    "production key of its own")
    return None


def url_password_problem(name: str, url: str) -> str | None:
    """Why the service URL in variable `name` may not be used, or None. A URL without a password
    passes (peer, certificate or socket authentication); a default or example one does not."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return f"{name} is not a URL"
    password = unquote(parts.password or "")
    if password and (password.lower() in KNOWN_PASSWORDS or password.lower() == unquote(parts.username or "").lower()):
        return f"{name} carries a default or example password: set a random one (openssl rand -hex 24)"
    return None


def allowed_hosts_problem(hosts: list[str], *, any_host_allowed: bool) -> str | None:
    """Why the host list is refused, or None: empty, or a wildcard without the explicit opt-in."""
    if not hosts:
        return "GATEWAY_ALLOWED_HOSTS is empty: list the host names clients use (e.g. mcp.example.com)"
    if "*" in hosts and not any_host_allowed:
        return ("GATEWAY_ALLOWED_HOSTS contains '*', which accepts any Host header: list the host names clients use, "
                "or set GATEWAY_ALLOW_ANY_HOST=true if a proxy in front checks them")
    return None


def production_problems(
    environ: Mapping[str, str], *, secret_key: str, allowed_hosts: list[str], any_host_allowed: bool,
    dev_key_file: Path | None,
) -> list[str]:
    """Every reason the production settings refuse to start, in the order an operator fixes them."""
    problems = [
        secret_key_problem(secret_key, dev_key_file=dev_key_file),
        *(f"{name} must be set in production" for name in ("DATABASE_URL", "REDIS_URL") if not environ.get(name)),
        *(url_password_problem(name, environ[name]) for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")
          if environ.get(name)),
        allowed_hosts_problem(allowed_hosts, any_host_allowed=any_host_allowed),
    ]
    return [problem for problem in problems if problem]
