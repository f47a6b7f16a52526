"""The demo MCP server made to speak one protocol era only, as many real servers do.

--era legacy: refuses stateless requests the way a pre-2026 server does (HTTP 400 with a body that
is not a JSON-RPC error, so clients fall back to `initialize`).
--era modern: refuses `initialize` with -32022 naming the versions it serves, as the 2026-07-28 spec
asks of modern-only servers."""

from __future__ import annotations

import argparse
import json
from typing import Any

import uvicorn

from scripts.demo_server import build_server
from tests.backends.asgi import read_body

MODERN_HEADER = b"2026-07-28"


def only(era: str, app: Any) -> Any:
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        body, replay = await read_body(receive)
        try:
            payload = json.loads(body)
        except ValueError:
            payload = {}
        meta = (payload.get("params") or {}).get("_meta") or {}
        modern = "io.modelcontextprotocol/protocolVersion" in meta or payload.get("method") == "server/discover"
        if era == "legacy" and modern:
            return await _reply(send, 400, b"text/plain", b"Bad Request: No valid session ID provided")
        if era == "modern" and payload.get("method") == "initialize":
            error = {"jsonrpc": "2.0", "id": payload.get("id"), "error": {
                "code": -32022, "message": "Unsupported protocol version",
                "data": {"supported": ["2026-07-28"], "requested": (payload.get("params") or {}).get("protocolVersion")}}}
            return await _reply(send, 400, b"application/json", json.dumps(error).encode())
        return await app(scope, replay, send)

    return wrapped


async def _reply(send: Any, status: int, content_type: bytes, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type)]})
    await send({"type": "http.response.body", "body": body})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--era", choices=["legacy", "modern"], required=True)
    parser.add_argument("--server", choices=["demo", "conformance"], default="demo",
                        help="the demo server, or the conformance fixture (sampling, elicitation, progress)")
    args = parser.parse_args(argv)
    if args.server == "conformance":
        from tests.backends.conformance_server import build_app

        app = build_app(host=args.host)
    else:
        app = build_server().streamable_http_app(host=args.host)
    uvicorn.run(only(args.era, app), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
