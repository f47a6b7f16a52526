"""Backends the gateway answers itself (OpenAPI services compiled to tools, and a host's
`tool_search`): the MCP methods a tool server has, in either era. The session, if any, is the gateway's own; nothing is forwarded."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from apps.gateway.pipeline.calls import Call
from apps.gateway.pipeline.ports import ToolServer, UpstreamUnavailable
from apps.gateway.pipeline.propagation import trace_headers
from apps.gateway.pipeline.relay import Relay
from apps.gateway.pipeline.replies import Headers, Reply, accepted, error_reply, result_reply
from apps.gateway.pipeline.search import SearchServer, ToolSearch
from apps.gateway.pipeline.tracing import current
from apps.gateway.pipeline.values import VirtualHostView
from apps.gateway.protocol.errors import BackendUnavailable, GatewayError, InvalidParams, MethodNotFound
from apps.gateway.protocol.jsonrpc import Kind, Message, encoded

log = logging.getLogger(__name__)


class LocalTools:
    def __init__(self, relay: Relay, search: ToolSearch | None = None) -> None:
        self._relay = relay
        self._search = search

    def search_server(self, vhost: VirtualHostView, message: Message) -> SearchServer | None:
        """The host's `tool_search` tool when `message` calls it (answered before any naming rule)."""
        config = vhost.tool_search
        if config is None or self._search is None or message.method != "tools/call":
            return None
        if message.params.get("name") != config.name:
            return None
        return self._search.server(vhost)

    async def handle(
        self,
        call: Call,
        server: ToolServer,
        request_headers: Mapping[str, str],
        *,
        modern: bool,
        sse: bool,
        headers: Headers = (),
    ) -> Reply:
        """Answer `call.message`: `ping`, `tools/list` and `tools/call`; other requests are
        -32601, notifications are accepted (none means anything to a tool server)."""
        message = call.message
        if message.kind is not Kind.REQUEST:
            return accepted().with_headers(headers)
        # A call reaches the service (OpenAPI): it counts against the backend's concurrency limit.
        slot = await self._relay.take_slot(call, headers) if message.method == "tools/call" else None
        if isinstance(slot, Reply):
            return slot
        try:
            result = await self._result(call, server, request_headers)
        except GatewayError as error:
            reply = error_reply(message.id, error, headers)
            self._relay.record(call, "error", error.code, len(reply.body))
            return reply
        except asyncio.CancelledError:
            self._relay.record(call, "cancelled", None, 0)
            raise
        finally:
            if slot is not None:
                slot.leave()
        if modern:
            result = {"resultType": "complete", **result}
            if message.method == "tools/list":
                # Private: the list will depend on the caller's permissions; not reusable unasked.
                result.update(ttlMs=0, cacheScope="private")
        reply = result_reply(message.id, result, sse=sse, headers=headers)
        outcome = "tool_error" if result.get("isError") is True else "ok"
        self._relay.record(call, outcome, None, len(reply.body))
        return reply

    async def _result(self, call: Call, server: ToolServer, request_headers: Mapping[str, str]) -> dict[str, Any]:
        method = call.message.method
        params = call.message.params
        if method == "ping":
            return {}
        if method == "tools/list":
            if params.get("cursor") is not None:
                # The whole list is one page, so no cursor was ever handed out.
                raise InvalidParams("Invalid params: unknown cursor")
            return {"tools": encoded(server.tools_json())}
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
            with self._relay.tracer.span(f"tools/call {call.backend.name}", kind="client", **{
                "gateway.backend": call.backend.name, "gateway.backend.kind": call.backend.kind,
                "mcp.method.name": "tools/call", "gateway.tool.upstream_name": name,
            }) as span:
                try:
                    result = await server.call_tool(
                        name, arguments, headers=trace_headers(current() or call.trace), principal=call.principal
                    )
                except UpstreamUnavailable as exc:
                    raise self._unavailable(call, str(exc)) from None
                except TimeoutError:
                    raise self._unavailable(call, f"timed out after {call.backend.timeout:g} s") from None
                if result.get("isError") is True:
                    span.set("gateway.outcome", "tool_error")
                return result
        raise MethodNotFound(f"Method not found: {method}")

    def _unavailable(self, call: Call, reason: str) -> BackendUnavailable:
        log.warning("backend %s unavailable: %s", call.backend.name, reason)
        return BackendUnavailable(f"Backend {call.backend.name!r} unavailable: {reason}",
                                  data={"backend": call.backend.name})
