"""The cheapest possible ASGI app: a fixed JSON-RPC result. Served under Daphne it measures what the
HTTP server alone costs per request, the floor under the gateway's own CPU per call."""

from __future__ import annotations

from typing import Any

BODY = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"3.0"}],"isError":false}}'


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]})
    await send({"type": "http.response.body", "body": BODY})
