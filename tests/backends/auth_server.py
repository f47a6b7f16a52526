"""The demo MCP server behind a credential check, as many real servers are: every request must carry
`Authorization: Bearer <token>` with one of the accepted tokens (`--tokens`, or matching
`--pattern`), else HTTP 401. It records, per request, the JSON-RPC method and the credentials it
was sent, so tests can see which credential reached it for which call.

    GET /__recorded   [{"method", "authorization", "x_api_key"}, ...]
    POST /__reset     forget them

Run: python -m tests.backends.auth_server --port N --tokens a,b --pattern 'oauth-token-\\d+'"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

import uvicorn

from scripts.demo_server import build_server
from tests.backends.asgi import read_body

recorded: list[dict[str, Any]] = []


async def _reply(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]] = ()) -> None:  # type: ignore[assignment]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *headers]})
    await send({"type": "http.response.body", "body": body})


def checked(app: Any, tokens: set[str], pattern: re.Pattern[str] | None) -> Any:
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        if scope["path"] == "/__recorded":
            return await _reply(send, 200, json.dumps(recorded).encode())
        if scope["path"] == "/__reset":
            recorded.clear()
            return await _reply(send, 204, b"")
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        body, replay = await read_body(receive)
        try:
            method = json.loads(body).get("method") if body else None
        except (ValueError, AttributeError):
            method = None
        authorization = headers.get("authorization", "")
        recorded.append({"method": method, "http": scope["method"], "authorization": authorization,
                         "x_api_key": headers.get("x-api-key")})
        token = authorization.removeprefix("Bearer ") if authorization.startswith("Bearer ") else None
        if token is None or not (token in tokens or (pattern is not None and pattern.fullmatch(token))):
            return await _reply(send, 401, b'{"error": "invalid_token"}', [(b"www-authenticate", b"Bearer")])
        return await app(scope, replay, send)

    return wrapped


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens", default="")
    parser.add_argument("--pattern", default="")
    args = parser.parse_args(argv)
    app = build_server().streamable_http_app(host=args.host)
    tokens = {t for t in args.tokens.split(",") if t}
    pattern = re.compile(args.pattern) if args.pattern else None
    uvicorn.run(checked(app, tokens, pattern), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
