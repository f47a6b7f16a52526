"""The console's backend pages: the list, create/edit/delete forms for both kinds, and an MCP
backend's page with its replicas' live health (an htmx fragment polled every 5 s) and "Test
connection". An OpenAPI backend's page is its spec page (`backend_specs.py`).

Thin views: each calls selectors or one service and renders. Every backend is looked up within
the URL's tenant, which `console_view` has checked the user may see (and, to change, manage)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.catalog import selectors
from apps.catalog.models import Backend
from apps.catalog.services import (
    DEFAULT_TIMEOUT_SECONDS,
    DEFAULT_TOOL_NAME_MAX_LENGTH,
    backend_create,
    backend_delete,
    backend_update,
)
from apps.console.access import console_view
from apps.console.paging import page_of
from apps.console.refusals import refusal_show
from apps.console.views.backend_specs import backend_or_404
from apps.gateway.probes import backend_probe, gateways_down
from apps.tenants.models import Tenant


class _BackendForm(forms.Form):
    name = forms.CharField(label="Name", max_length=64, help_text="Letters, digits, '_', '.' and '-'.")
    # Ranges are the service's (`backend_check`): the form reads numbers, the browser is told the range.
    timeout_seconds = forms.FloatField(label="Timeout (seconds)", initial=DEFAULT_TIMEOUT_SECONDS,
                                       widget=forms.NumberInput(attrs={"min": "0.001", "max": "86400", "step": "any"}))
    max_concurrency = forms.IntegerField(
        label="Most calls at once", required=False, widget=forms.NumberInput(attrs={"min": "1"}),
        help_text="Per gateway instance, over all replicas; more wait briefly, then fail. Empty: the deployment's default.",
    )


class McpBackendForm(_BackendForm):
    transport = forms.ChoiceField(label="Transport", choices=Backend.Transport.choices)
    urls = forms.CharField(
        label="Replica URLs", widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="One URL per line; the gateway spreads sessions over them and skips a replica that is down.",
    )

    def clean_urls(self) -> list[str]:
        return [line.strip() for line in self.cleaned_data["urls"].splitlines() if line.strip()]


class OpenApiBackendForm(_BackendForm):
    base_url = forms.CharField(
        label="Base URL", required=False, max_length=500,
        help_text="Where the service is reached; empty: the spec's servers.",
    )
    tool_name_max_length = forms.IntegerField(
        label="Longest tool name", initial=DEFAULT_TOOL_NAME_MAX_LENGTH,
        widget=forms.NumberInput(attrs={"min": "1", "max": "128"}),
    )
    include_deprecated = forms.BooleanField(label="Turn deprecated operations into tools too", required=False)


def _form_class(kind: str) -> type[_BackendForm]:
    return OpenApiBackendForm if kind == Backend.Kind.OPENAPI else McpBackendForm


def backend_page_url(tenant: Tenant, backend: Backend) -> str:
    """The backend's own page: an OpenAPI backend's is its spec page."""
    name = "console:backend-spec" if backend.kind == Backend.Kind.OPENAPI else "console:backend-detail"
    return reverse(name, kwargs={"tenant": tenant.slug, "backend_id": backend.pk})


@require_GET
@console_view()
def backend_list(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    page = page_of(request, selectors.backend_list(tenant=tenant))
    return render(request, "console/backends/backend_list.html", {"page_obj": page, "backends": page.object_list})


@require_http_methods(["GET", "POST"])
@console_view()
def backend_new(request: HttpRequest, tenant: Tenant, kind: str) -> HttpResponse:
    """Create an MCP (`kind` mcp) or OpenAPI (openapi) backend; PRG to its page."""
    form_class = _form_class(kind)
    form = form_class(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        try:
            backend = backend_create(tenant=tenant, kind=kind, urls=data.pop("urls", []), **data)
        except ValidationError as exc:
            refusal_show(form, exc)
        else:
            messages.success(request, f"Backend {backend.name} created.")
            return redirect(backend_page_url(tenant, backend))
    context = {"form": form, "kind": kind, "kind_label": Backend.Kind(kind).label, "backend": None}
    return render(request, "console/backends/backend_form.html", context, status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
@console_view()
def backend_edit(request: HttpRequest, tenant: Tenant, backend_id: int) -> HttpResponse:
    """Edit a backend (its name stays: gateways and audit rows know it by name)."""
    backend = backend_or_404(tenant, backend_id)
    form_class = _form_class(backend.kind)
    initial = {
        "name": backend.name, "timeout_seconds": backend.timeout_seconds, "transport": backend.transport,
        "urls": "\n".join(r.url for r in backend.replicas.order_by("position")), "base_url": backend.base_url,
        "tool_name_max_length": backend.tool_name_max_length, "include_deprecated": backend.include_deprecated,
        "max_concurrency": backend.max_concurrency,
    }
    form = form_class(request.POST or None, initial=initial)
    form.fields["name"].disabled = True
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        data.pop("name")
        try:
            backend_update(
                backend=backend, kind=backend.kind, urls=data.pop("urls", []),
                transport=data.pop("transport", backend.transport), **data,
            )
        except ValidationError as exc:
            refusal_show(form, exc)
        else:
            messages.success(request, f"Backend {backend.name} saved.")
            return redirect(backend_page_url(tenant, backend))
    context = {"form": form, "kind": backend.kind, "kind_label": backend.get_kind_display(), "backend": backend}
    return render(request, "console/backends/backend_form.html", context, status=400 if form.errors else 200)


@require_http_methods(["GET", "POST"])
@console_view()
def backend_remove(request: HttpRequest, tenant: Tenant, backend_id: int) -> HttpResponse:
    """GET asks for confirmation; POST deletes, or shows the service's refusal (still mounted)."""
    backend = backend_or_404(tenant, backend_id)
    error = ""
    if request.method == "POST":
        try:
            backend_delete(backend=backend)
        except ValidationError as exc:
            error = "; ".join(exc.messages)
        else:
            messages.success(request, f"Backend {backend.name} deleted.")
            return redirect("console:backend-list", tenant=tenant.slug)
    context = {"backend": backend, "error": error, "back_url": backend_page_url(tenant, backend)}
    return render(request, "console/backends/backend_delete.html", context, status=400 if error else 200)


@require_GET
@console_view()
def backend_detail(request: HttpRequest, tenant: Tenant, backend_id: int) -> HttpResponse:
    backend = backend_or_404(tenant, backend_id)
    if backend.kind == Backend.Kind.OPENAPI:
        return redirect(backend_page_url(tenant, backend))
    replicas = list(backend.replicas.order_by("position"))
    return render(request, "console/backends/backend_detail.html", {"backend": backend, "replicas": replicas})


@require_GET
@console_view()
def backend_health(request: HttpRequest, tenant: Tenant, backend_id: int) -> HttpResponse:
    """The health fragment (polled): each replica checked, or the check of the last few seconds,
    and whether the gateways have marked it down."""
    backend = backend_or_404(tenant, backend_id)
    probe = backend_probe(backend=backend)
    down = gateways_down(backend=backend, probe=probe)
    rows = [(replica, None if down is None else down.get(replica.url)) for replica in probe.replicas]
    return render(request, "console/backends/_health.html",
                  {"backend": backend, "probe": probe, "rows": rows, "gateways_track": down is not None})


@require_POST
@console_view(members_write=True)  # a check changes nothing: whoever sees the backend may run it
def backend_test(request: HttpRequest, tenant: Tenant, backend_id: int) -> HttpResponse:
    """Check every replica now and show what each answered (an htmx fragment; a whole page without JS)."""
    backend = backend_or_404(tenant, backend_id)
    context = {"backend": backend, "probe": backend_probe(backend=backend, fresh=True)}
    if request.headers.get("HX-Request"):
        return render(request, "console/backends/_test_result.html", context)
    return render(request, "console/backends/backend_test.html", context)


urls = [
    path("backends/", backend_list, name="backend-list"),
    path("backends/new/mcp/", backend_new, {"kind": Backend.Kind.MCP}, name="backend-new-mcp"),
    path("backends/new/openapi/", backend_new, {"kind": Backend.Kind.OPENAPI}, name="backend-new-openapi"),
    path("backends/<int:backend_id>/", backend_detail, name="backend-detail"),
    path("backends/<int:backend_id>/edit/", backend_edit, name="backend-edit"),
    path("backends/<int:backend_id>/delete/", backend_remove, name="backend-delete"),
    path("backends/<int:backend_id>/health/", backend_health, name="backend-health"),
    path("backends/<int:backend_id>/test/", backend_test, name="backend-test"),
]
