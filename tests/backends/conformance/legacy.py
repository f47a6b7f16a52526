"""Handshake-era methods that `MCPServer` does not wire itself.

`logging/setLevel`, `resources/subscribe` and `resources/unsubscribe` exist up to
2025-11-25 and were removed in 2026-07-28. They are registered on the low-level
`Server` (the SDK's documented route for re-providing removed spec methods); the
runner's per-version method table keeps them unreachable on the 2026 wire, where
they must answer 404 + -32601 (`server-stateless` checks that).

State is keyed by the `Mcp-Session-Id` header: on the legacy wire every request of
a session carries it, and the fixture has no other per-session identity to hang
state on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp_types import (
    EmptyResult,
    LoggingLevel,
    SetLevelRequestParams,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
)

_LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)  # severity-ascending (RFC 5424 order)


def session_key(request_context: ServerRequestContext[Any, Any]) -> str | None:
    headers: Mapping[str, str] | None = getattr(request_context.request, "headers", None)
    return headers.get("mcp-session-id") if headers is not None else None


@dataclass
class LegacySessionState:
    """Per-session log threshold and resource subscriptions."""

    log_levels: dict[str, LoggingLevel] = field(default_factory=dict)
    subscriptions: dict[str, set[str]] = field(default_factory=dict)

    def should_log(self, key: str | None, level: LoggingLevel) -> bool:
        # Until the client sets a level, everything goes out (spec default: server decides).
        threshold = self.log_levels.get(key or "", "debug")
        return _LEVELS.index(level) >= _LEVELS.index(threshold)

    def is_subscribed(self, key: str | None, uri: str) -> bool:
        return uri in self.subscriptions.get(key or "", set())

    def install(self, server: Server[Any]) -> None:
        async def set_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
            self.log_levels[session_key(ctx) or ""] = params.level
            return EmptyResult()

        async def subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
            self.subscriptions.setdefault(session_key(ctx) or "", set()).add(str(params.uri))
            return EmptyResult()

        async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
            self.subscriptions.get(session_key(ctx) or "", set()).discard(str(params.uri))
            return EmptyResult()

        server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
        server.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
        server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
