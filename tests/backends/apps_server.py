"""An MCP server (official SDK, low-level API) with an MCP App (`io.modelcontextprotocol/ui`): the
tool `show_chart` names its UI by `_meta.ui.resourceUri` (and, as older hosts read it, by the flat
`_meta["ui/resourceUri"]`), and the resource `ui://charts/main` is that UI, an HTML page. Speaks the
handshake era only."""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
from mcp import types
from mcp.server.lowlevel.server import Server

from tests.backends.era_server import only

UI_URI = "ui://charts/main"
UI_MIME = "text/html;profile=mcp-app"
PAGE = "<!doctype html><title>Chart</title><div id=chart></div>"


def build_server() -> Server[Any]:
    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        tool = types.Tool(name="show_chart", description="Shows a chart of the numbers.",
                          input_schema={"type": "object", "properties": {"numbers": {"type": "array"}}},
                          meta={"ui": {"resourceUri": UI_URI, "visibility": ["model", "app"]}, "ui/resourceUri": UI_URI})
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        numbers = (params.arguments or {}).get("numbers", [])
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{len(numbers)} numbers")])

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(name="chart", uri=UI_URI, mime_type=UI_MIME)])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if str(params.uri) != UI_URI:
            raise ValueError(f"no resource {params.uri}")
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=UI_URI, mime_type=UI_MIME, text=PAGE)])

    return Server("apps-fixture", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_read_resource=read_resource)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    uvicorn.run(only("legacy", build_server().streamable_http_app(host=args.host)), host=args.host, port=args.port,
                log_level="warning")


if __name__ == "__main__":
    main()
