"""The console's catalog pages (server-rendered; htmx polls the spec history while it compiles).

Thin views: each calls selectors or one service and renders. Who may see them is decided by
`apps.catalog.api.may_manage_catalog`, the same rule as the REST API's."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from apps.catalog import selectors
from apps.catalog.api import may_manage_catalog
from apps.catalog.models import Backend, SpecVersion
from apps.catalog.specs import spec_upload

View = Callable[..., HttpResponse]
_IN_PROGRESS = {SpecVersion.Status.PENDING, SpecVersion.Status.COMPILING}


def console_view(view: View) -> View:
    """Anonymous visitors go to the admin's login form (and come back); signed-in users that
    may not manage the catalog get 403 rather than a login loop."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), reverse("admin:login"))
        if not may_manage_catalog(request.user):
            raise PermissionDenied
        return view(request, *args, **kwargs)

    return wrapped


class SpecUploadForm(forms.Form):
    file = forms.FileField(label="OpenAPI document (JSON or YAML, OpenAPI 3.x or Swagger 2.0)")


def _backend_or_404(backend_id: int) -> Backend:
    backend = selectors.backend_get(backend_id=backend_id)
    if backend is None:
        raise Http404(f"no backend with id {backend_id}")
    return backend


def _history_context(backend: Backend) -> dict[str, Any]:
    versions = list(selectors.spec_version_list(backend=backend))
    return {
        "backend": backend,
        "versions": versions,
        "in_progress": any(v.status in _IN_PROGRESS for v in versions),
    }


@require_GET
@console_view
def console_home(request: HttpRequest) -> HttpResponse:
    return redirect("catalog-console:backend-list")


@require_GET
@console_view
def backend_list(request: HttpRequest) -> HttpResponse:
    return render(request, "catalog/backend_list.html", {"backends": selectors.backend_list_all()})


@require_http_methods(["GET", "POST"])
@console_view
def backend_spec(request: HttpRequest, backend_id: int) -> HttpResponse:
    """The backend's spec page: GET shows it; POST uploads a document from the form and, when the
    service takes it, redirects back (PRG) with a message. A refusal re-renders the form (400)."""
    backend = _backend_or_404(backend_id)
    form = SpecUploadForm()
    if request.method == "POST":
        form = SpecUploadForm(request.POST, request.FILES)
        if form.is_valid():
            upload = form.cleaned_data["file"]
            # Read one byte past the limit, not the whole file: the service then refuses it with its message.
            document = upload.read(settings.GATEWAY_SPEC_MAX_BYTES + 1)
            try:
                version = spec_upload(
                    backend=backend, document=document, filename=upload.name or "",
                    uploaded_by=request.user.get_username(),
                )
            except ValidationError as exc:
                form.add_error("file", exc.messages)
            else:
                messages.success(
                    request, f"Uploaded {version.filename or 'the document'} as version {version.number}."
                )
                return redirect("catalog-console:backend-spec", backend_id=backend.pk)
    context = {**_history_context(backend), "form": form}
    return render(request, "catalog/backend_spec.html", context, status=400 if form.errors else 200)


@require_GET
@console_view
def backend_spec_history(request: HttpRequest, backend_id: int) -> HttpResponse:
    """The history fragment alone; it carries its own polling trigger while a version compiles."""
    backend = _backend_or_404(backend_id)
    return render(request, "catalog/_spec_history.html", _history_context(backend))
