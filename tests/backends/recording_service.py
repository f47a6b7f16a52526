"""A REST service for OpenAPI backend tests: it records every request exactly as received and
answers what the path asks for.

    GET  /__recorded      every request so far: method, path, raw query, headers, body (base64)
    POST /__reset         forget them
    any  /status/<code>   answers <code> with a JSON body
    any  /text            text/plain
    any  /binary          application/octet-stream (bytes 0..255)
    any  /slow/<seconds>  answers after a delay
    any  /huge/<bytes>    a JSON string of that many bytes
    any  other path       200 with JSON echoing what was received

Run: python -m tests.backends.recording_service --port N"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from typing import Any

import uvicorn

from tests.backends.asgi import read_body

recorded: list[dict[str, Any]] = []


async def _answer(send: Any, status: int, content_type: str, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body, _ = await read_body(receive)
    path: str = scope["path"]
    if path == "/__recorded":
        await _answer(send, 200, "application/json", json.dumps(recorded).encode())
        return
    if path == "/__reset":
        recorded.clear()
        await _answer(send, 204, "application/json", b"")
        return
    request = {
        "method": scope["method"],
        "path": scope.get("raw_path", path.encode()).decode("latin-1"),
        "query": scope["query_string"].decode("latin-1"),
        "headers": [[name.decode("latin-1"), value.decode("latin-1")] for name, value in scope["headers"]],
        "body": base64.b64encode(body).decode(),
    }
    recorded.append(request)
    parts = path.strip("/").split("/")
    if parts[0] == "status" and len(parts) > 1 and parts[1].isdigit():
        await _answer(send, int(parts[1]), "application/json", json.dumps({"status": int(parts[1])}).encode())
    elif parts[0] == "text":
        await _answer(send, 200, "text/plain; charset=utf-8", "plain text ✓".encode())
    elif parts[0] == "binary":
        await _answer(send, 200, "application/octet-stream", bytes(range(256)))
    elif parts[0] == "slow" and len(parts) > 1:
        await asyncio.sleep(float(parts[1]))
        await _answer(send, 200, "application/json", b'{"slow": true}')
    elif parts[0] == "huge" and len(parts) > 1 and parts[1].isdigit():
        await _answer(send, 200, "application/json", json.dumps("x" * int(parts[1])).encode())
    else:
        await _answer(send, 200, "application/json", json.dumps({"received": request}).encode())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
