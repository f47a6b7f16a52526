"""The platform pages (platform admins only): tenants and the plans they are on."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods

from apps.console.access import console_view
from apps.console.paging import page_of
from apps.console.refusals import refusal_show
from apps.tenants import selectors
from apps.tenants.models import Plan, Tenant
from apps.tenants.services import (
    plan_delete,
    plan_set,
    tenant_create,
    tenant_delete,
    tenant_plan_set,
    tenant_private_networks_set,
    tenant_update,
)
from apps.tenants.validators import PLAN_CAP_MAX, SLUG_MAX_LENGTH, TENANT_NAME_MAX_LENGTH


# Lengths and ranges are the services' (`apps.tenants.validators`): the forms read text and numbers,
# the browser is told the limits.
def _text_field(label: str, max_length: int, **options: object) -> forms.CharField:
    return forms.CharField(label=label, strip=False, widget=forms.TextInput(attrs={"maxlength": str(max_length)}),
                           **options)  # type: ignore[arg-type]


def _cap_field(label: str, help_text: str) -> forms.IntegerField:
    return forms.IntegerField(label=label, required=False, help_text=help_text,
                              widget=forms.NumberInput(attrs={"min": "0", "max": str(PLAN_CAP_MAX)}))


def _private_networks_field() -> forms.TypedChoiceField:
    default = "allowed" if settings.GATEWAY_ALLOW_PRIVATE_NETWORKS else "refused"
    return forms.TypedChoiceField(
        label="Private networks", required=False, empty_value=None,
        choices=[("", f"Deployment default ({default})"), ("true", "Allowed"), ("false", "Refused")],
        coerce=lambda value: value == "true",
        help_text="Whether backends, token endpoints and key sets may be at private addresses (loopback, 10/8, "
        "192.168/16, ...). Link-local and cloud metadata addresses are always refused.",
    )


class TenantEditForm(forms.Form):
    name = _text_field("Name", TENANT_NAME_MAX_LENGTH)
    plan = forms.ModelChoiceField(label="Plan", queryset=Plan.objects.order_by("name"), required=False,
                                  empty_label="(no plan: no caps)")
    audit_arguments = forms.ChoiceField(label="Audit arguments", choices=Tenant.AuditArguments.choices,
                                        help_text="What audit rows keep of call arguments.")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["allow_private_networks"] = _private_networks_field()


class TenantCreateForm(forms.Form):
    slug = _text_field("Slug", SLUG_MAX_LENGTH, help_text="In URLs: lowercase letters, digits, inner hyphens.")
    name = _text_field("Name", TENANT_NAME_MAX_LENGTH)
    plan = forms.ModelChoiceField(label="Plan", queryset=Plan.objects.order_by("name"), required=False,
                                  empty_label="(no plan: no caps)")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["allow_private_networks"] = _private_networks_field()


class PlanForm(forms.Form):
    name = _text_field("Name", SLUG_MAX_LENGTH, help_text="Lowercase letters, digits, inner hyphens.")
    daily = _cap_field("Units per UTC day", "Empty: no daily cap.")
    monthly = _cap_field("Units per UTC month", "Empty: no monthly cap.")
    limits_editable = forms.BooleanField(label="Tenants may edit their limits", required=False, initial=True,
                                         help_text="Rate limits, budgets and tool costs.")


def _tenant_or_404(slug: str) -> Tenant:
    tenant = selectors.tenant_get(slug=slug)
    if tenant is None:
        raise Http404(f"no tenant {slug!r}")
    return tenant


def _plan_or_404(name: str) -> Plan:
    plan = selectors.plan_get(name=name)
    if plan is None:
        raise Http404(f"no plan {name!r}")
    return plan


def _form_page(request: HttpRequest, form: forms.Form, **context: object) -> HttpResponse:
    return render(request, "console/tenants/form.html", {"form": form, **context}, status=400 if form.errors else 200)


@require_GET
@console_view(platform=True)
def tenant_list(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()
    tenants = selectors.tenant_search(access=request.access, query=query)  # type: ignore[attr-defined]
    return render(request, "console/tenants/tenant_list.html", {"page_obj": page_of(request, tenants), "query": query})


@require_http_methods(["GET", "POST"])
@console_view(platform=True)
def tenant_create_view(request: HttpRequest) -> HttpResponse:
    form = TenantCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            tenant = tenant_create(**form.cleaned_data)
        except ValidationError as exc:
            refusal_show(form, exc)
        else:
            messages.success(request, f"Tenant {tenant.slug} created.")
            return redirect("console:tenant-list")
    return _form_page(request, form, title="New tenant", submit="Create tenant",
                      back_url=reverse("console:tenant-list"))


@require_http_methods(["GET", "POST"])
@console_view(platform=True)
def tenant_edit(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = _tenant_or_404(slug)
    private = tenant.allow_private_networks
    initial = {"name": tenant.name, "plan": tenant.plan_id, "audit_arguments": tenant.audit_arguments,
               "allow_private_networks": "" if private is None else str(private).lower()}
    form = TenantEditForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            with transaction.atomic():
                tenant_update(tenant=tenant, name=data["name"], audit_arguments=data["audit_arguments"])
                tenant_plan_set(tenant=tenant, plan=data["plan"])
                tenant_private_networks_set(tenant=tenant, allowed=data["allow_private_networks"])
        except ValidationError as exc:
            refusal_show(form, exc)
        else:
            messages.success(request, f"Tenant {tenant.slug} saved.")
            return redirect("console:tenant-list")
    return _form_page(request, form, title=f"Tenant {tenant.slug}", submit="Save",
                      back_url=reverse("console:tenant-list"),
                      delete_url=reverse("console:tenant-delete", kwargs={"slug": tenant.slug}))


@require_http_methods(["GET", "POST"])
@console_view(platform=True)
def tenant_delete_view(request: HttpRequest, slug: str) -> HttpResponse:
    """GET names everything the deletion takes with it; POST deletes."""
    tenant = _tenant_or_404(slug)
    if request.method == "POST":
        tenant_delete(tenant=tenant)
        messages.success(request, f"Tenant {slug} deleted.")
        return redirect("console:tenant-list")
    contents = selectors.tenant_contents(tenant=tenant)
    return render(request, "console/keys/confirm.html", {
        "title": f"Delete tenant {tenant.slug}?",
        "what": [f"The tenant {tenant.slug} ({tenant.name}) is deleted for good, with everything it owns:",
                 *(f"{what}: {count}" for what, count in contents.items()),
                 "and its policies, limits, budgets, secrets and tool catalog. Its agents get 404 at once."],
        "action": "Delete tenant",
        "back_url": reverse("console:tenant-list"),
    })


@require_GET
@console_view(platform=True)
def plan_list(request: HttpRequest) -> HttpResponse:
    return render(request, "console/tenants/plan_list.html",
                  {"page_obj": page_of(request, selectors.plan_list_with_usage())})


@require_http_methods(["GET", "POST"])
@console_view(platform=True)
def plan_edit(request: HttpRequest, name: str | None = None) -> HttpResponse:
    """Create a plan (no `name` in the URL) or change one; a plan's name is fixed once created."""
    plan = _plan_or_404(name) if name is not None else None
    initial = ({"name": plan.name, "daily": plan.daily, "monthly": plan.monthly,
                "limits_editable": plan.limits_editable} if plan else None)
    form = PlanForm(request.POST or None, initial=initial)
    if plan is not None:
        form.fields["name"].disabled = True
    if request.method == "POST" and form.is_valid():
        if plan is None and selectors.plan_get(name=form.cleaned_data["name"]) is not None:
            form.add_error("name", "A plan with this name exists: edit it instead.")
        else:
            try:
                saved = plan_set(**form.cleaned_data)
            except ValidationError as exc:
                refusal_show(form, exc)
            else:
                messages.success(request, f"Plan {saved.name} saved.")
                return redirect("console:plan-list")
    return _form_page(request, form, title=f"Plan {plan.name}" if plan else "New plan",
                      submit="Save" if plan else "Create plan", back_url=reverse("console:plan-list"),
                      delete_url=reverse("console:plan-delete", kwargs={"name": plan.name}) if plan else None)


@require_http_methods(["GET", "POST"])
@console_view(platform=True)
def plan_delete_view(request: HttpRequest, name: str) -> HttpResponse:
    plan = _plan_or_404(name)
    if request.method == "POST":
        try:
            plan_delete(plan=plan)
        except ValidationError as exc:
            messages.error(request, f"Plan {plan.name} was not deleted: {'; '.join(exc.messages)}.")
        else:
            messages.success(request, f"Plan {plan.name} deleted.")
        return redirect("console:plan-list")
    return render(request, "console/keys/confirm.html", {
        "title": f"Delete plan {plan.name}?",
        "what": [f"The plan {plan.name} is deleted. A plan that tenants are on cannot be: move them first."],
        "action": "Delete plan",
        "back_url": reverse("console:plan-list"),
    })


platform_urls = [
    path("tenants/", tenant_list, name="tenant-list"),
    path("tenants/new/", tenant_create_view, name="tenant-create"),
    path("tenants/<slug:slug>/", tenant_edit, name="tenant-edit"),
    path("tenants/<slug:slug>/delete/", tenant_delete_view, name="tenant-delete"),
    path("plans/", plan_list, name="plan-list"),
    path("plans/new/", plan_edit, name="plan-create"),
    path("plans/<slug:name>/", plan_edit, name="plan-edit"),
    path("plans/<slug:name>/delete/", plan_delete_view, name="plan-delete"),
]
