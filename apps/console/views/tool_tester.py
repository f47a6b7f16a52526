"""The tool tester: "Try it" on a tool's page (docs/console.md, "Trying a tool"). Tenant admins only:
a call spends the chosen key's limits and budget and reaches the real backend.

Async views: the call runs on the event loop that serves MCP clients (`apps.gateway.tool_tester`).
Everything that reads the database — who may, the tool, the form — runs in `_prepare` (a sync
function under `console_view`, in a thread), and the page is rendered in one too."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path, reverse
from django.views.decorators.http import require_http_methods

from apps.catalog import tool_selectors
from apps.catalog.models import Backend
from apps.console.access import console_view
from apps.console.tool_try_form import ToolTryForm
from apps.gateway.tool_tester import (
    TEST_IDENTITY_PREFIX,
    TryRefused,
    TryResult,
    tool_call_try,
    tool_try_hosts_list,
)
from apps.tenants.models import Tenant
from apps.tenants.selectors import api_key_usable_list

#: Characters of a request body the page shows.
MAX_BODY_CHARS = 64 * 1024
ME = "me"


@dataclass(frozen=True, slots=True)
class _Tool:
    """The tool tried: its backend, its name there, its input schema and its page."""

    backend: Backend
    name: str
    input_schema: Any
    url: str


def _openapi_tool(tenant: Tenant, tool_id: int) -> _Tool | None:
    tool = tool_selectors.tool_get(tenant=tenant, tool_id=tool_id)
    if tool is None:
        return None
    return _Tool(tool.backend, tool.name, tool.input_schema, reverse("console:tool-detail", args=[tenant.slug, tool.pk]))


def _mcp_tool(tenant: Tenant, entry_id: int) -> _Tool | None:
    entry = tool_selectors.mcp_tool_get(tenant=tenant, entry_id=entry_id)
    if entry is None:
        return None
    return _Tool(entry.backend, entry.name, entry.input_schema,
                 reverse("console:mcp-tool-detail", args=[tenant.slug, entry.pk]))


Finder = Callable[[Tenant, int], _Tool | None]


@dataclass
class _Page:
    tenant: Tenant
    tool: _Tool
    form: ToolTryForm
    hosts: int
    call: dict[str, Any] | None  # tool_call_try's arguments, for a valid POST


@console_view(manage=True)
def _prepare(request: HttpRequest, tenant: Tenant, find: Finder, object_id: int) -> HttpResponse | _Page:
    tool = find(tenant, object_id)
    if tool is None:
        raise Http404(f"no tool with id {object_id}")
    hosts = tool_try_hosts_list(tenant=tenant, backend_id=tool.backend.pk, upstream_name=tool.name)
    keys = {str(key.pk): key for key in api_key_usable_list(tenant=tenant)}
    username = request.user.get_username()
    callers = [(ME, f"me: my test identity ({TEST_IDENTITY_PREFIX}{username})"),
               *((pk, f"key {key.name}" + (f" (team {key.team.slug})" if key.team else "")) for pk, key in keys.items())]
    form = ToolTryForm(request.POST if request.method == "POST" else None, schema=tool.input_schema,
                       hosts=[(h.value, f"{h.virtual_host} (as {h.exposed_name})") for h in hosts], callers=callers)
    call = None
    if request.method == "POST" and form.is_valid():
        chosen = form.call()
        host = next(h for h in hosts if h.value == chosen["host"])
        call = {
            "tenant": tenant, "virtual_host": host.virtual_host, "map_key": host.map_key,
            "backend_id": tool.backend.pk, "upstream_name": tool.name, "arguments": chosen["arguments"],
            "key": keys.get(chosen["caller"]), "username": username, "user_id": request.user.pk,
        }
    return _Page(tenant, tool, form, len(hosts), call)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _result_context(tenant: Tenant, result: TryResult) -> dict[str, Any]:
    """What the result section shows, made ready for the template."""
    since = (result.started_at - datetime.timedelta(seconds=1)).astimezone(datetime.UTC)
    query = urlencode({"trace": result.trace_id, "since": since.strftime("%Y-%m-%dT%H:%M:%S")})
    tool_result, error = result.result, result.error
    exchanges = []
    for exchange in result.exchanges:
        sent = exchange.request
        body = sent.body.decode("utf-8", "replace")
        exchanges.append({
            "method": sent.method, "url": sent.url, "headers": sent.headers, "status": exchange.status,
            "body": body[:MAX_BODY_CHARS], "body_cut": len(body) > MAX_BODY_CHARS, "body_bytes": len(sent.body),
        })
    return {
        "result": result,
        "audit_url": f"{reverse('console:audit-list', args=[tenant.slug])}?{query}",
        "tool_result": tool_result,
        "content": [
            {"type": item.get("type"), "text": item.get("text") if isinstance(item.get("text"), str) else "",
             "json": "" if item.get("type") == "text" else _pretty(item)}
            for item in (tool_result or {}).get("content") or () if isinstance(item, dict)
        ],
        "structured_json": _pretty(tool_result["structuredContent"]) if tool_result and "structuredContent" in tool_result else "",
        "error": error,
        "error_data_json": _pretty(error["data"]) if error and error.get("data") is not None else "",
        "response_json": _pretty(result.response) if result.response is not None else "",
        "exchanges": exchanges,
    }


def _page(request: HttpRequest, page: _Page, result: TryResult | None) -> HttpResponse:
    context = {"tool": page.tool, "form": page.form, "hosts": page.hosts,
               "openapi": page.tool.backend.kind == Backend.Kind.OPENAPI}
    if result is not None:
        context.update(_result_context(page.tenant, result))
    return render(request, "console/tools/tool_try.html", context, status=400 if page.form.errors else 200)


async def _try(request: HttpRequest, tenant: str, find: Finder, object_id: int) -> HttpResponse:
    """The form (GET), or the call and its result (POST)."""
    page = await sync_to_async(_prepare)(request, tenant=tenant, find=find, object_id=object_id)
    if isinstance(page, HttpResponse):  # to the sign-in form
        return page
    result = None
    if page.call is not None:
        try:
            result = await tool_call_try(**page.call)
        except TryRefused as exc:
            page.form.add_error(None, str(exc))
    return await sync_to_async(_page)(request, page, result)


@require_http_methods(["GET", "POST"])
async def tool_try(request: HttpRequest, tenant: str, tool_id: int) -> HttpResponse:
    return await _try(request, tenant, _openapi_tool, tool_id)


@require_http_methods(["GET", "POST"])
async def mcp_tool_try(request: HttpRequest, tenant: str, entry_id: int) -> HttpResponse:
    return await _try(request, tenant, _mcp_tool, entry_id)


urls = [
    path("tools/<int:tool_id>/try/", tool_try, name="tool-try"),
    path("tools/mcp/<int:entry_id>/try/", mcp_tool_try, name="mcp-tool-try"),
]
