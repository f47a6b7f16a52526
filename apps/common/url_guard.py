"""The SSRF guard (apps.common.netguard) when a URL is saved: a clear error naming the URL and the
reason, before anything is stored. The gateway checks again whenever it connects."""

from __future__ import annotations

import ipaddress
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

from apps.common.netguard import AddressRefused, host_verdict, resolve_checked_sync

_RESOLVE_SECONDS = 2.0
_resolver = ThreadPoolExecutor(max_workers=2, thread_name_prefix="url-check")


def url_address_validate(url: str, *, allow_private: bool, resolve: bool = True) -> None:
    """Refuse `url` when its host is not one the gateway may connect to: a literal address or a
    metadata service name is judged as it is; with `resolve`, a name is judged by the addresses it
    resolves to now (a name that does not resolve here, or not within two seconds, passes: it is
    judged again whenever the gateway connects to it)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return  # not a URL: the caller's syntax check says so
    verdict = host_verdict(host, allow_private=allow_private)
    if verdict.reason is not None:
        raise ValidationError(f"the URL {url!r} is not allowed: {host} {verdict.reason}")
    if not resolve or not host or _literal(host):
        return
    future = _resolver.submit(resolve_checked_sync, host, port, allow_private=allow_private)
    try:
        future.result(timeout=_RESOLVE_SECONDS)
    except AddressRefused as exc:
        raise ValidationError(f"the URL {url!r} is not allowed: {exc}") from None
    except (OSError, FutureTimeout, UnicodeError):
        return


def _literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
