"""An MCP server (official SDK) that echoes the trace context it receives, for the tracing tests.

Its tool `received` answers with the W3C headers (`traceparent`, `tracestate`, `baggage`) and the
`params._meta` of the request that called it; a recorder in front of the server also keeps every
HTTP request it gets — initialize, lists, calls, notifications, GET streams — so a test can see what
each one carried:

    GET  /__recorded   [{"http": "POST", "path", "method" (JSON-RPC), "headers": {...}, "meta": {...}}, ...]
    POST /__reset      forget them

Run: python -m tests.backends.echo_server --port N [--era legacy|modern|both] [--transport sse]"""

from __future__ import annotations

import argparse
import json
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

from tests.backends.asgi import read_body
from tests.backends.era_server import only

_TRACE_HEADERS = ("traceparent", "tracestate", "baggage")
recorded: list[dict[str, Any]] = []


def build_server() -> MCPServer:
    server = MCPServer("echo", instructions="Echoes the trace context each request carries.")

    @server.tool()
    def received(ctx: Context) -> dict[str, Any]:
        """The trace context this request carried: its W3C headers and its `_meta`."""
        request = ctx.request_context.request
        headers = {} if request is None else {
            name: request.headers[name] for name in _TRACE_HEADERS if name in request.headers
        }
        return {"headers": headers, "meta": dict(ctx.request_context.meta or {})}

    @server.tool()
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    return server


def recording(app: Any) -> Any:
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        if scope["path"] in {"/__recorded", "/__reset"}:
            if scope["path"] == "/__reset":
                recorded.clear()
            body = json.dumps(recorded).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return None
        body, replay = await read_body(receive)
        try:
            message = json.loads(body) if body else {}
        except ValueError:
            message = {}
        params = message.get("params") if isinstance(message, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
        recorded.append({
            "http": scope["method"], "path": scope["path"],
            "method": message.get("method") if isinstance(message, dict) else None,
            "headers": {name: headers[name] for name in _TRACE_HEADERS if name in headers},
            "meta": {key: meta[key] for key in ("traceparent", "tracestate") if key in meta} if isinstance(meta, dict) else {},
        })
        return await app(scope, replay, send)

    return wrapped


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--era", choices=["legacy", "modern", "both"], default="both")
    parser.add_argument("--transport", choices=["streamable-http", "sse"], default="streamable-http")
    args = parser.parse_args(argv)
    server = build_server()
    if args.transport == "sse":
        app = server.sse_app(host=args.host)
    else:
        app = server.streamable_http_app(host=args.host)
        if args.era != "both":
            app = only(args.era, app)
    uvicorn.run(recording(app), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
