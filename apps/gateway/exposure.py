"""Which tool names a virtual host serves, for the console's preview and the REST API: each mounted
backend's tools (an OpenAPI backend's compiled catalog, or what an MCP server lists now) named by
the gateway's own naming contract (`apps.kernel.names.Naming`: aliases, map-key prefixes,
dropped names), plus the host's tool_search when it has one."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from apps.catalog.models import Backend, Tool, VirtualHost
from apps.catalog.selectors import indexed_tool_counts_get, tool_search_mode_effective
from apps.common.redis import redis_client
from apps.gateway.tool_lists import mcp_tools_fetch
from apps.kernel.names import Naming

log = logging.getLogger(__name__)

LIST_TIMEOUT_SECONDS = 5.0
LIST_CACHE_SECONDS = 30


@dataclass(frozen=True)
class ExposedTool:
    name: str  # as the host lists it
    map_key: str
    backend: str
    upstream_name: str


@dataclass(frozen=True)
class DroppedTool:
    map_key: str
    upstream_name: str
    reason: str


@dataclass(frozen=True)
class ExposedTools:
    """`tools` by exposed name; `dropped` the tools no name routes back to; `unavailable` map key ->
    why that backend's tools could not be had (an unreachable MCP server: its names are missing)."""

    tools: list[ExposedTool] = field(default_factory=list)
    dropped: list[DroppedTool] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)
    tool_search: str = ""  # the name of the gateway's own tool_search, when the host has it


def backend_tool_names(*, backend: Backend) -> list[str]:
    """The backend's upstream tool names: an OpenAPI backend's compiled tools, or what the MCP server
    lists (asked at most every LIST_CACHE_SECONDS). Raises when an MCP server cannot be asked."""
    if backend.kind == Backend.Kind.OPENAPI:
        return list(Tool.objects.filter(backend=backend).order_by("name").values_list("name", flat=True))
    key = f"catalog:tool-names:{backend.pk}:{backend.updated_at.timestamp()}"
    cached = redis_client().get(key)
    if cached is not None:
        return json.loads(cached)
    listed = mcp_tools_fetch(backend=backend, timeout=LIST_TIMEOUT_SECONDS)
    names = sorted({tool["name"] for tool in listed if isinstance(tool.get("name"), str)})
    redis_client().set(key, json.dumps(names), ex=LIST_CACHE_SECONDS)
    return names


def virtual_host_exposed_tools(*, virtual_host: VirtualHost) -> ExposedTools:
    """The names `virtual_host` lists now, as the gateway computes them (see module docstring)."""
    mounts = {m.map_key: m.backend for m in virtual_host.mounts.select_related("backend")}
    aliases = {a.alias: (a.map_key, a.upstream_name) for a in virtual_host.tool_aliases.all()}
    naming = Naming.build(mounts.keys(), aliases)
    mode = tool_search_mode_effective(
        mode=virtual_host.tool_search, backend_ids=(b.pk for b in mounts.values()),
        indexed=indexed_tool_counts_get(tenant_id=virtual_host.tenant_id) if virtual_host.tool_search == VirtualHost.ToolSearch.AUTO else {},
    )
    result = ExposedTools(tool_search=virtual_host.tool_search_name if mode != VirtualHost.ToolSearch.OFF else "")
    for map_key, backend in sorted(mounts.items()):
        try:
            names = backend_tool_names(backend=backend)
        except Exception as exc:  # noqa: BLE001 - unreachable, refusing, malformed: say so, show the rest
            log.info("tools of backend %s not listed for the preview: %s", backend.name, exc)
            result.unavailable[map_key] = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            continue
        shown, dropped = naming.expose_tools(map_key, [{"name": name} for name in names])
        upstream_of = {exposed: upstream for upstream in names for exposed in naming.tool_names(map_key, upstream)}
        result.tools.extend(
            ExposedTool(tool["name"], map_key, backend.name, upstream_of.get(tool["name"], tool["name"])) for tool in shown
        )
        result.dropped.extend(DroppedTool(d.map_key, d.name, d.reason) for d in dropped)
    result.tools.sort(key=lambda t: t.name)
    return result
