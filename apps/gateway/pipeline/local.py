"""Backends the gateway answers itself (OpenAPI services compiled to tools, and a host's
`tool_search`): the MCP methods a tool server has, in either era. The session, if any, is the
gateway's own; nothing is forwarded. A tool list bigger than a page may be (an EC2 service has
765 tools, 5 MB) is handed out in pages behind signed cursors, like a merged list (`listing.py`)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from apps.gateway.pipeline.calls import Call
from apps.gateway.pipeline.cursors import CursorCodec
from apps.gateway.pipeline.listing import ENVELOPE_BYTES, MergedList, PageLimits, as_listed, encode_page, list_result
from apps.gateway.pipeline.ports import ToolServer
from apps.gateway.pipeline.propagation import trace_headers
from apps.gateway.pipeline.tool_search import SearchServer, ToolSearch
from apps.gateway.pipeline.tracing import Tracer, current
from apps.gateway.pipeline.values import VirtualHostView
from apps.gateway.protocol.errors import InvalidParams, MethodNotFound
from apps.gateway.protocol.jsonrpc import Message, encoded, loads


@dataclass(frozen=True, slots=True)
class _Listed:
    """A tool server's list as pages are cut from it (None: it fits one page), and the pages cut so
    far (start -> page, end)."""

    tools: MergedList | None
    pages: dict[int, tuple[Any, int]] = field(default_factory=dict)


class LocalTools:
    """The methods of a backend the gateway answers itself: `ping`, `tools/list` and `tools/call`;
    other requests are -32601."""

    def __init__(self, tracer: Tracer, search: ToolSearch, codec: CursorCodec, pages: PageLimits) -> None:
        self._tracer = tracer
        self._search = search
        self._codec = codec
        self._pages = pages
        # Per server: a new spec version is a new server, so its pages go with the old one.
        self._listed: weakref.WeakKeyDictionary[ToolServer, _Listed] = weakref.WeakKeyDictionary()

    def search_server(self, vhost: VirtualHostView, message: Message) -> SearchServer | None:
        """The host's `tool_search` tool when `message` calls it (answered before any naming rule)."""
        config = vhost.tool_search
        if config is None or message.method != "tools/call":
            return None
        if message.params.get("name") != config.name:
            return None
        return self._search.server(vhost)

    async def answer(self, call: Call, server: ToolServer, *, modern: bool) -> dict[str, Any]:
        """The result of the request `call.message`, shaped for the era (`modern`); raises the
        GatewayError a client gets, or UpstreamUnavailable/TimeoutError (the service did not answer)."""
        result = await self._result(call, server)
        if modern:
            result = {"resultType": "complete", **result}
            if call.message.method == "tools/list":
                # Private: the list will depend on the caller's permissions; not reusable unasked.
                result.update(ttlMs=0, cacheScope="private")
        return result

    async def _result(self, call: Call, server: ToolServer) -> dict[str, Any]:
        method = call.message.method
        params = call.message.params
        if method == "ping":
            return {}
        if method == "tools/list":
            return self._tools_page(call, server, params.get("cursor"))
        if method == "tools/call":
            name = params.get("name")
            arguments = params.get("arguments", {})
            if not isinstance(name, str):
                raise InvalidParams("Invalid params: tools/call needs the tool's 'name'")
            if arguments is None:
                arguments = {}
            if not isinstance(arguments, dict):
                raise InvalidParams("Invalid params: 'arguments' must be an object")
            if not server.has_tool(name):
                raise InvalidParams(f"Unknown tool: {name}")
            # The service call is this backend's upstream call: its span, and the context it carries.
            with self._tracer.span(f"tools/call {call.backend.name}", kind="client", **{
                "gateway.backend": call.backend.name, "gateway.backend.kind": call.backend.kind,
                "mcp.method.name": "tools/call", "gateway.tool.upstream_name": name,
            }) as span:
                result = await server.call_tool(
                    name, arguments, headers=trace_headers(current() or call.trace), principal=call.principal
                )
                if result.get("isError") is True:
                    span.set("gateway.outcome", "tool_error")
                return result
        raise MethodNotFound(f"Method not found: {method}")

    def _tools_page(self, call: Call, server: ToolServer, cursor: object) -> dict[str, Any]:
        """One page of the server's tools; all of them (as encoded once) when they fit one."""
        listing = server.tools_json()
        limits = self._pages
        listed = self._listed.get(server)
        if listed is None:
            tools = as_listed("tools", loads(listing))
            fits = len(listing) + ENVELOPE_BYTES <= limits.bytes and len(tools.items) <= limits.items
            listed = self._listed[server] = _Listed(None if fits else tools)
        if listed.tools is None:
            if cursor is not None:
                raise InvalidParams("Invalid params: unknown cursor")  # one page: none was handed out
            return {"tools": encoded(listing)}
        tools = listed.tools

        def page(start: int) -> tuple[Any, int]:
            cut = listed.pages.get(start)
            if cut is None:
                piece, end = encode_page(tools.items, start, limits)
                cut = listed.pages[start] = (encoded(piece), end)
            return cut

        return list_result(tools, cursor, codec=self._codec, tenant_id=call.vhost.tenant_id,
                           vhost=call.vhost.slug, pages=page)
