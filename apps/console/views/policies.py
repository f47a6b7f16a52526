"""The console's access rules pages: each virtual host's policy (its default and ordered rules), an
editor for them, and the policy simulator.

The editor changes one rule at a time but stores the whole policy through `access_policy_set`,
which checks every rule before writing anything: a refused change leaves the stored policy as it
was, and the refusal is shown next to the rule it names. A rule whose tools name no tool the host
is known to have comes back with the warning and a "Save anyway" box to tick. Deleting a rule or
the policy asks first (GET: the question; POST: the act). Every form works as a plain POST with a
redirect; nothing needs JavaScript."""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.catalog.models import VirtualHost
from apps.console.access import console_view
from apps.console.paging import page_of
from apps.kernel.policy import CONDITION_MAX_LENGTH, EFFECTS, RuleSpec
from apps.policies import selectors
from apps.policies.services import UnmatchedTools, access_policy_clear, access_policy_set
from apps.tenants.models import ApiKey, Team, Tenant

_TOOLS_SPLIT = re.compile(r"[\s,]+")


class DefaultForm(forms.Form):
    default = forms.ChoiceField(label="Default decision", choices=[(e, e) for e in EFFECTS])


class RuleForm(forms.Form):
    """One rule. The subject is one choice among the tenant itself, its teams and its keys; the
    rest is checked by `access_policy_set` (ids, patterns, the CEL condition)."""

    rule_id = forms.CharField(label="Rule id", strip=False, help_text="Letters, digits, '_', '.' and '-'.",
                              widget=forms.TextInput(attrs={"maxlength": "64"}))
    subject = forms.ChoiceField(label="Who")
    effect = forms.ChoiceField(label="Effect", choices=[(e, e) for e in EFFECTS])
    tools = forms.CharField(
        label="Tools",
        help_text="Exposed or upstream names; globs (* ? [...]) allowed; separate them with commas or spaces.",
    )
    condition = forms.CharField(
        label="Condition (CEL, optional)", required=False, strip=False,
        widget=forms.Textarea(attrs={"rows": 2, "maxlength": str(CONDITION_MAX_LENGTH)}),
        help_text="Over arguments and principal (tenant, team, key, subject, scopes), e.g. arguments.a == 1",
    )
    # Shown only beside the warning that the tools name no known tool of the host (`unmatched`).
    allow_unmatched = forms.BooleanField(label="Save anyway", required=False)

    def __init__(self, *args: Any, tenant: Tenant, current: RuleSpec | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["subject"].choices = subject_choices(tenant, current)
        self.unmatched: tuple[str, ...] = ()  # the warnings of the last try to store it

    def spec(self) -> RuleSpec:
        data = self.cleaned_data
        kind, _, name = data["subject"].partition(":")
        tools = tuple(t for t in _TOOLS_SPLIT.split(data["tools"]) if t)
        return RuleSpec(data["rule_id"], kind, name, data["effect"], tools, data["condition"].strip())

    @staticmethod
    def initial_of(rule: RuleSpec) -> dict[str, str]:
        return {
            "rule_id": rule.id, "subject": f"{rule.subject_kind}:{rule.subject_name}", "effect": rule.effect,
            "tools": ", ".join(rule.tools), "condition": rule.condition,
        }


def subject_choices(tenant: Tenant, current: RuleSpec | None = None, *, whole_tenant: bool = True) -> list[Any]:
    """The tenant itself (unless not `whole_tenant`: limits are per key or team), its teams and its
    keys, grouped, as "<kind>:<name>" values. A rule's own subject is kept even when it no longer
    exists, so that its form shows it (and the service names the problem)."""
    teams = [(f"team:{slug}", slug) for slug in Team.objects.filter(tenant=tenant).order_by("slug")
             .values_list("slug", flat=True)]
    keys = [(f"key:{name}", name) for name in ApiKey.objects.filter(tenant=tenant).order_by("name")
            .values_list("name", flat=True)]
    choices: list[Any] = [("Tenant", [(f"tenant:{tenant.slug}", f"the whole tenant ({tenant.slug})")])]
    choices = [*(choices if whole_tenant else []), ("Teams", teams), ("Keys", keys)]
    if current is not None:
        value = f"{current.subject_kind}:{current.subject_name}"
        if all(value != v for _, group in choices for v, _ in group):
            choices.append(("No longer in the tenant", [(value, current.subject_name)]))
    return choices


class SimulateForm(forms.Form):
    """A call to simulate: who (a key of the tenant, or a JWT access token's subject, team and
    scopes), which tool, with which arguments (a JSON object)."""

    caller = forms.ChoiceField(
        label="Caller", choices=[("key", "An API key"), ("token", "A JWT access token")], initial="key",
        widget=forms.RadioSelect,
    )
    key = forms.ModelChoiceField(label="API key", queryset=ApiKey.objects.none(), required=False)
    subject = forms.CharField(label="Token subject", required=False, max_length=200)
    team = forms.ModelChoiceField(
        label="Token team", queryset=Team.objects.none(), required=False, to_field_name="slug",
        help_text="The tenant's team the token's claims name, if any.",
    )
    scopes = forms.CharField(label="Token scopes", required=False, max_length=1000, help_text="Separated by spaces.")
    tool = forms.CharField(label="Tool", max_length=200, help_text="As the virtual host exposes it.")
    arguments = forms.CharField(
        label="Arguments (JSON object)", required=False, initial="{}", widget=forms.Textarea(attrs={"rows": 4})
    )

    def __init__(self, *args: Any, tenant: Tenant, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["key"].queryset = ApiKey.objects.filter(tenant=tenant).order_by("name")
        self.fields["key"].label_from_instance = lambda key: key.name
        self.fields["team"].queryset = Team.objects.filter(tenant=tenant).order_by("slug")

    def clean_arguments(self) -> dict[str, Any]:
        raw = self.cleaned_data["arguments"].strip() or "{}"
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise ValidationError(f"Not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValidationError('Give a JSON object, e.g. {"a": 1}.')
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("caller") == "key" and not data.get("key") and "key" not in self.errors:
            self.add_error("key", "Choose the key that calls.")
        if data.get("caller") == "token" and not data.get("subject"):
            self.add_error("subject", "Give the token's subject.")
        return data

    def simulate(self, virtual_host: VirtualHost) -> selectors.Simulation:
        data = self.cleaned_data
        token = None
        if data["caller"] == "token":
            team = data["team"].slug if data["team"] else None
            token = selectors.SimulatedToken(data["subject"], team, tuple(data["scopes"].split()))
        return selectors.access_decision_simulate(
            virtual_host=virtual_host, key=data["key"] if token is None else None, token=token,
            tool=data["tool"], arguments=data["arguments"],
        )


def _host_or_404(tenant: Tenant, virtual_host_id: int) -> VirtualHost:
    host = selectors.policy_virtual_host_get(tenant=tenant, virtual_host_id=virtual_host_id)
    if host is None:
        raise Http404(f"no virtual host with id {virtual_host_id}")
    return host


def _errors_by_rule(error: ValidationError, rules: list[RuleSpec]) -> tuple[dict[str, list[str]], list[str]]:
    """The service's messages, those naming a rule (`rule 'x': …`) keyed by its id, and the rest."""
    by_rule: dict[str, list[str]] = {}
    rest: list[str] = []
    for message in error.messages:
        named = next((rule.id for rule in rules if message.startswith(f"rule {rule.id!r}")), None)
        (by_rule.setdefault(named, []) if named is not None else rest).append(message)
    return by_rule, rest


def _access_page(
    request: HttpRequest, tenant: Tenant, host: VirtualHost, *, status: int = 200, **extra: Any
) -> HttpResponse:
    default, rules = selectors.access_rules_of(virtual_host=host)
    editing = extra.pop("editing", None)
    edit_form = extra.pop("edit_form", None)
    if editing is None and request.method == "GET":
        editing = request.GET.get("edit")
    rows = []
    for position, rule in enumerate(rules, start=1):
        form = None
        if rule.id == editing:
            form = edit_form or RuleForm(tenant=tenant, current=rule, initial=RuleForm.initial_of(rule), prefix="edit")
        rows.append({"position": position, "rule": rule, "form": form,
                     "errors": extra.get("rule_errors", {}).get(rule.id, [])})
    context = {
        "host": host,
        "default": default,
        "rows": rows,
        "default_form": extra.pop("default_form", None) or DefaultForm(initial={"default": default or "allow"}),
        "add_form": extra.pop("add_form", None) or RuleForm(tenant=tenant, prefix="new"),
        "simulate_form": extra.pop("simulate_form", None) or SimulateForm(tenant=tenant, prefix="sim"),
        **extra,
    }
    return render(request, "console/policies/access_detail.html", context, status=status)


def _store(
    request: HttpRequest, tenant: Tenant, host: VirtualHost, default: str, rules: list[RuleSpec], done: str,
    *, allow_unmatched: bool = True, **page: Any,
) -> HttpResponse:
    """Store the whole policy; PRG with `done` (and any warning) when the service takes it, else
    the page with the refusal next to the rule it names, or the warning and "Save anyway" in the
    rule's form (400)."""
    try:
        warnings = access_policy_set(virtual_host=host, default=default, rules=rules, allow_unmatched=allow_unmatched)
    except UnmatchedTools as exc:
        form = page.get("edit_form") or page.get("add_form")
        if form is None:  # only the rule forms ask for the question; the rest store what was there
            raise
        form.unmatched = exc.warnings
        page.pop("submitted", None)
        return _access_page(request, tenant, host, status=400, **page)
    except ValidationError as exc:
        by_rule, rest = _errors_by_rule(exc, rules)
        form = page.get("edit_form") or page.get("add_form")
        submitted = page.pop("submitted", None)
        if form is not None:
            for message in by_rule.pop(submitted, []) if submitted else []:
                form.add_error(None, message)
            for message in rest:
                form.add_error(None, message)
            rest = []
        return _access_page(request, tenant, _host_or_404(tenant, host.pk), status=400, rule_errors=by_rule,
                            policy_errors=rest, **page)
    messages.success(request, done)
    for warning in warnings:
        messages.warning(request, f"Warning: {warning}")
    return redirect("console:access-detail", tenant=tenant.slug, virtual_host_id=host.pk)


@require_GET
@console_view()
def access_list(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    page_obj = page_of(request, selectors.policy_virtual_host_list(tenant=tenant))
    return render(request, "console/policies/access_list.html", {"page_obj": page_obj})


@require_GET
@console_view()
def access_detail(request: HttpRequest, tenant: Tenant, virtual_host_id: int) -> HttpResponse:
    """The host's rules and the simulator. With `?sim-tool=…` (the simulator's GET form) it shows
    what the gateway would do with that call; a form with errors answers 400."""
    host = _host_or_404(tenant, virtual_host_id)
    if "sim-tool" not in request.GET:
        return _access_page(request, tenant, host)
    form = SimulateForm(request.GET, tenant=tenant, prefix="sim")
    if not form.is_valid():
        return _access_page(request, tenant, host, status=400, simulate_form=form)
    simulation = form.simulate(host)
    _, rules = selectors.access_rules_of(virtual_host=host)
    decided = simulation.rule or simulation.hidden_by
    position = next((i for i, rule in enumerate(rules, start=1) if rule.id == decided), None)
    result = {"simulation": simulation, "rule_id": decided, "position": position,
              "rule": rules[position - 1] if position else None}
    return _access_page(request, tenant, host, simulate_form=form, result=result)


@require_POST
@console_view()
def access_default_set(request: HttpRequest, tenant: Tenant, virtual_host_id: int) -> HttpResponse:
    host = _host_or_404(tenant, virtual_host_id)
    form = DefaultForm(request.POST)
    if not form.is_valid():
        return _access_page(request, tenant, host, status=400, default_form=form)
    _, rules = selectors.access_rules_of(virtual_host=host)
    default = form.cleaned_data["default"]
    return _store(request, tenant, host, default, rules, f"The default decision is now {default}.",
                  default_form=form)


@require_POST
@console_view()
def access_rule_add(request: HttpRequest, tenant: Tenant, virtual_host_id: int) -> HttpResponse:
    host = _host_or_404(tenant, virtual_host_id)
    form = RuleForm(request.POST, tenant=tenant, prefix="new")
    if not form.is_valid():
        return _access_page(request, tenant, host, status=400, add_form=form)
    default, rules = selectors.access_rules_of(virtual_host=host)
    rule = form.spec()
    return _store(request, tenant, host, default or "allow", [*rules, rule], f"Rule {rule.id} added.",
                  allow_unmatched=form.cleaned_data["allow_unmatched"], add_form=form, submitted=rule.id)


def _rule_index(rules: list[RuleSpec], rule_id: str) -> int:
    index = next((i for i, rule in enumerate(rules) if rule.id == rule_id), None)
    if index is None:
        raise Http404(f"no rule {rule_id!r}")
    return index


@require_POST
@console_view()
def access_rule_edit(request: HttpRequest, tenant: Tenant, virtual_host_id: int, rule_id: str) -> HttpResponse:
    host = _host_or_404(tenant, virtual_host_id)
    default, rules = selectors.access_rules_of(virtual_host=host)
    index = _rule_index(rules, rule_id)
    form = RuleForm(request.POST, tenant=tenant, current=rules[index], prefix="edit")
    if not form.is_valid():
        return _access_page(request, tenant, host, status=400, editing=rule_id, edit_form=form)
    rule = form.spec()
    changed = [*rules[:index], rule, *rules[index + 1:]]
    return _store(request, tenant, host, default or "allow", changed, f"Rule {rule.id} saved.",
                  allow_unmatched=form.cleaned_data["allow_unmatched"], editing=rule_id, edit_form=form,
                  submitted=rule.id)


@require_http_methods(["GET", "POST"])
@console_view(manage=True)
def access_rule_delete(request: HttpRequest, tenant: Tenant, virtual_host_id: int, rule_id: str) -> HttpResponse:
    """GET asks for confirmation; POST deletes the rule."""
    host = _host_or_404(tenant, virtual_host_id)
    default, rules = selectors.access_rules_of(virtual_host=host)
    index = _rule_index(rules, rule_id)
    if request.method == "POST":
        return _store(request, tenant, host, default or "allow", rules[:index] + rules[index + 1:],
                      f"Rule {rule_id} deleted.")
    rule = rules[index]
    then = ("calls it denies may then be allowed" if rule.effect == "deny"
            else f"calls it allows are then decided by the other rules and the default ({default})")
    condition = f" when {rule.condition}" if rule.condition else ""
    return render(request, "console/keys/confirm.html", {
        "title": f"Delete rule {rule.id}?",
        "what": [f"Rule {index + 1} of {host.slug}, {rule.effect} {rule.subject_kind} {rule.subject_name} "
                 f"for {', '.join(rule.tools)}{condition}, is deleted.", f"From the next call on, {then}."],
        "action": "Delete rule",
        "back_url": reverse("console:access-detail", kwargs={"tenant": tenant.slug, "virtual_host_id": host.pk}),
    })


@require_POST
@console_view()
def access_rule_move(request: HttpRequest, tenant: Tenant, virtual_host_id: int, rule_id: str) -> HttpResponse:
    """Swap the rule with the one above (`direction=up`) or below (`down`); at either end, nothing moves."""
    host = _host_or_404(tenant, virtual_host_id)
    default, rules = selectors.access_rules_of(virtual_host=host)
    index = _rule_index(rules, rule_id)
    other = index - 1 if request.POST.get("direction") == "up" else index + 1
    if not 0 <= other < len(rules):
        return redirect("console:access-detail", tenant=tenant.slug, virtual_host_id=host.pk)
    rules[index], rules[other] = rules[other], rules[index]
    return _store(request, tenant, host, default or "allow", rules, f"Rule {rule_id} moved to position {other + 1}.")


@require_http_methods(["GET", "POST"])
@console_view(manage=True)
def access_policy_remove(request: HttpRequest, tenant: Tenant, virtual_host_id: int) -> HttpResponse:
    """GET asks for confirmation; POST removes the host's policy."""
    host = _host_or_404(tenant, virtual_host_id)
    back = reverse("console:access-detail", kwargs={"tenant": tenant.slug, "virtual_host_id": host.pk})
    if request.method == "POST":
        access_policy_clear(virtual_host=host)
        messages.success(request, "Policy removed: every key of the tenant may see and call every tool of the host.")
        return redirect(back)
    default, rules = selectors.access_rules_of(virtual_host=host)
    if default is None:
        return redirect(back)
    return render(request, "console/keys/confirm.html", {
        "title": f"Remove the access policy of {host.slug}?",
        "what": [f"Its default ({default}) and its {len(rules)} rule{'s' if len(rules) != 1 else ''} are deleted.",
                 "From the next call on, every key of the tenant may see and call every tool of the host."],
        "action": "Remove the policy",
        "back_url": back,
    })


urls = [
    path("access/", access_list, name="access-list"),
    path("access/<int:virtual_host_id>/", access_detail, name="access-detail"),
    path("access/<int:virtual_host_id>/default/", access_default_set, name="access-default"),
    path("access/<int:virtual_host_id>/rules/", access_rule_add, name="access-rule-add"),
    path("access/<int:virtual_host_id>/rules/<str:rule_id>/", access_rule_edit, name="access-rule-edit"),
    path("access/<int:virtual_host_id>/rules/<str:rule_id>/delete/", access_rule_delete, name="access-rule-delete"),
    path("access/<int:virtual_host_id>/rules/<str:rule_id>/move/", access_rule_move, name="access-rule-move"),
    path("access/<int:virtual_host_id>/remove/", access_policy_remove, name="access-remove"),
]
