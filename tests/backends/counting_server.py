"""The demo MCP server behind a middleware that counts what reaches it, so tests can see from the
outside how the gateway uses a backend (sessions opened, requests, connections).

GET /stats -> {"initialize": n, "posts": n, "deletes": n, "connections": n, "methods": {...}}"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

import uvicorn

from scripts.demo_server import build_server
from tests.backends.asgi import read_body

stats: Counter[str] = Counter()
methods: Counter[str] = Counter()
_connections: set[tuple[str, int]] = set()


def counting(app: Any) -> Any:
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        client = scope.get("client")
        if client:
            _connections.add(tuple(client))
        if scope["path"] == "/stats":
            body = json.dumps({**stats, "connections": len(_connections), "methods": methods}).encode()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return None
        if scope["method"] == "DELETE":
            stats["deletes"] += 1
        if scope["method"] != "POST":
            return await app(scope, receive, send)
        body, replay = await read_body(receive)
        stats["posts"] += 1
        try:
            method = json.loads(body).get("method")
        except (ValueError, AttributeError):
            method = None
        if method:
            methods[method] += 1
        if method == "initialize":
            stats["initialize"] += 1
        return await app(scope, replay, send)

    return wrapped


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    app = build_server().streamable_http_app(host=args.host)
    uvicorn.run(counting(app), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
