"""A hostile MCP backend (handshake era, Streamable HTTP), written without the SDK so that it can
answer what no SDK would. Each path is one backend:

- `/huge/mcp`: `tools/list` in 5 pages of `--tools-per-page` tools each;
- `/calls/mcp`: lists `tool_search` and `hello` (and answers `hello`); `tools/call` of
  `truncated` answers cut-off JSON, `wrong_id` a response to another id, `array` the response in
  a JSON array, `flood` 300 `roots/list` requests on the call's event stream before its response,
  `endless` a keep-alive comment every 50 ms and never a response; `resources/list` is answered in
  a JSON array and `prompts/list` with cut-off JSON (requests no audit row reads).

`GET /stats` tells how many `tools/list` pages were served and how many streams are open now.

Run: python -m tests.backends.hostile_server --host 127.0.0.1 --port 9300"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn

from tests.backends.asgi import Receive, read_body

Send = Callable[[dict[str, Any]], Awaitable[None]]
PAGES = 5


class Hostile:
    def __init__(self, tools_per_page: int) -> None:
        self.tools_per_page = tools_per_page
        self.pages_served = 0
        self.open_streams = 0

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == "/stats":
            await _json(send, 200, {"pages_served": self.pages_served, "open_streams": self.open_streams})
            return
        if method == "DELETE":
            await _json(send, 200, {})
            return
        if method != "POST":
            await _json(send, 405, {"error": "no GET stream"})
            return
        body, _ = await read_body(receive)
        message = json.loads(body)
        if "method" not in message or "id" not in message:
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        request_id, name = message["id"], message["method"]
        params = message.get("params") or {}
        if name == "initialize":
            result = {"protocolVersion": params.get("protocolVersion", "2025-11-25"), "capabilities": {"tools": {}},
                      "serverInfo": {"name": "hostile", "version": "1.0.0"}}
            await _json(send, 200, {"jsonrpc": "2.0", "id": request_id, "result": result},
                        [(b"mcp-session-id", b"hostile-session")])
        elif name == "tools/list":
            await self._list(send, request_id, path, params.get("cursor"))
        elif name == "tools/call":
            await self._call(send, receive, request_id, params.get("name"))
        elif name == "resources/list":
            await _raw(send, json.dumps([{"jsonrpc": "2.0", "id": request_id, "result": {"resources": []}}]).encode())
        elif name == "prompts/list":
            await _raw(send, b'{"jsonrpc": "2.0", "id": ' + json.dumps(request_id).encode() + b', "result": {"pro')
        else:
            await _json(send, 200, {"jsonrpc": "2.0", "id": request_id,
                                    "error": {"code": -32601, "message": f"Method not found: {name}"}})

    async def _list(self, send: Send, request_id: Any, path: str, cursor: str | None) -> None:
        self.pages_served += 1
        if not path.startswith("/huge/"):
            tools = [{"name": name, "description": f"the backend's own {name}", "inputSchema": {"type": "object"}}
                     for name in ("hello", "tool_search")]
            await _json(send, 200, {"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}})
            return
        number = int(cursor or 0)
        size = self.tools_per_page
        tools = [{"name": f"t{number * size + i:07d}", "description": "x" * 40, "inputSchema": {"type": "object"}}
                 for i in range(size)]
        result: dict[str, Any] = {"tools": tools}
        if number + 1 < PAGES:
            result["nextCursor"] = str(number + 1)
        await _json(send, 200, {"jsonrpc": "2.0", "id": request_id, "result": result})

    async def _call(self, send: Send, receive: Receive, request_id: Any, tool: Any) -> None:
        text = {"content": [{"type": "text", "text": "hello"}]}
        if tool == "truncated":
            await _raw(send, b'{"jsonrpc": "2.0", "id": ' + json.dumps(request_id).encode() + b', "result": {"cont')
        elif tool == "wrong_id":
            await _json(send, 200, {"jsonrpc": "2.0", "id": "gw-999999", "result": text})
        elif tool == "array":
            await _raw(send, json.dumps([{"jsonrpc": "2.0", "id": request_id, "result": text}]).encode())
        elif tool in {"flood", "endless"}:
            await self._stream(send, receive, request_id, tool)
        else:
            await _json(send, 200, {"jsonrpc": "2.0", "id": request_id, "result": text})

    async def _stream(self, send: Send, receive: Receive, request_id: Any, tool: str) -> None:
        # The body is read: what comes next is `http.disconnect`, when the gateway drops the stream.
        gone = asyncio.ensure_future(receive())
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        self.open_streams += 1
        try:
            if tool == "flood":
                for n in range(300):
                    await _event(send, {"jsonrpc": "2.0", "id": f"srv-{n}", "method": "roots/list"})
                await _event(send, {"jsonrpc": "2.0", "id": request_id, "result": {"content": []}})
            else:
                while not gone.done():  # alive (never idle), and never answering
                    await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})
                    await asyncio.sleep(0.05)
            await send({"type": "http.response.body", "body": b""})
        finally:
            gone.cancel()
            self.open_streams -= 1


async def _event(send: Send, message: dict[str, Any]) -> None:
    await send({"type": "http.response.body", "body": b"data: " + json.dumps(message).encode() + b"\n\n",
                "more_body": True})


async def _json(send: Send, status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await _raw(send, json.dumps(payload).encode(), status, headers)


async def _raw(send: Send, body: bytes, status: int = 200, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9300)
    parser.add_argument("--tools-per-page", type=int, default=2000)
    args = parser.parse_args(argv)
    uvicorn.run(Hostile(args.tools_per_page), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
