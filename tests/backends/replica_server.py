"""One replica of a stateful MCP backend (official SDK, Streamable HTTP, in-memory sessions), for the
scale-out harness (bench/cluster, tests/cluster).

Each replica is its own process, so its sessions exist nowhere else: a request that a gateway routes
to the wrong replica for its session is answered by the SDK's 404 "Session not found". That is the
property the harness relies on — /stats counts those 404s, and it must stay at zero.

It speaks only the handshake era (it refuses 2026-07-28 stateless requests the way a pre-2026 server
does), so the gateway has to open and hold backend sessions for every client, stateless ones too.

Tools:
  increment  -> {"replica", "count"}: the session's running count, one more on every call
  whoami     -> {"replica", "routing_hash"}: the `X-MCP-Routing-Hash` header this request carried

GET /stats -> {"replica", "requests", "not_found", "initialize", "sessions"}

Run: python -m tests.backends.replica_server --port 9101 --replica alpha-1"""

from __future__ import annotations

import argparse
import json
import logging
from collections import Counter
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

from tests.backends.asgi import read_body
from tests.backends.era_server import only

stats: Counter[str] = Counter()
counts: dict[str, int] = {}


def build_server(replica: str) -> MCPServer:
    server = MCPServer(f"replica-{replica}", instructions="A stateful counter; each replica knows only its own sessions.")

    @server.tool()
    def increment(ctx: Context) -> str:
        """Add one to this session's counter and return it, with the replica's name."""
        session = _session_id(ctx)
        counts[session] = counts.get(session, 0) + 1
        return json.dumps({"replica": replica, "count": counts[session]})

    @server.tool()
    def whoami(ctx: Context) -> str:
        """The replica's name and the X-MCP-Routing-Hash header this request carried (null if none)."""
        headers = ctx.headers or {}
        return json.dumps({"replica": replica, "routing_hash": headers.get("x-mcp-routing-hash")})

    return server


def _session_id(ctx: Context) -> str:
    # The SDK has already checked that the id names one of this process's sessions, so it is a safe key.
    return (ctx.headers or {}).get("mcp-session-id", "")


def counting(replica: str, app: Any) -> Any:
    """Serves /stats, and counts every other request and every 404 the SDK answers."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        if scope["path"] == "/stats":
            body = json.dumps({"replica": replica, **stats, "sessions": len(counts)}).encode()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return None
        stats["requests"] += 1
        if scope["method"] == "POST":
            body, receive = await read_body(receive)
            if b'"initialize"' in body:
                stats["initialize"] += 1

        async def counted_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] == 404:
                stats["not_found"] += 1
            await send(message)

        return await app(scope, receive, counted_send)

    return wrapped


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--replica", required=True, help="this replica's name, returned by every tool")
    args = parser.parse_args(argv)
    app = build_server(args.replica).streamable_http_app(host=args.host)
    stats.update(requests=0, not_found=0, initialize=0)
    # The SDK logs every session at INFO; under the benchmark's load that is CPU the gateways need.
    logging.getLogger("mcp").setLevel(logging.WARNING)
    uvicorn.run(counting(args.replica, only("legacy", app)), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
