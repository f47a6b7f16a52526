"""Clients known by the URL of their metadata document (Client ID Metadata Documents, the way MCP
prefers since 2025-11-25): the `client_id` is an https URL; the server fetches the JSON document
there — through the SSRF guard, no redirects followed, a size cap — checks it as it checks a
registration, and keeps it (fetched again when older than DOCUMENT_SECONDS)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.utils import timezone

from apps.common.guarded_http import address_refusal, guarded_client
from apps.oauth.models import OAuthClient
from apps.oauth.registration import REDIRECT_URIS_MAX, URI_MAX, redirect_uri_problem
from apps.tenants.models import Tenant

log = logging.getLogger(__name__)

DOCUMENT_BYTES_MAX = 16 * 1024
DOCUMENT_SECONDS = 600
DOCUMENTS_MAX = 10_000  # clients known by a document, per tenant
FETCH_TIMEOUT_SECONDS = 5.0
_GRANT_TYPES = {"authorization_code", "refresh_token"}


class ClientDocumentRefused(Exception):
    """The client's metadata document cannot be used; the message says why (shown to the person)."""


def is_document_url(client_id: str) -> bool:
    """Whether `client_id` names a metadata document: an https URL with a path beyond `/`."""
    parts = urlsplit(client_id)
    return parts.scheme == "https" and bool(parts.hostname) and parts.path not in ("", "/")


def client_document_get(
    *, tenant: Tenant, url: str, http: Callable[[], httpx.Client] | None = None,
) -> OAuthClient:
    """The client the document at `url` describes, fetched now unless it was within
    DOCUMENT_SECONDS. `http` makes the client to fetch with (the SSRF-guarded one by default, with
    the tenant's private-network setting). Raises ClientDocumentRefused."""
    if len(url) > URI_MAX or "#" in url or "@" in urlsplit(url).netloc:
        raise ClientDocumentRefused("the client id must be an https URL without a fragment or a user part")
    kept = OAuthClient.objects.filter(tenant=tenant, client_id=url).first()
    if kept is not None and kept.kind != OAuthClient.Kind.METADATA_DOCUMENT:
        raise ClientDocumentRefused("that client id belongs to a registered client")
    if kept is not None and kept.updated_at > timezone.now() - timedelta(seconds=DOCUMENT_SECONDS):
        return kept
    failed = _FAILED.get((tenant.pk, url))
    if failed is not None and failed[0] > time.monotonic():
        raise ClientDocumentRefused(failed[1])
    if kept is None and OAuthClient.objects.filter(tenant=tenant, kind=OAuthClient.Kind.METADATA_DOCUMENT).count() >= DOCUMENTS_MAX:
        raise ClientDocumentRefused("this authorization server knows as many client metadata documents as it may")
    try:
        metadata = _checked(url, _fetch(url, http or (lambda: guarded_client(
            allow_private=tenant.private_networks_allowed, timeout=FETCH_TIMEOUT_SECONDS))))
    except ClientDocumentRefused as exc:
        if len(_FAILED) > 10_000:
            _FAILED.clear()
        _FAILED[(tenant.pk, url)] = (time.monotonic() + _FAILED_SECONDS, str(exc))
        raise
    fields = {"kind": OAuthClient.Kind.METADATA_DOCUMENT, "client_name": str(metadata.get("client_name") or "")[:200],
              "redirect_uris": metadata["redirect_uris"], "metadata": metadata}
    found, _ = OAuthClient.objects.update_or_create(tenant=tenant, client_id=url, defaults=fields)
    return found


#: (tenant id, URL) -> until when a document that could not be had is not asked for again.
_FAILED: dict[tuple[int, str], tuple[float, str]] = {}
_FAILED_SECONDS = 60


def _fetch(url: str, make: Callable[[], httpx.Client]) -> Any:
    """The document's JSON. What went wrong is said in general terms to the person (an address or a
    port must not be told apart from outside) and in full in the log."""
    deadline = time.monotonic() + FETCH_TIMEOUT_SECONDS  # for the whole fetch, not each read
    try:
        with make() as http, http.stream("GET", url, headers={"Accept": "application/json"}) as response:
            if response.is_redirect:
                raise ClientDocumentRefused("the client's metadata document answered a redirect: "
                                            "it must be served at its client id itself")
            if response.status_code != 200:
                log.info("client metadata document %s answered HTTP %s", url, response.status_code)
                raise ClientDocumentRefused("the client's metadata document could not be fetched")
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > DOCUMENT_BYTES_MAX:
                    raise ClientDocumentRefused(f"the client's metadata document is over {DOCUMENT_BYTES_MAX} bytes")
                if time.monotonic() > deadline:
                    raise ClientDocumentRefused("the client's metadata document took too long to fetch")
    except httpx.HTTPError as exc:
        log.info("client metadata document %s not fetched: %s (%s)", url, type(exc).__name__, address_refusal(exc) or exc)
        raise ClientDocumentRefused("the client's metadata document could not be fetched") from None
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ClientDocumentRefused("the client's metadata document is not JSON") from None


def _checked(url: str, document: Any) -> dict[str, Any]:
    """The document, checked as a registration is (and its `client_id` must be its own URL)."""
    if not isinstance(document, dict):
        raise ClientDocumentRefused("the client's metadata document must be a JSON object")
    if document.get("client_id") != url:
        raise ClientDocumentRefused("the client's metadata document names another client_id than its URL")
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not uris or len(uris) > REDIRECT_URIS_MAX:
        raise ClientDocumentRefused(f"the client's metadata document must list 1 to {REDIRECT_URIS_MAX} redirect_uris")
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem:
            raise ClientDocumentRefused(f"the client's metadata document: {problem}")
    method = document.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise ClientDocumentRefused(f"the client's metadata document asks for token_endpoint_auth_method {method!r}: "
                                    "only public clients ('none') are taken here")
    asked = document.get("grant_types") or ["authorization_code"]
    kept = {g for g in asked if isinstance(g, str)} & _GRANT_TYPES if isinstance(asked, list) else set()
    if "authorization_code" not in kept:
        raise ClientDocumentRefused("the client's metadata document must allow the authorization_code grant")
    name = document.get("client_name")
    if name is not None and not isinstance(name, str):
        raise ClientDocumentRefused("the client's metadata document's client_name must be text")
    return {**document, "grant_types": sorted(kept), "token_endpoint_auth_method": "none"}
