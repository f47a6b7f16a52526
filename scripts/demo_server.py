"""The demo MCP server behind the demo tenant of `make run`: a few tools, a resource and a prompt.

Run: python scripts/demo_server.py --port 9001   (Streamable HTTP at /mcp, every protocol revision)"""

from __future__ import annotations

import argparse
import asyncio
import datetime

import uvicorn
from mcp.server.mcpserver import Context, MCPServer


def build_server() -> MCPServer:
    server = MCPServer("demo", instructions="A demo server: arithmetic, echo, time, and a slow countdown.")

    @server.tool()
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def utc_now() -> str:
        """The current UTC time in ISO 8601."""
        return datetime.datetime.now(datetime.UTC).isoformat()

    @server.tool()
    async def countdown(start: int, ctx: Context) -> str:
        """Count down from `start` to zero, reporting progress at each step."""
        for step in range(start, 0, -1):
            await ctx.report_progress(start - step, start, f"{step} left")
            await asyncio.sleep(0.01)
        return "lift-off"

    @server.resource("demo://readme", mime_type="text/markdown")
    def readme() -> str:
        """What this demo server offers."""
        return "# Demo\nTools: add, echo, utc_now, countdown."

    @server.prompt()
    def greet(name: str) -> str:
        """A greeting prompt."""
        return f"Say hello to {name} in one short sentence."

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9001)
    args = parser.parse_args()
    app = build_server().streamable_http_app(host=args.host)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
