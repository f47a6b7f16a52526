"""A reverse proxy that records every exchange it relays, for the fuzz test to judge the gateway by
what it actually answered.

mcp-fuzzer cannot be trusted to report that: it counts a JSON-RPC -32603 answer as the server
"rejecting" the input (a success, with the error dropped from its reports), and it keeps no
response body of a successful call. So the fuzzer talks to this proxy, the proxy to the gateway,
and each exchange becomes one JSON line in the record file:

    {"method", "path", "status", "content_type", "request", "body", "truncated", "completed", "error"}

`request` and `body` are the first `CAPTURE_BYTES` of each (decoded as UTF-8 with replacement).
`status` is null when no answer began: `error` says why, or is null when the client gave up
waiting first. `completed` is false when the answer did not end (the client closed it, or the
gateway broke it off: `error` says so).

Run: python -m tests.fuzz.recording_proxy --port N --upstream http://127.0.0.1:M --record FILE"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any, TypedDict

import httpx
import uvicorn

from tests.backends.asgi import Receive, read_body

CAPTURE_BYTES = 256 * 1024
# Hop-by-hop headers (RFC 9110 §7.6.1) are the proxy's own business; the length is re-framed.
_NOT_RELAYED = frozenset({
    b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding", b"upgrade",
    b"host", b"content-length",
})


class Exchange(TypedDict):
    method: str
    path: str
    status: int | None
    content_type: str
    request: str
    body: str
    truncated: bool
    completed: bool
    error: str | None


class RecordingProxy:
    def __init__(self, upstream: str, record: Path) -> None:
        self.upstream = upstream.rstrip("/")
        self.record = record
        # Streams (server-sent events) stay open as long as the client listens: no read timeout.
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None), follow_redirects=False)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        body, _ = await read_body(receive)
        path = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        query = scope["query_string"].decode("latin-1")
        exchange = Exchange(
            method=scope["method"], path=path + (f"?{query}" if query else ""), status=None, content_type="",
            request=body[:CAPTURE_BYTES].decode("utf-8", "replace"), body="", truncated=False, completed=False,
            error=None,
        )
        relay = asyncio.ensure_future(self._relay(scope, body, send, exchange))
        watcher = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({relay, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
            if not relay.done():  # the client went away in the middle of a stream: close upstream too
                relay.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await relay
            self._write(exchange)

    async def _relay(self, scope: dict[str, Any], body: bytes, send: Any, exchange: Exchange) -> None:
        headers = [(name, value) for name, value in scope["headers"] if name.lower() not in _NOT_RELAYED]
        request = self.client.build_request(
            scope["method"], self.upstream + exchange["path"], headers=headers, content=body,
        )
        try:
            response = await self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            exchange["error"] = f"the gateway could not be reached: {exc!r}"
            await _answer(send, 502, exchange["error"].encode())
            return
        captured = bytearray()
        try:
            exchange["status"] = response.status_code
            exchange["content_type"] = response.headers.get("content-type", "")
            await send({
                "type": "http.response.start", "status": response.status_code,
                "headers": [(k, v) for k, v in response.headers.raw if k.lower() not in _NOT_RELAYED],
            })
            try:
                async for chunk in response.aiter_raw():
                    if len(captured) < CAPTURE_BYTES:
                        captured += chunk[: CAPTURE_BYTES - len(captured)]
                    else:
                        exchange["truncated"] = True
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                exchange["completed"] = True
            except httpx.HTTPError as exc:
                exchange["error"] = f"the gateway broke off its answer: {exc!r}"
            await send({"type": "http.response.body", "body": b""})
        finally:
            exchange["body"] = captured.decode("utf-8", "replace")
            await response.aclose()

    def _write(self, exchange: Exchange) -> None:
        with self.record.open("a", encoding="utf-8") as out:
            out.write(json.dumps(exchange) + "\n")

    async def _lifespan(self, receive: Receive, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _answer(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
    await send({"type": "http.response.body", "body": body})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="the gateway's base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--record", type=Path, required=True, help="the JSON-lines file exchanges are appended to")
    args = parser.parse_args(argv)
    uvicorn.run(RecordingProxy(args.upstream, args.record), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
