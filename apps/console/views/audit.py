"""The audit log: filtered pages (keyset pagination: "older" and "newer" links), the CSV export of
the filtered rows, and the live tail (a websocket, apps.console.consumers) on the newest page."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from apps.audit.export import audit_csv_lines
from apps.audit.forms import AuditFilterForm
from apps.audit.selectors import AuditPage, audit_record_export, audit_record_page
from apps.console.access import console_view
from apps.tenants.models import Tenant


def _query(request: HttpRequest, **changes: str) -> str:
    """The page's query string with `changes` (an empty value drops the parameter)."""
    query = request.GET.copy()
    for name, value in changes.items():
        query.pop(name, None)
        if value:
            query[name] = value
    encoded = query.urlencode()
    return f"?{encoded}" if encoded else ""


@require_GET
@console_view()
def audit_list(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    form = AuditFilterForm(request.GET, tenant=tenant)
    cursor = request.GET.get("cursor", "")
    page, problem = AuditPage([], None, None), ""
    if form.is_valid():
        try:
            page = audit_record_page(tenant=tenant, filters=form.audit_filter(), cursor=cursor)
        except ValidationError as exc:
            problem = " ".join(exc.messages)
    context = {
        "form": form,
        "page": page,
        "problem": problem,
        "tail": form.is_valid() and not cursor,  # the tail shows new rows on the newest page only
        "filter_query": _query(request, cursor=""),
        "older_query": _query(request, cursor=page.older) if page.older else "",
        "newer_query": _query(request, cursor=page.newer) if page.newer else "",
    }
    return render(request, "console/audit/audit_list.html", context, status=200 if form.is_valid() and not problem else 400)


@require_GET
@console_view()
def audit_csv(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    form = AuditFilterForm(request.GET, tenant=tenant)
    if not form.is_valid():
        return HttpResponse(form.error_text(), status=400, content_type="text/plain; charset=utf-8")
    lines = audit_csv_lines(audit_record_export(tenant=tenant, filters=form.audit_filter()))
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-{tenant.slug}.csv"'
    return response


urls = [
    path("audit/", audit_list, name="audit-list"),
    path("audit/export.csv", audit_csv, name="audit-csv"),
]
