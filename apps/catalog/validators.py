"""Field rules the models cannot express without a migration, shared by services and the config
validator."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

from apps.common.url_guard import url_address_validate

REPLICA_URL_MAX_LENGTH = 500
_HOST_LABELS = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")


def replica_url_validate(url: str) -> None:
    """Accept an http(s) URL with a host. Unlike Django's URLValidator (what URLField checks) this
    allows single-label host names, because backends are routinely reached as `http://mcp-server:8000`
    inside Docker or Kubernetes networks."""
    message = f"invalid URL {url!r}: use http:// or https:// with a host name or IP address"
    if not isinstance(url, str) or len(url) > REPLICA_URL_MAX_LENGTH or any(ch.isspace() for ch in url):
        raise ValidationError(message)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as error:
        raise ValidationError(message) from error
    host = parts.hostname or ""
    if parts.scheme not in {"http", "https"} or not host:
        raise ValidationError(message)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not _HOST_LABELS.fullmatch(host):
            raise ValidationError(message) from None



def egress_url_validate(url: str, *, allow_private: bool) -> None:
    """`replica_url_validate`, then the SSRF guard on the URL's address (`url_address_validate`)."""
    replica_url_validate(url)
    url_address_validate(url, allow_private=allow_private)
