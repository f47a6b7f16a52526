"""An MCP server (official SDK, low-level API) that hands out every list in pages of `--page-size`
items behind its own opaque cursors, speaking the handshake era only, as many servers do.
`--delay` makes every list answer that many seconds late (a slow backend).

Tools `alpha` ... `epsilon` answer "<name>: <arguments as JSON>"; prompts `p0` ... `p2`; resources
`page://doc/0` ... `page://doc/2`; one template `page://doc/{n}`."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from collections.abc import Sequence
from typing import Any

import uvicorn
from mcp import types
from mcp.server.lowlevel.server import Server

from tests.backends.era_server import only

TOOLS = ("alpha", "beta", "gamma", "delta", "epsilon")
PROMPTS = ("p0", "p1", "p2")
RESOURCES = tuple(f"page://doc/{n}" for n in range(3))


def _page(items: Sequence[Any], cursor: str | None, size: int) -> tuple[list[Any], str | None]:
    start = int(base64.b64decode(cursor)) if cursor else 0
    end = start + size
    return list(items[start:end]), (base64.b64encode(str(end).encode()).decode() if end < len(items) else None)


def build_server(page_size: int, delay: float) -> Server[Any]:
    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        await asyncio.sleep(delay)
        tools = [types.Tool(name=name, description=f"The {name} tool", input_schema={"type": "object"}) for name in TOOLS]
        page, cursor = _page(tools, params.cursor if params else None, page_size)
        return types.ListToolsResult(tools=page, next_cursor=cursor)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in TOOLS:
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"no tool {params.name}")], is_error=True)
        text = f"{params.name}: {json.dumps(params.arguments or {}, sort_keys=True)}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        await asyncio.sleep(delay)
        prompts = [types.Prompt(name=name, description=f"Prompt {name}") for name in PROMPTS]
        page, cursor = _page(prompts, params.cursor if params else None, page_size)
        return types.ListPromptsResult(prompts=page, next_cursor=cursor)

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=f"prompt {params.name}"))
        return types.GetPromptResult(messages=[message])

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        await asyncio.sleep(delay)
        resources = [types.Resource(name=f"doc-{n}", uri=uri) for n, uri in enumerate(RESOURCES)]
        page, cursor = _page(resources, params.cursor if params else None, page_size)
        return types.ListResourcesResult(resources=page, next_cursor=cursor)

    async def list_templates(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
        await asyncio.sleep(delay)
        template = types.ResourceTemplate(name="doc", uri_template="page://doc/{n}")
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        contents = types.TextResourceContents(uri=str(params.uri), mime_type="text/plain", text=f"content of {params.uri}")
        return types.ReadResourceResult(contents=[contents])

    return Server(
        "paging-fixture", version="1.0.0",
        on_list_tools=list_tools, on_call_tool=call_tool, on_list_prompts=list_prompts, on_get_prompt=get_prompt,
        on_list_resources=list_resources, on_list_resource_templates=list_templates, on_read_resource=read_resource,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--page-size", type=int, default=2)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    app = build_server(args.page_size, args.delay).streamable_http_app(host=args.host)
    uvicorn.run(only("legacy", app), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
