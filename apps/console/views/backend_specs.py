"""The console's OpenAPI spec page of a backend: spec upload (htmx polls the version history while a
version compiles, and with it the credential's facts, which follow the served spec's security
schemes), the version history with each version's tool diff, publishing a held version anyway and
rolling back to an earlier one (each after a confirmation page), and the write-only egress
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
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.catalog import selectors
from apps.catalog.credentials import egress_credential_clear, egress_credential_set
from apps.catalog.models import Backend, EgressCredential, SpecVersion
from apps.catalog.specs import spec_upload, spec_version_publish, spec_version_rollback
from apps.console.access import console_view
from apps.console.refusals import refusal_show
from apps.tenants.models import Tenant

_IN_PROGRESS = {SpecVersion.Status.PENDING, SpecVersion.Status.COMPILING}


class SpecUploadForm(forms.Form):
    file = forms.FileField(label="OpenAPI document (JSON or YAML, OpenAPI 3.x or Swagger 2.0)")
    allow_removals = forms.BooleanField(
        label="Publish it even if it removes more than half of the tools served now", required=False,
        help_text="Unticked, such a version compiles but is held, and the backend keeps serving the current one.",
    )


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
        **_credential_facts_context(backend, credential),
        "form": form,
        "credential_form": credential_form,
    }
    refused = bool(form.errors or credential_form.errors)
    return render(request, "console/backends/backend_spec.html", context, status=400 if refused else 200)


def _credential_facts_context(backend: Backend, credential: selectors.EgressCredentialState | None) -> dict[str, Any]:
    """The credential as set and the served spec's security schemes (what a credential left to the spec follows)."""
    return {
        "credential": credential,
        "security_schemes": [
            {**scheme, "description": selectors.credential_kind_describe(scheme["kind"], scheme["parameter"])}
            for scheme in selectors.backend_security_schemes(backend=backend)
        ],
    }


def _history_context(backend: Backend) -> dict[str, Any]:
    versions = list(selectors.spec_version_list(backend=backend))
    active = next((v for v in versions if v.pk == backend.active_spec_id), None)
    return {
        "backend": backend,
        "versions": versions,
        "active": active,
        "in_progress": any(v.status in _IN_PROGRESS for v in versions),
    }


def _outcome_message(request: HttpRequest, version: SpecVersion, head: str) -> None:
    """The flash after an upload, a rollback or a publish, styled as what became of the version:
    compiled eagerly (tests, a quick worker) it is already ready, held or failed; usually it is
    still compiling. `head` says what was done ("Uploaded x.json as version 3")."""
    if version.status == SpecVersion.Status.FAILED:
        count = len(version.errors)
        messages.error(request, f"{head}, but it failed with {count} error{'s' * (count != 1)}: nothing from it is "
                                f"served. See them below.")
    elif version.status == SpecVersion.Status.HELD:
        messages.warning(request, f"{head}, but it is held, not published: it would remove "
                                  f"{len(version.changes.get('removed', []))} of the {version.changes.get('served', 0)} "
                                  f"tools served now. Check them below; “Publish anyway…” serves it.")
    elif version.status == SpecVersion.Status.READY and version.changes.get("superseded_by"):
        messages.info(request, f"{head}; version {version.changes['superseded_by']} was published first.")
    elif version.status == SpecVersion.Status.READY:
        messages.success(request, f"{head}: it is served, with {version.tool_count} tool{'s' * (version.tool_count != 1)}.")
    else:
        messages.info(request, f"{head}; it is compiling (the history below shows when it is done).")


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
                    uploaded_by=request.user.get_username(), allow_removals=form.cleaned_data["allow_removals"],
                )
            except ValidationError as exc:
                form.add_error("file", exc.messages)
            else:
                version.refresh_from_db()  # the upload has committed: compiled already, when eager
                _outcome_message(request, version, f"Uploaded {version.filename or 'the document'} as version {version.number}")
                return redirect("console:backend-spec", tenant=tenant.slug, backend_id=backend.pk)
    return _spec_page(request, backend, form=form)


@require_GET
@console_view()
def backend_spec_history(request: HttpRequest, tenant: Tenant, backend_id: int) -> HttpResponse:
    """The history fragment alone; it carries its own polling trigger while a version compiles.
    The credential's facts come with it, swapped out of band: a version published changes the
    spec's security schemes, and what a credential left to the spec sends."""
    backend = backend_or_404(tenant, backend_id)
    context = {**_history_context(backend),
               **_credential_facts_context(backend, selectors.egress_credential_state(backend=backend))}
    return render(request, "console/backends/_spec_history_poll.html", context)


def _version_or_404(backend: Backend, number: int) -> SpecVersion:
    version = selectors.spec_version_get(backend=backend, number=number)
    if version is None:
        raise Http404(f"backend {backend.name!r} has no spec version {number}")
    return version


@require_http_methods(["GET", "POST"])
@console_view()
def spec_version_publish_confirm(request: HttpRequest, tenant: Tenant, backend_id: int, number: int) -> HttpResponse:
    """Publish a held version anyway: GET asks (what it removes), POST does it and goes back to the
    spec page with a message; a refusal shows the page again with the reason (400)."""
    backend = backend_or_404(tenant, backend_id)
    version = _version_or_404(backend, number)
    error = ""
    if request.method == "POST":
        try:
            published = spec_version_publish(backend=backend, number=number)
        except ValidationError as exc:
            error = "; ".join(exc.messages)
        else:
            _outcome_message(request, published, f"Version {number} published anyway")
            return redirect("console:backend-spec", tenant=tenant.slug, backend_id=backend.pk)
    context = {**_history_context(backend), "version": version, "action": "publish", "error": error}
    return render(request, "console/backends/spec_version_confirm.html", context, status=400 if error else 200)


@require_http_methods(["GET", "POST"])
@console_view()
def spec_version_rollback_confirm(request: HttpRequest, tenant: Tenant, backend_id: int, number: int) -> HttpResponse:
    """Roll back to an earlier ready version: GET asks, POST uploads its document as the next
    version (published whatever it removes) and goes back to the spec page with a message."""
    backend = backend_or_404(tenant, backend_id)
    version = _version_or_404(backend, number)
    error = ""
    if request.method == "POST":
        try:
            restored = spec_version_rollback(backend=backend, number=number, uploaded_by=request.user.get_username())
        except ValidationError as exc:
            error = "; ".join(exc.messages)
        else:
            restored.refresh_from_db()  # committed: compiled already, when eager
            _outcome_message(request, restored, f"Rolled back to version {number} as version {restored.number}")
            return redirect("console:backend-spec", tenant=tenant.slug, backend_id=backend.pk)
    context = {**_history_context(backend), "version": version, "action": "rollback", "error": error}
    return render(request, "console/backends/spec_version_confirm.html", context, status=400 if error else 200)


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


@require_http_methods(["GET", "POST"])
@console_view()
def credential_remove(request: HttpRequest, tenant: Tenant, backend_id: int) -> HttpResponse:
    """GET asks for confirmation (the secret cannot be shown again, so it cannot be put back from
    here); POST removes it."""
    backend = backend_or_404(tenant, backend_id)
    if selectors.egress_credential_state(backend=backend) is None:
        messages.info(request, "There was no credential to remove.")
    elif request.method == "GET":
        return render(request, "console/keys/confirm.html", {
            "title": f"Remove the credential of {backend.name}?",
            "what": [f"Requests to {backend.name}'s API go without a credential from then on: calls its API "
                     "refuses fail until a credential is saved again.",
                     "The secret is not kept anywhere: to put it back, paste it again."],
            "action": "Remove credential",
            "back_url": reverse("console:backend-spec", kwargs={"tenant": tenant.slug, "backend_id": backend.pk}),
        })
    else:
        egress_credential_clear(backend=backend)
        messages.success(request, "Credential removed: requests to the backend now go without one.")
    return redirect("console:backend-spec", tenant=tenant.slug, backend_id=backend.pk)


urls = [
    path("backends/<int:backend_id>/spec/", backend_spec, name="backend-spec"),
    path("backends/<int:backend_id>/spec/history/", backend_spec_history, name="backend-spec-history"),
    path("backends/<int:backend_id>/spec/<int:number>/publish/", spec_version_publish_confirm,
         name="spec-version-publish"),
    path("backends/<int:backend_id>/spec/<int:number>/rollback/", spec_version_rollback_confirm,
         name="spec-version-rollback"),
    path("backends/<int:backend_id>/credential/", credential_set, name="credential-set"),
    path("backends/<int:backend_id>/credential/remove/", credential_remove, name="credential-remove"),
]
