"""An outside service for webhook interceptors: it checks each request's `Gateway-Signature` the way
docs/interceptors.md tells a service to (HMAC-SHA256 of "<t>.<body>" under the shared key, `t` within
five minutes), records what it got, and decides by the path it was configured at.

    POST /pass          {"action": "pass"}
    POST /refuse        {"action": "refuse", "reason": "the service says no"}
    POST /rewrite       replaces every "hello" in the payload's text by "checked" (passes when there is none)
    POST /slow/<s>      answers pass after <s> seconds
    POST /garbage       200 with a body that is not JSON
    GET  /__recorded    what it received: [{path, signature_valid, body}]
    POST /__reset       forget it

A request whose signature does not check is answered 401. The key is `--key` (default
`webhook-key-0123456789`). Run: python -m tests.backends.webhook_service --port N"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import time
from typing import Any

import uvicorn

from tests.backends.asgi import read_body

KEY = "webhook-key-0123456789"
recorded: list[dict[str, Any]] = []


def signature_valid(header: str, body: bytes, key: bytes) -> bool:
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    if not parts.get("t", "").isdigit() or abs(time.time() - int(parts["t"])) > 300:
        return False
    expected = hmac.new(key, parts["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts.get("v1", ""))


async def _answer(send: Any, status: int, body: bytes, content_type: str = "application/json") -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def make_app(key: bytes) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, _ = await read_body(receive)
        path: str = scope["path"]
        if path == "/__recorded":
            await _answer(send, 200, json.dumps(recorded).encode())
            return
        if path == "/__reset":
            recorded.clear()
            await _answer(send, 204, b"")
            return
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
        valid = signature_valid(headers.get("gateway-signature", ""), body, key)
        recorded.append({"path": path, "signature_valid": valid, "body": json.loads(body or b"null")})
        if not valid:
            await _answer(send, 401, b'{"error": "bad signature"}')
            return
        request = json.loads(body)
        if path == "/refuse":
            answer: dict[str, Any] = {"action": "refuse", "reason": "the service says no"}
        elif path == "/rewrite":
            text = json.dumps(request["payload"])
            answer = {"action": "rewrite", "payload": json.loads(text.replace("hello", "checked"))} \
                if "hello" in text else {"action": "pass"}
        elif path.startswith("/slow/"):
            await asyncio.sleep(float(path.rsplit("/", 1)[1]))
            answer = {"action": "pass"}
        elif path == "/garbage":
            await _answer(send, 200, b"<html>oops</html>", "text/html")
            return
        else:
            answer = {"action": "pass"}
        await _answer(send, 200, json.dumps(answer).encode())

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--key", default=KEY)
    args = parser.parse_args()
    uvicorn.run(make_app(args.key.encode()), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
