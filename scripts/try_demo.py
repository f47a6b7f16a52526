"""Connect to the `make run` demo with the official MCP SDK client, in both protocol eras.

Usage: .venv/bin/python scripts/try_demo.py [URL] [KEY]   (defaults: the demo host and var/demo-key)"""

from __future__ import annotations

import asyncio
import os
import pathlib
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, key: str) -> None:
    for mode in ("legacy", "2026-07-28"):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                tools = await client.list_tools()
                result = await client.call_tool("add", {"a": 2, "b": 40})
                print(f"{mode:>10}: protocol {client.protocol_version}; tools {[t.name for t in tools.tools]}; "
                      f"add(2, 40) = {result.content[0].text}")
                # The host's secrets interceptor masks credentials both ways (AWS's documented example key).
                echoed = await client.call_tool("echo", {"text": "aws_access_key_id=AKIAIOSFODNN7EXAMPLE"})
                print(f"{'':>10}  echo(a cloud key) = {echoed.content[0].text}")
    # The pet store is a REST service: the gateway compiled its OpenAPI spec into these tools.
    rest = url.rsplit("/", 1)[0] + "/rest"
    # A long read timeout: the first search of a fresh gateway loads the embedding model (~10 s).
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        async with Client(streamable_http_client(rest, http_client=http), mode="2026-07-28") as client:
            tools = await client.list_tools()
            result = await client.call_tool("showPetById", {"petId": "1"})
            print(f"      REST: tools {[t.name for t in tools.tools]}; showPetById(1) = {result.structured_content}")
            # The gateway's own search over the host's tools (indexed by the Celery worker).
            found = await client.call_tool("tool_search", {"query": "look up one pet by its id", "k": 2})
            print(f"            tool_search('look up one pet by its id') = "
                  f"{[t['name'] for t in (found.structured_content or {}).get('tools', [])]}")


if __name__ == "__main__":
    root = pathlib.Path(__file__).resolve().parent.parent
    port = os.environ.get("GATEWAY_PORT", "8000")
    url = sys.argv[1] if len(sys.argv) > 1 else f"http://127.0.0.1:{port}/mcp/demo/main"
    key = sys.argv[2] if len(sys.argv) > 2 else (root / "var" / "demo-key").read_text().strip()
    asyncio.run(main(url, key))
