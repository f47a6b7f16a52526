"""Reading OAuth servers' metadata (RFC 8414, OpenID discovery, RFC 9728) as a client: every URL
through the SSRF guard, https only (http on loopback), plain host names only, answers capped. For
the gateway's clients of other servers: people's connected accounts and the token-exchange check."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from apps.common.guarded_http import address_refusal

MAX_DOCUMENT = 64 * 1024
_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
_HOST = re.compile(r"[A-Za-z0-9.-]{1,253}|[0-9a-fA-F:.]{2,45}")  # a name, an IPv4 or an IPv6 address
_UNSAFE = re.compile(r"[\x00-\x20\x7f;,'\"<>\\]")


class MetadataUnavailable(Exception):
    """A server's metadata cannot be had or used; the message says which and why."""


def secure_url(url: str, what: str) -> str:
    """`url` when it is an https URL (http on loopback) with a plain host name or address: what
    servers' metadata names may later go into headers (a page's Content-Security-Policy)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError:
        raise MetadataUnavailable(f"{what} {url[:200]!r} is not a URL") from None
    host = parts.hostname or ""
    if not _HOST.fullmatch(host) or parts.username is not None or _UNSAFE.search(url):
        raise MetadataUnavailable(f"{what} {url[:200]!r} is not a URL with a plain host name")
    if parts.scheme == "https" or (parts.scheme == "http" and host in _LOOPBACK):
        return url
    raise MetadataUnavailable(f"{what} {url[:200]!r} is not an https URL (plain http is for loopback addresses only)")


def json_fetch(http: httpx.Client, method: str, url: str, what: str, **kwargs: Any) -> tuple[int, Any, httpx.Headers]:
    """(status, the JSON answer or None, headers) of one request; at most MAX_DOCUMENT is read."""
    try:
        with http.stream(method, url, **kwargs) as response:
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT:
                    raise MetadataUnavailable(f"{what} at {url} is larger than {MAX_DOCUMENT // 1024} KiB")
    except httpx.HTTPError as exc:
        refusal = address_refusal(exc)
        if refusal is not None:
            raise MetadataUnavailable(f"{what} at {url}: the address is not allowed ({refusal.reason})") from None
        raise MetadataUnavailable(f"{what} at {url} cannot be reached ({type(exc).__name__})") from None
    try:
        return response.status_code, httpx.Response(200, content=body).json(), response.headers
    except ValueError:
        return response.status_code, None, response.headers


def well_known(url: str, name: str, *, suffix: bool = False) -> str:
    """RFC 8414 §3.1 / RFC 9728 §3.1: the well-known name goes between the host and the path
    (`suffix`: OpenID's own way, after the path)."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    joined = f"{path}/.well-known/{name}" if suffix else f"/.well-known/{name}{path}"
    return urlunsplit((parts.scheme, parts.netloc, joined, "", ""))


def server_metadata(http: httpx.Client, issuer: str) -> dict[str, Any]:
    """The authorization server's metadata (RFC 8414, else OpenID discovery), about `issuer` itself
    and naming its authorization and token endpoints; raises MetadataUnavailable."""
    candidates = [well_known(issuer, "oauth-authorization-server"), well_known(issuer, "openid-configuration")]
    if urlsplit(issuer).path.strip("/"):
        candidates.append(well_known(issuer, "openid-configuration", suffix=True))
    for candidate in candidates:
        status, body, _ = json_fetch(http, "GET", candidate, "the authorization server's metadata")
        if status != 200 or not isinstance(body, dict):
            continue
        if body.get("issuer") != issuer:  # RFC 8414 §3.3: a document about another server is not used
            raise MetadataUnavailable(f"the authorization server's metadata at {candidate} names the issuer "
                                      f"{str(body.get('issuer'))[:200]!r}, not {issuer!r}")
        for field in ("authorization_endpoint", "token_endpoint"):
            if not isinstance(body.get(field), str):
                raise MetadataUnavailable(f"the authorization server's metadata has no {field}")
        return body
    raise MetadataUnavailable(f"the authorization server {issuer} publishes no metadata at {', '.join(candidates)}")
