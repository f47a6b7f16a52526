"""An MCP backend's tools as its server lists them, fetched off the request path for the tool index
(apps.retrieval), with the gateway's own client: every page, the backend's first reachable replica,
and the credential the backend expects from the gateway itself (its default)."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings

from apps.catalog.models import Backend
from apps.gateway.adapters.channel_mailbox import ChannelMailbox
from apps.gateway.adapters.egress_credentials import OAuthTokens, egress_plan_build
from apps.gateway.adapters.http_upstream import http_upstream
from apps.gateway.pipeline.backend_client import BackendClient
from apps.gateway.pipeline.backends import BackendCatalog
from apps.gateway.pipeline.listing import ListCaps, Page, collect_all_pages
from apps.gateway.pipeline.metrics import Counters
from apps.gateway.pipeline.values import BackendView


def mcp_tools_fetch(*, backend: Backend, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Every tool the MCP backend lists now. Raises (UpstreamUnavailable, TimeoutError,
    PaginationError, ListTooLarge past `backend_list_caps`, BackendRefused, ...) when it cannot be
    had: the caller keeps what it had."""
    view = BackendView(
        id=backend.pk,
        name=backend.name,
        transport=backend.transport,
        urls=tuple(replica.url for replica in backend.replicas.all()),
        timeout=backend.timeout_seconds,
        # An OAuth client-credentials backend gets a token of this fetch's own (no fleet cache: one
        # fetch per indexing run).
        egress=egress_plan_build(
            backend=backend, tokens=OAuthTokens(None), allow_private=backend.tenant.private_networks_allowed
        ),
        allow_private=backend.tenant.private_networks_allowed,
    )
    return asyncio.run(_fetch(view, timeout))


def backend_list_caps() -> ListCaps:
    """How much of one backend's list the gateway takes in (GATEWAY_BACKEND_MAX_TOOLS,
    GATEWAY_BACKEND_MAX_LIST_BYTES): for the lists it merges and for the tool index alike."""
    return ListCaps(max_items=settings.GATEWAY_BACKEND_MAX_TOOLS, max_bytes=settings.GATEWAY_BACKEND_MAX_LIST_BYTES)


async def _fetch(view: BackendView, timeout: float) -> list[dict[str, Any]]:
    layer = get_channel_layer()
    upstream = http_upstream(layer=layer, mailbox=ChannelMailbox(layer, Counters()),
                             max_response_bytes=settings.GATEWAY_UPSTREAM_MAX_RESPONSE_BYTES)
    client = BackendClient(upstream, BackendCatalog(upstream))

    async def fetch_page(cursor: str | None, allowance: int | None) -> Page:
        return await client.sized_request(view, "tools/list", {"cursor": cursor} if cursor else {}, max_bytes=allowance)

    try:
        async with asyncio.timeout(timeout):
            return await collect_all_pages(fetch_page, "tools", backend_list_caps())
    finally:
        upstream.close()
