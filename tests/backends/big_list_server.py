"""An MCP server (official SDK, low-level API) whose lists are one big page, as most servers'
are: `--tools` tools (`tool0000` ...) with descriptions of `--description-bytes` bytes, and as
many resources, in one `tools/list` and one `resources/list` answer. Speaks the handshake era only."""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
from mcp import types
from mcp.server.lowlevel.server import Server

from tests.backends.era_server import only


def tool_names(count: int) -> list[str]:
    return [f"tool{i:04d}" for i in range(count)]


def build_server(count: int, description_bytes: int) -> Server[Any]:
    # Not one repeated character: some of every tool is its own, as in real descriptions.
    filler = "".join(chr(0x61 + i % 26) for i in range(description_bytes))

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        tools = [types.Tool(name=name, description=f"{name}: {filler}", input_schema={"type": "object"})
                 for name in tool_names(count)]
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=params.name)])

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        resources = [types.Resource(name=name, uri=f"big://{name}", description=filler) for name in tool_names(count)]
        return types.ListResourcesResult(resources=resources)

    return Server("big-list-fixture", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tools", type=int, default=1500)
    parser.add_argument("--description-bytes", type=int, default=2000)
    args = parser.parse_args(argv)
    app = build_server(args.tools, args.description_bytes).streamable_http_app(host=args.host)
    uvicorn.run(only("legacy", app), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
