"""Fixture MCP server for the official `@modelcontextprotocol/conformance` server scenarios.

Serves Streamable HTTP at `/mcp` for both protocol eras on one endpoint (the SDK
routes by request shape):

* legacy sessions - `initialize` handshake, `Mcp-Session-Id`, 2024-11-05 ... 2025-11-25,
  with an in-memory event store so POST SSE streams get a priming event + `retry:`
  and can be resumed with `Last-Event-ID`;
* stateless 2026-07-28 - `server/discover`, per-request `_meta`, MRTR
  (`InputRequiredResult`), `subscriptions/listen`, caching hints, and the tasks
  extension (`io.modelcontextprotocol/tasks`, SEP-2663).

Run from the repository root:

    python -m tests.backends.conformance_server --host 127.0.0.1 --port 9100

Exposes every tool/resource/prompt name the scenarios call; see
`tests/backends/conformance/` for the pieces.
"""

from __future__ import annotations

import argparse
import functools
import logging
import warnings
from collections.abc import Sequence
from typing import Any

from mcp.server.caching import CACHEABLE_METHODS, CacheHint
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning
from starlette.applications import Starlette

from tests.backends.conformance.catalog import (
    WatchedResource,
    register_completion,
    register_prompts,
    register_resources,
)
from tests.backends.conformance.event_store import InMemoryEventStore
from tests.backends.conformance.legacy import LegacySessionState
from tests.backends.conformance.mrtr import register_mrtr
from tests.backends.conformance.tasks import TasksExtension
from tests.backends.conformance.tools import register_tools, schema_tools

SERVER_NAME = "mcp-conformance-fixture"
SERVER_VERSION = "1.0.0"
MCP_PATH = "/mcp"
# Suggested reconnect delay sent in the SSE priming event's `retry:` field (ms).
SSE_RETRY_MS = 1000


def build_server() -> MCPServer[Any]:
    """Create the fixture server with every scenario tool, resource and prompt registered."""
    # The tasks extension brings its own tools and tasks/* methods and intercepts tools/call;
    # its middleware checks Mcp-Name on tasks/* (the SDK checks it for named methods only).
    tasks = TasksExtension()
    server: MCPServer[Any] = MCPServer(
        SERVER_NAME,
        version=SERVER_VERSION,
        instructions="Fixture server for the MCP conformance suite.",
        tools=schema_tools(),
        # SEP-2549: every cacheable result must carry ttlMs/cacheScope. The lists can
        # change at runtime (test_trigger_*), so nothing is fresh for long.
        cache_hints={method: CacheHint(ttl_ms=0, scope="private") for method in CACHEABLE_METHODS},
        extensions=[tasks],
        middleware=[tasks.check_task_name_header],
    )
    legacy = LegacySessionState()
    watched = WatchedResource()
    register_tools(server, legacy, watched)
    register_mrtr(server)
    register_resources(server, watched)
    register_prompts(server)
    register_completion(server)
    # MCPServer wires no logging/subscribe handlers; the low-level server is the SDK's
    # documented place to re-provide these handshake-era methods.
    lowlevel = server._lowlevel_server  # pyright: ignore[reportPrivateUsage]
    legacy.install(lowlevel)
    # Legacy `initialize` advertises listChanged only via NotificationOptions, which
    # MCPServer never passes; the test_trigger_* / test_update_watched_resource tools do
    # send those notifications, so declare them. (On 2026-07-28 the SDK derives the
    # flags from `subscriptions/listen` being served and ignores these options.)
    lowlevel.create_initialization_options = functools.partial(  # type: ignore[method-assign]
        lowlevel.create_initialization_options,
        NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True),
    )
    return server


def build_app(server: MCPServer[Any] | None = None, *, host: str = "127.0.0.1", transport: str = "streamable-http") -> Starlette:
    """The ASGI app. `host` decides DNS-rebinding protection: the SDK enables Host/Origin
    checks (403 for foreign hosts) when bound to a loopback address. `transport` "sse" serves
    the HTTP+SSE transport of 2024-11-05 instead (GET /sse, POST /messages/)."""
    server = server or build_server()
    if transport == "sse":
        return server.sse_app(host=host)
    return server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        event_store=InMemoryEventStore(),
        retry_interval=SSE_RETRY_MS,
        host=host,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--transport", default="streamable-http", choices=["streamable-http", "sse"])
    args = parser.parse_args(argv)

    # The fixture deliberately uses capabilities deprecated in 2026-07-28 (logging,
    # sampling, roots) because the legacy scenarios exercise them.
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    logging.basicConfig(level=args.log_level.upper())

    import uvicorn

    uvicorn.run(build_app(host=args.host, transport=args.transport), host=args.host, port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
