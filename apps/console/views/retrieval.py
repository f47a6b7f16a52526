"""The console's retrieval playground: what `tool_search` finds on one of the tenant's virtual
hosts for a query, with each retrieval path's rank and score, how the query was read (ids read as
resource types), and the id-reading rules extracted from the tenant's catalog.

Thin views: the search is `virtual_host_tools_search`, the reading `query_read`, the rules
`rewrite_rules_list` (apps/retrieval/search.py); every lookup is within the URL's tenant."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from apps.catalog import tool_selectors
from apps.catalog.models import VirtualHost
from apps.console.access import console_view
from apps.console.views.tools import htmx_fragment
from apps.kernel.search_tool import DEFAULT_K, MAX_K, MAX_QUERY_CHARS
from apps.retrieval.search import query_read, rewrite_rules_list, virtual_host_tools_search
from apps.tenants.models import Tenant

RULES_PAGE_SIZE = 25


class PlaygroundForm(forms.Form):
    host = forms.ModelChoiceField(label="Virtual host", queryset=VirtualHost.objects.none(), empty_label=None)
    query = forms.CharField(label="Query", max_length=MAX_QUERY_CHARS, strip=True)
    k = forms.IntegerField(label="Results (k)", min_value=1, max_value=MAX_K, initial=DEFAULT_K)

    def __init__(self, *args: Any, tenant: Tenant, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The tenant's hosts only: another tenant's id in the URL is "not one of the choices".
        self.fields["host"].queryset = VirtualHost.objects.filter(tenant=tenant).order_by("slug")
        self.fields["host"].label_from_instance = lambda host: host.slug


@require_GET
@console_view()
def playground(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """GET without a query shows the form and the rules; with one, the search's answer too. An
    htmx request gets the results fragment alone."""
    asked = "query" in request.GET
    form = PlaygroundForm(request.GET if asked else None, tenant=tenant, initial={"k": DEFAULT_K})
    results, reading = None, None
    if asked and form.is_valid():
        host = form.cleaned_data["host"]
        query = form.cleaned_data["query"]
        found = virtual_host_tools_search(virtual_host=host, query=query, k=form.cleaned_data["k"])
        reading = query_read(tenant_id=tenant.pk, query=query)
        refs = tool_selectors.tool_refs_get(tenant=tenant, keys=[(f.backend_id, f.name) for f in found])
        results = [{"found": f, "ref": refs.get((f.backend_id, f.name))} for f in found]
    context = {"form": form, "results": results, "reading": reading, "asked": asked}
    if htmx_fragment(request):
        return render(request, "console/retrieval/_results.html", context, status=400 if form.errors else 200)
    rules = Paginator(rewrite_rules_list(tenant_id=tenant.pk), RULES_PAGE_SIZE).get_page(request.GET.get("rules_page"))
    query = request.GET.copy()
    query.pop("rules_page", None)
    context.update(rules=rules, rules_query=query.urlencode())
    return render(request, "console/retrieval/playground.html", context, status=400 if form.errors else 200)


urls = [
    path("retrieval/", playground, name="retrieval-playground"),
]
