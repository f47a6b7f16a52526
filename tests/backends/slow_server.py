"""Fixture MCP server for the gateway's resource limits: tools that take their time, answer big, or
go silent mid-call; and a count of the calls running at once (what a concurrency limit bounds).

Run: python -m tests.backends.slow_server --host 127.0.0.1 --port 9200   (Streamable HTTP at /mcp)"""

from __future__ import annotations

import argparse
import asyncio

import uvicorn
from mcp.server.mcpserver import Context, MCPServer


class Running:
    """How many `sleep` calls run now, and the most that ever ran at once."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0


def build_server() -> MCPServer:
    server = MCPServer("slow", instructions="Tools that are slow, big or silent, for the gateway's limits.")
    running = Running()

    @server.tool()
    async def sleep(seconds: float) -> str:
        """Sleep `seconds`, then say so."""
        running.now += 1
        running.most = max(running.most, running.now)
        try:
            await asyncio.sleep(seconds)
        finally:
            running.now -= 1
        return f"slept {seconds:g} s"

    @server.tool()
    def most_at_once() -> int:
        """The most `sleep` calls that ran at the same time so far (and reset the count)."""
        most, running.most = running.most, running.now
        return most

    @server.tool()
    def running_now() -> int:
        """How many `sleep` calls run at this moment (a cancelled one stops running)."""
        return running.now

    @server.tool()
    def big(size: int) -> str:
        """A text of `size` characters."""
        return "x" * size

    @server.tool()
    async def stall(seconds: float, ctx: Context) -> str:
        """Report progress once, then go silent for `seconds` before answering."""
        await ctx.report_progress(1, 2, "started")
        await asyncio.sleep(seconds)
        return "done"

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9200)
    args = parser.parse_args()
    app = build_server().streamable_http_app(host=args.host)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
