"""The tenant's dashboard: calls, errors, latency and refusals over the last hour or day, as
server-drawn SVG charts; htmx reloads the panel every 10 seconds."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from apps.audit.selectors import WINDOWS, Dashboard, audit_dashboard_get
from apps.console.access import console_view
from apps.console.charts import Series, bar_list, time_chart
from apps.console.first_steps import first_steps_list
from apps.tenants.models import Tenant


def _charts(board: Dashboard) -> list[Any]:
    per = "minute" if board.window == "hour" else "15 minutes"
    labels = [b.start.strftime("%H:%M") for b in board.bins]
    every = 10 if board.window == "hour" else 16
    bins = board.bins
    return [
        time_chart(
            title=f"Calls per {per}", description="Successful calls and errors (JSON-RPC and tool errors).",
            labels=labels, every=every, series=[
                Series("ok", [b.calls - b.errors - b.denied - b.rate_limited - b.over_budget for b in bins], css="s-ok"),
                Series("errors", [b.errors for b in bins], css="s-bad"),
                Series("refused", [b.denied + b.rate_limited + b.over_budget for b in bins], css="s-warn"),
            ],
        ),
        time_chart(
            title="Error rate", description="Errors among the calls of each interval.", labels=labels, every=every,
            unit="%", series=[Series("error rate", [b.error_rate if b.calls else None for b in bins], "line", "s-bad")],
        ),
        time_chart(
            title="Latency", description="Median (p50) and 99th percentile, in milliseconds.", labels=labels,
            every=every, unit=" ms", series=[
                Series("p50", [b.p50 for b in bins], "line", "s1"), Series("p99", [b.p99 for b in bins], "line", "s2"),
            ],
        ),
        time_chart(
            title="Refusals", description="Calls denied by policy, over a rate limit, or over a budget.",
            labels=labels, every=every, series=[
                Series("denied", [b.denied for b in bins], css="s-bad"),
                Series("rate limited", [b.rate_limited for b in bins], css="s-warn"),
                Series("over budget", [b.over_budget for b in bins], css="s2"),
            ],
        ),
    ]


def _context(request: HttpRequest, tenant: Tenant) -> dict[str, Any]:
    window = request.GET.get("window", "hour")
    window = window if window in WINDOWS else "hour"
    board = audit_dashboard_get(tenant=tenant, window=window)
    return {
        "board": board,
        "windows": list(WINDOWS),
        "charts": _charts(board),
        "tools_chart": bar_list(title="Top tools", items=[(t.tool, t.calls) for t in board.top_tools]),
    }


@require_GET
@console_view()
def dashboard(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """The page; a tenant not set up yet also gets its next steps (not polled: they change by hand)."""
    steps = first_steps_list(tenant=tenant)
    context = {**_context(request, tenant), "first_steps": steps if not all(s.done for s in steps) else []}
    return render(request, "console/dashboard/dashboard.html", context)


@require_GET
@console_view()
def dashboard_panel(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """The numbers and charts alone: what the page's polling swaps in."""
    return render(request, "console/dashboard/_panel.html", _context(request, tenant))


urls = [
    path("dashboard/", dashboard, name="dashboard"),
    path("dashboard/panel/", dashboard_panel, name="dashboard-panel"),
]
