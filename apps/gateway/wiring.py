"""Plugs the pipeline's ports into their implementations. One `Gateway` per event loop: HTTP
pools and Redis clients belong to the loop that made them."""

from __future__ import annotations

import asyncio
import functools

import redis.asyncio
from channels.layers import BaseChannelLayer, get_channel_layer
from django.conf import settings

from apps.audit.writer import AuditWriter
from apps.common.redis import async_redis_client
from apps.common.secrets import derived_key
from apps.gateway.adapters.channel_mailbox import ChannelMailbox
from apps.gateway.adapters.egress_credentials import OAuthTokens
from apps.gateway.adapters.http_upstream import HttpUpstream, http_upstream
from apps.gateway.adapters.http_webhooks import HttpHooks
from apps.gateway.adapters.index_tool_finder import IndexFinder
from apps.gateway.adapters.openapi_tool_server import OpenApiHttp
from apps.gateway.adapters.otel_tracing import gateway_tracing
from apps.gateway.adapters.redis_change_feed import RedisChangeFeed
from apps.gateway.adapters.redis_health_feed import RedisHealthFeed
from apps.gateway.adapters.redis_pubsub import RedisSubscription
from apps.gateway.adapters.redis_rate_limiter import RedisRateLimiter
from apps.gateway.adapters.redis_session_store import RedisSessionStore
from apps.gateway.adapters.snapshot_directory import SnapshotDirectory
from apps.gateway.pipeline.answers import StreamCaps
from apps.gateway.pipeline.gateway import Gateway, GatewaySettings
from apps.gateway.pipeline.host_lists import ListSettings
from apps.gateway.pipeline.listing import PageLimits
from apps.gateway.pipeline.metrics import Counters
from apps.gateway.prometheus import metric_label_caps
from apps.gateway.reindex import ToolReindex, tool_reindex_enqueue
from apps.gateway.tool_lists import backend_list_caps
from apps.tenants.token_verifier import JwtVerifier

_gateways: dict[int, Gateway] = {}
_upstreams: dict[int, HttpUpstream] = {}


@functools.cache
def audit_writer() -> AuditWriter:
    return AuditWriter(interval=settings.GATEWAY_AUDIT_FLUSH_SECONDS)


def gateway_settings() -> GatewaySettings:
    hosts = frozenset(h.lower() for h in settings.ALLOWED_HOSTS if h != "*")
    return GatewaySettings(
        max_body_bytes=settings.GATEWAY_MAX_BODY_BYTES,
        allowed_origins=frozenset(settings.GATEWAY_ALLOWED_ORIGINS),
        allowed_hosts=frozenset() if "*" in settings.ALLOWED_HOSTS else hosts,
        cursor_secret=derived_key(settings.SECRET_KEY, b"mcp-gateway list cursors v1"),
        audit_hash_key=derived_key(settings.SECRET_KEY, b"mcp-gateway audit argument hashes v1"),
        session_sweep_seconds=settings.GATEWAY_SESSION_SWEEP_SECONDS,
        backend_queue_seconds=settings.GATEWAY_BACKEND_QUEUE_SECONDS,
        stream_caps=StreamCaps(
            max_messages=settings.GATEWAY_CALL_MAX_BACKEND_MESSAGES or None,
            max_bytes=settings.GATEWAY_CALL_MAX_STREAM_BYTES or None,
            max_seconds=settings.GATEWAY_CALL_MAX_STREAM_SECONDS or None,
        ),
        request_state_secret=derived_key(settings.SECRET_KEY, b"mcp-gateway request states v1"),
        max_batch_items=settings.GATEWAY_MAX_BATCH_ITEMS,
        batch_concurrency=settings.GATEWAY_BATCH_CONCURRENCY,
        max_client_metadata_bytes=settings.GATEWAY_MAX_CLIENT_METADATA_BYTES,
        lists=ListSettings(
            pages=PageLimits(items=settings.GATEWAY_LIST_PAGE_SIZE, bytes=settings.GATEWAY_LIST_PAGE_BYTES),
            timeout=settings.GATEWAY_LIST_TIMEOUT_SECONDS,
            cache_seconds=settings.GATEWAY_LIST_CACHE_SECONDS,
            caps=backend_list_caps(),
        ),
    )


def tool_reindex(client: redis.asyncio.Redis) -> ToolReindex | None:
    """What asks for an MCP server's tools to be indexed again when it announces a change (none
    when tool indexing is off)."""
    if not settings.GATEWAY_TOOL_INDEX:
        return None
    return ToolReindex(client, delay_seconds=settings.GATEWAY_TOOL_REINDEX_SECONDS, enqueue=tool_reindex_enqueue)


def all_gateways() -> list[Gateway]:
    """Every gateway of this process (one per event loop that served MCP requests)."""
    return list(_gateways.values())


def _upstream_for(loop_id: int, layer: BaseChannelLayer, mailbox: ChannelMailbox) -> HttpUpstream:
    upstream = _upstreams[loop_id] = http_upstream(
        layer=layer, mailbox=mailbox, max_response_bytes=settings.GATEWAY_UPSTREAM_MAX_RESPONSE_BYTES
    )
    return upstream


def upstreams_close() -> None:
    """Close the idle pooled connections to backends of every gateway of this process (at exit;
    backend sessions stay open: the downstream sessions using them go on on other instances)."""
    for upstream in _upstreams.values():
        upstream.close()


def gateway() -> Gateway:
    loop_id = id(asyncio.get_running_loop())
    instance = _gateways.get(loop_id)
    if instance is None:
        client = async_redis_client()
        counters = Counters(caps=metric_label_caps())
        layer = get_channel_layer()
        mailbox = ChannelMailbox(layer, counters)
        subscription = RedisSubscription(client)  # one per gateway, for both feeds
        feed_id = f"{settings.GATEWAY_INSTANCE_ID}:{loop_id}"
        instance = Gateway(
            directory=SnapshotDirectory(
                client, check_seconds=settings.GATEWAY_SNAPSHOT_CHECK_SECONDS, http=OpenApiHttp(),
                tokens=OAuthTokens(client, key=derived_key(settings.SECRET_KEY, b"mcp-gateway oauth token cache v1")),
                counters=counters,
            ),
            sessions=RedisSessionStore(
                client,
                secret=settings.SECRET_KEY,
                instance=settings.GATEWAY_INSTANCE_ID,
                ttl_seconds=settings.GATEWAY_SESSION_TTL_SECONDS,
                counters=counters,
                max_sessions_per_key=settings.GATEWAY_MAX_SESSIONS_PER_KEY,
            ),
            upstream=_upstream_for(loop_id, layer, mailbox),
            audit=audit_writer(),
            settings=gateway_settings(),
            changes=RedisChangeFeed(client, instance=feed_id, reindex=tool_reindex(client), subscription=subscription),
            health=RedisHealthFeed(client, subscription, instance=feed_id, name=settings.GATEWAY_INSTANCE_ID),
            limiter=RedisRateLimiter(client, fail_open=settings.GATEWAY_RATE_LIMIT_FAIL_OPEN),
            tokens=JwtVerifier(),
            finder=IndexFinder(),
            mailbox=mailbox,
            counters=counters,
            tracing=gateway_tracing(),
            hooks=HttpHooks(),
        )
        _gateways[loop_id] = instance
        instance.start()  # on this loop, which serves it
    return instance
