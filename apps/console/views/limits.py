"""The console's limits pages: rate limits and budgets (each with the value in force and what has
been used, read from the gateway limiter's Redis counters) and each virtual host's tool costs.

A plan may forbid its tenants to edit their limits: the services refuse every change then
(`limits_editable_check`), and the pages show their message. Removing a rate limit, a budget or
tool costs asks first."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods

from apps.catalog.models import VirtualHost
from apps.console.access import console_view
from apps.console.paging import page_of
from apps.console.refusals import refusal_show
from apps.console.views.policies import subject_choices
from apps.kernel.costs import UNITS_MAX, ToolCostSpec
from apps.policies import selectors
from apps.policies.services import budget_clear, budget_set, rate_limit_clear, rate_limit_set, tool_costs_set
from apps.tenants.models import Tenant


class SubjectForm(forms.Form):
    subject = forms.ChoiceField(label="For", help_text="A team's limit is a ceiling over all its keys together.")

    def __init__(self, *args: Any, tenant: Tenant, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["subject"].choices = subject_choices(tenant, whole_tenant=False)

    def scope_name(self) -> tuple[str, str]:
        scope, _, name = self.cleaned_data["subject"].partition(":")
        return scope, name


class RateLimitForm(SubjectForm):
    # The range is the service's (`rate_limit_check`); the browser is told it.
    limit = forms.IntegerField(label="Calls", widget=forms.NumberInput(attrs={"min": "1", "max": str(UNITS_MAX)}))
    window_seconds = forms.IntegerField(label="Per seconds",
                                        widget=forms.NumberInput(attrs={"min": "1", "max": str(UNITS_MAX)}))


class BudgetForm(SubjectForm):
    # The range is the service's (`budget_check`); the browser is told it.
    daily = forms.IntegerField(label="Units per UTC day", required=False,
                               widget=forms.NumberInput(attrs={"min": "0", "max": str(UNITS_MAX)}))
    monthly = forms.IntegerField(label="Units per UTC month", required=False,
                                 widget=forms.NumberInput(attrs={"min": "0", "max": str(UNITS_MAX)}))


class ToolCostForm(forms.Form):
    # What tools and costs may be is the service's (`tool_cost_check`); the browser is told the range.
    tools = forms.CharField(label="Tools", help_text="Names or globs, separated by commas or spaces.")
    cost = forms.IntegerField(label="Cost (units)", widget=forms.NumberInput(attrs={"min": "0", "max": str(UNITS_MAX)}))


ToolCostFormSet = forms.formset_factory(ToolCostForm, extra=1, can_delete=True, can_order=True, max_num=200,
                                        validate_max=True)


def _limits_page(request: HttpRequest, tenant: Tenant, *, form: RateLimitForm | None = None,
                 status: int = 200) -> HttpResponse:
    page_obj = page_of(request, selectors.rate_limit_list(tenant=tenant))
    usage = selectors.rate_limit_usage(limits=list(page_obj.object_list))
    rows = [{"limit": row, "usage": usage[row.pk]} for row in page_obj.object_list]
    context = {"page_obj": page_obj, "rows": rows, "form": form or RateLimitForm(tenant=tenant),
               "tenant_plan": tenant.plan}
    return render(request, "console/policies/limit_list.html", context, status=status)


@require_http_methods(["GET", "POST"])
@console_view()
def rate_limit_list(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """The tenant's rate limits with their use now; POST sets one (replacing the subject's)."""
    if request.method == "GET":
        return _limits_page(request, tenant)
    form = RateLimitForm(request.POST, tenant=tenant)
    if form.is_valid():
        scope, name = form.scope_name()
        try:
            rate_limit_set(tenant=tenant, scope=scope, name=name, limit=form.cleaned_data["limit"],
                           window_seconds=form.cleaned_data["window_seconds"])
        except ValidationError as exc:
            refusal_show(form, exc)
        else:
            messages.success(request, f"Rate limit for {scope} {name} saved.")
            return redirect("console:limit-list", tenant=tenant.slug)
    return _limits_page(request, tenant, form=form, status=400)


@require_http_methods(["GET", "POST"])
@console_view(manage=True)
def rate_limit_remove(request: HttpRequest, tenant: Tenant, scope: str, name: str) -> HttpResponse:
    """GET asks for confirmation; POST removes the subject's rate limit."""
    if request.method == "POST":
        try:
            rate_limit_clear(tenant=tenant, scope=scope, name=name)
        except ValidationError as exc:
            messages.error(request, "; ".join(exc.messages))
        else:
            messages.success(request, f"Rate limit for {scope} {name} removed.")
        return redirect("console:limit-list", tenant=tenant.slug)
    row = selectors.rate_limit_list(tenant=tenant).filter(scope=scope, name=name).first()
    if row is None:
        raise Http404(f"no rate limit for {scope} {name!r}")
    team = " (and its team's, if it has one)" if scope == "key" else ""
    return render(request, "console/keys/confirm.html", {
        "title": f"Remove the rate limit of {scope} {name}?",
        "what": [f"The limit of {row.limit} calls per {row.window_seconds} s for {scope} {name} is removed.",
                 f"From the next call on, its calls are limited only by the tenant's other limits{team}."],
        "action": "Remove rate limit",
        "back_url": reverse("console:limit-list", kwargs={"tenant": tenant.slug}),
    })


def _budgets_page(request: HttpRequest, tenant: Tenant, *, form: BudgetForm | None = None,
                  status: int = 200) -> HttpResponse:
    page_obj = page_of(request, selectors.budget_list(tenant=tenant))
    effective = selectors.budgets_effective(tenant=tenant)
    subjects = [(row.scope, row.name) for row in page_obj.object_list]
    usage = selectors.budget_usage(tenant=tenant, subjects=subjects)
    rows = [{"budget": row, "effective": effective.of(row.scope, row.name), "usage": usage[(row.scope, row.name)]}
            for row in page_obj.object_list]
    context = {"page_obj": page_obj, "rows": rows, "form": form or BudgetForm(tenant=tenant),
               "tenant_plan": tenant.plan}
    return render(request, "console/policies/budget_list.html", context, status=status)


@require_http_methods(["GET", "POST"])
@console_view()
def budget_list(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """The tenant's budgets: as set, as in force after the plan's caps, and spent so far; POST sets one."""
    if request.method == "GET":
        return _budgets_page(request, tenant)
    form = BudgetForm(request.POST, tenant=tenant)
    if form.is_valid():
        scope, name = form.scope_name()
        try:
            budget_set(tenant=tenant, scope=scope, name=name, daily=form.cleaned_data["daily"],
                       monthly=form.cleaned_data["monthly"])
        except ValidationError as exc:
            refusal_show(form, exc)
        else:
            messages.success(request, f"Budget for {scope} {name} saved.")
            return redirect("console:budget-list", tenant=tenant.slug)
    return _budgets_page(request, tenant, form=form, status=400)


@require_http_methods(["GET", "POST"])
@console_view(manage=True)
def budget_remove(request: HttpRequest, tenant: Tenant, scope: str, name: str) -> HttpResponse:
    """GET asks for confirmation; POST removes the subject's budget."""
    if request.method == "POST":
        try:
            budget_clear(tenant=tenant, scope=scope, name=name)
        except ValidationError as exc:
            messages.error(request, "; ".join(exc.messages))
        else:
            messages.success(request, f"Budget for {scope} {name} removed.")
        return redirect("console:budget-list", tenant=tenant.slug)
    row = selectors.budget_list(tenant=tenant).filter(scope=scope, name=name).first()
    if row is None:
        raise Http404(f"no budget for {scope} {name!r}")
    caps = " and ".join(f"{cap} units per {period}" for cap, period in ((row.daily, "UTC day"),
                                                                         (row.monthly, "UTC month")) if cap is not None)
    return render(request, "console/keys/confirm.html", {
        "title": f"Remove the budget of {scope} {name}?",
        "what": [f"The budget of {caps} for {scope} {name} is removed; what it spent stays counted.",
                 "From the next call on, only the plan's caps, if any, still cap its spending."],
        "action": "Remove budget",
        "back_url": reverse("console:budget-list", kwargs={"tenant": tenant.slug}),
    })


@require_GET
@console_view()
def tool_cost_hosts(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    page_obj = page_of(request, selectors.policy_virtual_host_list(tenant=tenant))
    return render(request, "console/policies/tool_cost_hosts.html", {"page_obj": page_obj})


def _host_or_404(tenant: Tenant, virtual_host_id: int) -> VirtualHost:
    host = selectors.policy_virtual_host_get(tenant=tenant, virtual_host_id=virtual_host_id)
    if host is None:
        raise Http404(f"no virtual host with id {virtual_host_id}")
    return host


@require_http_methods(["GET", "POST"])
@console_view()
def tool_costs_edit(request: HttpRequest, tenant: Tenant, virtual_host_id: int) -> HttpResponse:
    """The host's tool costs as one form of rows (order, tools, cost, delete; one empty row to add
    one); POST replaces the whole list through `tool_costs_set`."""
    host = _host_or_404(tenant, virtual_host_id)
    if request.method == "POST":
        formset = ToolCostFormSet(request.POST, prefix="costs")
        if formset.is_valid():
            specs = [
                ToolCostSpec(tuple(t for t in form.cleaned_data["tools"].replace(",", " ").split()),
                             form.cleaned_data["cost"])
                for form in formset.ordered_forms
                if form.has_changed() and not form.cleaned_data.get("DELETE")
            ]
            stored = formset.initial_form_count()  # the rows that were entries when the page was shown
            removed = [form.cleaned_data for number, form in enumerate(formset.forms)
                       if number < stored and form in formset.deleted_forms and form.cleaned_data.get("tools")]
            if removed and request.POST.get("confirmed") != "yes":
                return _tool_costs_confirm(request, tenant, host, removed)
            try:
                tool_costs_set(virtual_host=host, costs=specs)
            except ValidationError as exc:
                errors = exc.messages
            else:
                messages.success(request, f"Tool costs of {host.slug} saved ({len(specs)} entries).")
                return redirect("console:tool-costs", tenant=tenant.slug, virtual_host_id=host.pk)
        else:
            errors = []
        status = 400
    else:
        initial = [{"tools": ", ".join(spec.tools), "cost": spec.cost, "ORDER": i}
                   for i, spec in enumerate(selectors.tool_costs_of(virtual_host=host), start=1)]
        formset = ToolCostFormSet(initial=initial, prefix="costs")
        errors, status = [], 200
    context = {"host": host, "formset": formset, "errors": errors, "tenant_plan": tenant.plan}
    return render(request, "console/policies/tool_costs.html", context, status=status)


def _tool_costs_confirm(request: HttpRequest, tenant: Tenant, host: VirtualHost,
                        removed: list[dict[str, Any]]) -> HttpResponse:
    """The question before tool costs are deleted: the same form again, with `confirmed=yes`."""
    kept = [(name, value) for name, values in request.POST.lists() if name != "csrfmiddlewaretoken"
            for value in values]
    return render(request, "console/keys/confirm.html", {
        "title": f"Delete {len(removed)} tool cost entr{'ies' if len(removed) != 1 else 'y'} of {host.slug}?",
        "what": [*(f"{entry['tools']}: {entry['cost']} unit{'s' if entry['cost'] != 1 else ''} per call"
                   for entry in removed),
                 "From the next call on, the tools they named cost what a later entry says, or 1 unit."],
        "action": "Delete and save",
        "back_url": reverse("console:tool-costs", kwargs={"tenant": tenant.slug, "virtual_host_id": host.pk}),
        "fields": kept,
    })


urls = [
    path("limits/", rate_limit_list, name="limit-list"),
    path("limits/rate/<str:scope>/<str:name>/remove/", rate_limit_remove, name="limit-remove"),
    path("limits/budgets/", budget_list, name="budget-list"),
    path("limits/budgets/<str:scope>/<str:name>/remove/", budget_remove, name="budget-remove"),
    path("limits/costs/", tool_cost_hosts, name="tool-cost-hosts"),
    path("limits/costs/<int:virtual_host_id>/", tool_costs_edit, name="tool-costs"),
]
