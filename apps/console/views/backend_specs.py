"""The console's OpenAPI spec page of a backend: spec upload (htmx polls the version history while a
version compiles), the version history with each version's tool diff, and the write-only egress
credential. The backends' list, forms and MCP page are in `backends.py`.

Thin views: each calls selectors or one service and renders. Every backend is looked up within
the URL's tenant, which `console_view` has checked the user may see (and, to change, manage)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.catalog import selectors
from apps.catalog.credentials import egress_credential_clear, egress_credential_set
from apps.catalog.models import Backend, EgressCredential, SpecVersion
from apps.catalog.specs import spec_upload
from apps.console.access import console_view
from apps.console.refusals import refusal_show
from apps.tenants.models import Tenant

_IN_PROGRESS = {SpecVersion.Status.PENDING, SpecVersion.Status.COMPILING}


class SpecUploadForm(forms.Form):
    file = forms.FileField(label="OpenAPI document (JSON or YAML, OpenAPI 3.x or Swagger 2.0)")


class EgressCredentialForm(forms.Form):
    """The credential form. The secret is a password field that is never rendered with a value,
    not even after a refused submission: a secret leaves the server only towards the backend."""

    kind = forms.ChoiceField(label="Kind", choices=EgressCredential.Kind.choices, required=False)
    # What a credential may be is the service's (`egress_credential_check`); the browser is told lengths.
    name = forms.CharField(
        label="Name", required=False, strip=False, widget=forms.TextInput(attrs={"maxlength": "128"}),
        help_text="The header, query parameter or cookie of an API key; empty takes the spec's.",
    )
    username = forms.CharField(
        label="Username", required=False, strip=False, widget=forms.TextInput(attrs={"maxlength": "128"}),
        help_text="HTTP basic only.",
    )
    secret = forms.CharField(
        label="Secret", required=False, strip=False,  # spaces may be part of a secret
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="The API key, token or password. Stored encrypted; it is never shown again.",
    )


def backend_or_404(tenant: Tenant, backend_id: int) -> Backend:
    """The URL's backend within the URL's tenant; 404 for another tenant's (or none)."""
    backend = selectors.backend_get(tenant=tenant, backend_id=backend_id)
    if backend is None:
        raise Http404(f"no backend with id {backend_id}")
    return backend


def _spec_page(
    request: HttpRequest,
    backend: Backend,
    *,
    form: SpecUploadForm | None = None,
    credential_form: EgressCredentialForm | None = None,
) -> HttpResponse:
    """The spec page with its two forms; 400 when either carries errors (a refused submission).
    A fresh credential form starts from the kind, name and username as set (never the secret)."""
    credential = selectors.egress_credential_state(backend=backend)
    form = form if form is not None else SpecUploadForm()
    if credential_form is None:
        initial = {"kind": credential.kind, "name": credential.name, "username": credential.username} if credential else {}
        credential_form = EgressCredentialForm(initial=initial)
    context = {
        **_history_context(backend),
        "form": form,
        "credential_form": credential_form,
        "credential": credential,
        "security_schemes": [
            {**scheme, "description": selectors.credential_kind_describe(scheme["kind"], scheme["parameter"])}
            for scheme in selectors.backend_security_schemes(backend=backend)
        ],
    }
    refused = bool(form.errors or credential_form.errors)
    return render(request, "console/backends/backend_spec.html", context, status=400 if refused else 200)


def _history_context(backend: Backend) -> dict[str, Any]:
    versions = list(selectors.spec_version_list(backend=backend))
    return {
        "backend": backend,
        "versions": versions,
        "in_progress": any(v.status in _IN_PROGRESS for v in versions),
    }


@require_http_methods(["GET", "POST"])
@console_view()
def backend_spec(request: HttpRequest, tenant: Tenant, backend_id: int) -> HttpResponse:
    """The backend's spec page: GET shows it; POST uploads a document from the form and, when the
    service takes it, redirects back (PRG) with a message. A refusal re-renders the form (400)."""
    backend = backend_or_404(tenant, backend_id)
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
                return redirect("console:backend-spec", tenant=tenant.slug, backend_id=backend.pk)
    return _spec_page(request, backend, form=form)


@require_GET
@console_view()
def backend_spec_history(request: HttpRequest, tenant: Tenant, backend_id: int) -> HttpResponse:
    """The history fragment alone; it carries its own polling trigger while a version compiles."""
    backend = backend_or_404(tenant, backend_id)
    return render(request, "console/backends/_spec_history.html", _history_context(backend))


@require_POST
@console_view()
def credential_set(request: HttpRequest, tenant: Tenant, backend_id: int) -> HttpResponse:
    """Set or replace the backend's egress credential from the spec page's form: PRG with a message
    when the service takes it; the page again with the form's errors (400) when it does not."""
    backend = backend_or_404(tenant, backend_id)
    form = EgressCredentialForm(request.POST)
    if form.is_valid():
        try:
            egress_credential_set(backend=backend, **form.cleaned_data)
        except ValidationError as exc:
            refusal_show(form, exc)  # messages the service keys by field go to that field
        else:
            messages.success(request, "Credential saved.")
            return redirect("console:backend-spec", tenant=tenant.slug, backend_id=backend.pk)
    return _spec_page(request, backend, credential_form=form)


@require_POST
@console_view()
def credential_remove(request: HttpRequest, tenant: Tenant, backend_id: int) -> HttpResponse:
    backend = backend_or_404(tenant, backend_id)
    if selectors.egress_credential_state(backend=backend) is None:
        messages.info(request, "There was no credential to remove.")
    else:
        egress_credential_clear(backend=backend)
        messages.success(request, "Credential removed: requests to the backend now go without one.")
    return redirect("console:backend-spec", tenant=tenant.slug, backend_id=backend.pk)


urls = [
    path("backends/<int:backend_id>/spec/", backend_spec, name="backend-spec"),
    path("backends/<int:backend_id>/spec/history/", backend_spec_history, name="backend-spec-history"),
    path("backends/<int:backend_id>/credential/", credential_set, name="credential-set"),
    path("backends/<int:backend_id>/credential/remove/", credential_remove, name="credential-remove"),
]
