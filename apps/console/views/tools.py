"""The console's tools pages: every tool of the tenant, searched live (htmx swaps the results as
one types, and keeps the URL in step), and one tool in full, with its prerequisite chain drawn.

Thin views: each calls the selectors of `apps.catalog.tool_selectors` (and the prerequisite graph
of `apps.retrieval.graphs`) within the URL's tenant, which `console_view` has checked."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from apps.catalog import tool_selectors
from apps.console.access import console_view
from apps.retrieval.graphs import NODE_HEIGHT, NODE_WIDTH, tool_prerequisite_graph
from apps.tenants.models import Tenant

PAGE_SIZE = 50


class ToolFilterForm(forms.Form):
    q = forms.CharField(label="Search", required=False, max_length=tool_selectors.MAX_SEARCH_CHARS)
    backend = forms.TypedChoiceField(label="Backend", required=False, coerce=int, empty_value=None)

    def __init__(self, *args: Any, backends: list[tool_selectors.ToolBackend], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["backend"].choices = [("", "All backends"), *((b.id, b.name) for b in backends)]


def htmx_fragment(request: HttpRequest) -> bool:
    """Whether htmx asked for a part of the page (not when it restores a page from history)."""
    return request.headers.get("HX-Request") == "true" and request.headers.get("HX-History-Restore-Request") != "true"


@require_GET
@console_view()
def tool_list(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """The tools, 50 a page in (backend, name) order; `q` searches names and descriptions,
    `backend` narrows to one. An htmx request gets the results fragment alone."""
    backends = tool_selectors.tool_backends_list(tenant=tenant)
    form = ToolFilterForm(request.GET, backends=backends)
    page = None
    if form.is_valid():
        chosen = form.cleaned_data["backend"]
        shown = [b for b in backends if chosen is None or b.id == chosen]
        rows = tool_selectors.tool_list(backends=shown, search=form.cleaned_data["q"])
        page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
        names = {b.id: b.name for b in backends}
        for row in page.object_list:
            row["backend_name"] = names[row["backend_id"]]
    query = request.GET.copy()
    query.pop("page", None)
    context = {"form": form, "page": page, "backends": backends, "query": query.urlencode()}
    template = "console/tools/_results.html" if htmx_fragment(request) else "console/tools/tool_list.html"
    return render(request, template, context, status=200 if form.is_valid() else 400)


def _pretty(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


@require_GET
@console_view()
def tool_detail(request: HttpRequest, tenant: Tenant, tool_id: int) -> HttpResponse:
    tool = tool_selectors.tool_get(tenant=tenant, tool_id=tool_id)
    if tool is None:
        raise Http404(f"no tool with id {tool_id}")
    return render(request, "console/tools/tool_detail.html", {
        "tool": tool,
        "parameters": tool_selectors.schema_parameters(tool.input_schema),
        "output_parameters": tool_selectors.schema_parameters(tool.output_schema),
        "input_json": _pretty(tool.input_schema),
        "output_json": _pretty(tool.output_schema) if tool.output_schema is not None else "",
        "binding": tool.binding,
        "graph": tool_prerequisite_graph(tool=tool),
        "node_width": NODE_WIDTH,
        "node_height": NODE_HEIGHT,
    })


@require_GET
@console_view()
def mcp_tool_detail(request: HttpRequest, tenant: Tenant, entry_id: int) -> HttpResponse:
    entry = tool_selectors.mcp_tool_get(tenant=tenant, entry_id=entry_id)
    if entry is None:
        raise Http404(f"no MCP tool with id {entry_id}")
    return render(request, "console/tools/mcp_tool_detail.html", {"entry": entry})


urls = [
    path("tools/", tool_list, name="tool-list"),
    path("tools/<int:tool_id>/", tool_detail, name="tool-detail"),
    path("tools/mcp/<int:entry_id>/", mcp_tool_detail, name="mcp-tool-detail"),
]
