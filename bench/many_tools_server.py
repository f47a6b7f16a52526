"""A backend with N generated tools (default 1,000), for measuring tools/list through the gateway."""

from __future__ import annotations

import argparse

import uvicorn
from mcp.server.mcpserver import MCPServer


def build_server(count: int) -> MCPServer:
    server = MCPServer("many-tools")

    def make(index: int):  # type: ignore[no-untyped-def]
        def tool(resource_id: str, limit: int = 10) -> str:
            return f"{index}:{resource_id}:{limit}"

        tool.__name__ = f"service_{index // 50}_operation_{index}"
        tool.__doc__ = f"Operation {index} of service {index // 50}: reads a resource by id, up to `limit` items."
        return tool

    for index in range(count):
        server.add_tool(make(index))
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tools", type=int, default=1000)
    args = parser.parse_args()
    uvicorn.run(build_server(args.tools).streamable_http_app(host=args.host), host=args.host, port=args.port,
                log_level="warning")


if __name__ == "__main__":
    main()
