"""Setting and clearing what a tenant's callers may do: the access policy of a virtual host, rate
limits, budgets, tool costs, and the interceptors that inspect what calls carry. Rate limits, budgets and tool costs are the tenant's *limits*: a
plan that does not let its tenants edit them (`Plan.limits_editable`) refuses every change here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.catalog.models import TenantSecret, VirtualHost
from apps.common.config_version import config_version_bump
from apps.common.validation_errors import problems_refuse
from apps.kernel.costs import UNITS_MAX, ToolCostSpec, tool_costs_check
from apps.kernel.interceptors import InterceptorSpec, interceptors_check
from apps.kernel.policy import PolicyError, RuleSpec, policy_check
from apps.kernel.problems import FieldProblem
from apps.policies.models import AccessPolicy, AccessRule, Budget, Interceptor, RateLimit, ToolCost
from apps.policies.selectors import access_rules_unmatched
from apps.tenants.models import Plan, Tenant


class UnmatchedTools(Exception):
    """`access_policy_set` was asked not to store rules that name no tool the host is known to
    have; `warnings` say which (`selectors.access_rules_unmatched`). Nothing was stored."""

    def __init__(self, warnings: Sequence[str]) -> None:
        super().__init__("; ".join(warnings))
        self.warnings = tuple(warnings)


@transaction.atomic
def access_policy_set(
    *, virtual_host: VirtualHost, default: str, rules: Sequence[RuleSpec], allow_unmatched: bool = True
) -> tuple[str, ...]:
    """Replace the host's policy with `default` and `rules` (in order). Every rule is checked first —
    its CEL condition compiled and type-checked, its globs, its subject found in the host's tenant —
    so a bad rule changes nothing. A rule that is new or names other tools than before and has a
    pattern naming no tool the host is known to have is a warning, not a refusal: stored and its
    warning returned, or, with `allow_unmatched=False` (the console and the API, until a person
    says to save anyway), UnmatchedTools is raised and nothing is stored."""
    try:
        policy_check(default, rules)
    except PolicyError as exc:
        raise ValidationError(str(exc)) from None
    tenant = virtual_host.tenant
    teams = set(tenant.teams.values_list("slug", flat=True))
    keys = set(tenant.api_keys.values_list("name", flat=True))
    for rule in rules:
        known = {"tenant": {tenant.slug}, "team": teams, "key": keys}[rule.subject_kind]
        if rule.subject_name not in known:
            raise ValidationError(f"rule {rule.id!r}: tenant {tenant.slug!r} has no {rule.subject_kind} {rule.subject_name!r}")
    warnings = tuple(access_rules_unmatched(virtual_host=virtual_host, rules=rules))
    if warnings and not allow_unmatched:
        raise UnmatchedTools(warnings)
    policy, _ = AccessPolicy.objects.update_or_create(virtual_host=virtual_host, defaults={"default_effect": default})
    policy.rules.all().delete()
    AccessRule.objects.bulk_create(
        AccessRule(
            policy=policy, rule_id=rule.id, position=position, subject_kind=rule.subject_kind,
            subject_name=rule.subject_name, effect=rule.effect, tools=list(rule.tools), condition=rule.condition,
        )
        for position, rule in enumerate(rules)
    )
    config_version_bump(tenant_id=tenant.pk)
    return warnings


def access_policy_clear(*, virtual_host: VirtualHost) -> None:
    """Remove the host's policy: every key of its tenant may see and call everything again."""
    AccessPolicy.objects.filter(virtual_host=virtual_host).delete()
    config_version_bump(tenant_id=virtual_host.tenant_id)


def limits_editable_check(*, tenant: Tenant) -> None:
    """Raise the ValidationError that names the plan when the tenant's plan forbids editing its
    limits. Read from the database, not from `tenant`, which may predate a plan change, with the
    tenant's row locked until the caller's transaction ends: a plan change cannot slip in between
    this check and the edit (`tenant_plan_set` waits for it)."""
    plan_id = Tenant.objects.select_for_update().filter(pk=tenant.pk).values_list("plan_id", flat=True).first()
    plan = Plan.objects.filter(pk=plan_id).first() if plan_id is not None else None
    if plan is not None and not plan.limits_editable:
        raise ValidationError(
            f"tenant {tenant.slug!r} is on plan {plan.name!r}, which does not allow editing its rate limits, "
            "budgets or tool costs; a platform admin can move it to another plan"
        )


def _subject_check(tenant: Tenant, scope: str, name: str, what: str) -> None:
    if scope not in RateLimit.Scope.values:
        raise ValidationError(f"{what} scope must be key or team, not {scope!r}")
    subjects = tenant.api_keys if scope == "key" else tenant.teams
    if not subjects.filter(**{"name" if scope == "key" else "slug": name}).exists():
        raise ValidationError(f"tenant {tenant.slug!r} has no {scope} {name!r}")


def rate_limit_check(*, limit: object, window_seconds: object) -> list[FieldProblem]:
    """What is wrong with a rate limit's numbers (empty: nothing): the rule every face applies, with
    the same words. Both are whole numbers a database integer column holds, from 1."""
    return [
        FieldProblem(field, f"{field} must be a whole number from 1 to {UNITS_MAX}")
        for field, value in (("limit", limit), ("window_seconds", window_seconds))
        # bool is an int subclass: `limit: true` would otherwise be read as 1.
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= UNITS_MAX
    ]


@transaction.atomic
def rate_limit_set(*, tenant: Tenant, scope: str, name: str, limit: int, window_seconds: int) -> RateLimit:
    """Limit a key (`scope="key"`, by name) or a team (by slug) of `tenant` to `limit` routed calls per
    `window_seconds`; replaces the subject's previous limit."""
    limits_editable_check(tenant=tenant)
    _subject_check(tenant, scope, name, "rate limit")
    problems_refuse(rate_limit_check(limit=limit, window_seconds=window_seconds))
    rate_limit, _ = RateLimit.objects.update_or_create(
        tenant=tenant, scope=scope, name=name, defaults={"limit": limit, "window_seconds": window_seconds}
    )
    config_version_bump(tenant_id=tenant.pk)
    return rate_limit


@transaction.atomic
def rate_limit_clear(*, tenant: Tenant, scope: str, name: str) -> None:
    limits_editable_check(tenant=tenant)
    RateLimit.objects.filter(tenant=tenant, scope=scope, name=name).delete()
    config_version_bump(tenant_id=tenant.pk)


def budget_check(*, daily: object, monthly: object) -> list[FieldProblem]:
    """What is wrong with a budget's caps (empty: nothing): the rule every face applies, with the
    same words. Each cap is a whole number of units from 0 (only free calls pass) up to
    `UNITS_MAX`, or None (no cap for that period); at least one is given, and a daily cap is not
    above the monthly one."""
    problems = [
        FieldProblem(period, f"{period} must be a whole number from 0 to {UNITS_MAX}, or empty")
        for period, cap in (("daily", daily), ("monthly", monthly))
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or not 0 <= cap <= UNITS_MAX)
    ]
    if daily is None and monthly is None:
        problems.append(FieldProblem("daily", "a budget needs a daily cap, a monthly cap or both"))
    elif not problems and daily is not None and monthly is not None and daily > monthly:
        problems.append(FieldProblem("daily", (
            f"the daily cap ({daily}) is above the monthly cap ({monthly}): no day could spend it; "
            "lower the daily cap or raise the monthly one")))
    return problems


@transaction.atomic
def budget_set(*, tenant: Tenant, scope: str, name: str, daily: int | None, monthly: int | None) -> Budget:
    """Let a key (`scope="key"`, by name) or a team (by slug) of `tenant` spend at most `daily` cost
    units per UTC day and `monthly` per UTC month (None: no cap for that period; at least one is
    needed); replaces the subject's previous budget. Units already spent this day and month count."""
    limits_editable_check(tenant=tenant)
    _subject_check(tenant, scope, name, "budget")
    problems_refuse(budget_check(daily=daily, monthly=monthly))
    budget, _ = Budget.objects.update_or_create(
        tenant=tenant, scope=scope, name=name, defaults={"daily": daily, "monthly": monthly}
    )
    config_version_bump(tenant_id=tenant.pk)
    return budget


@transaction.atomic
def budget_clear(*, tenant: Tenant, scope: str, name: str) -> None:
    """Remove the subject's budget: only the plan's caps, if any, still apply to it."""
    limits_editable_check(tenant=tenant)
    Budget.objects.filter(tenant=tenant, scope=scope, name=name).delete()
    config_version_bump(tenant_id=tenant.pk)


@transaction.atomic
def tool_costs_set(*, virtual_host: VirtualHost, costs: Sequence[ToolCostSpec]) -> list[ToolCost]:
    """Replace what calls of the host's tools cost (in order: the first entry naming a tool decides;
    a tool none names costs 1 unit). Every entry is checked first, so a bad one changes nothing."""
    limits_editable_check(tenant=virtual_host.tenant)
    try:
        tool_costs_check(costs)
    except PolicyError as exc:
        raise ValidationError(str(exc)) from None
    virtual_host.tool_costs.all().delete()
    created = ToolCost.objects.bulk_create(
        ToolCost(virtual_host=virtual_host, position=position, tools=list(spec.tools), cost=spec.cost)
        for position, spec in enumerate(costs)
    )
    config_version_bump(tenant_id=virtual_host.tenant_id)
    return created


@transaction.atomic
def tool_costs_clear(*, virtual_host: VirtualHost) -> None:
    """Every call on the host costs 1 unit again."""
    tool_costs_set(virtual_host=virtual_host, costs=[])


def interceptors_problems(*, virtual_host: VirtualHost, interceptors: Sequence[InterceptorSpec]) -> list[FieldProblem]:
    """What is wrong with `interceptors` as the host's chain (`kernel.interceptors.interceptors_check`,
    at `<position>.<field>`), and each webhook's signing secret that the tenant does not have."""
    problems = interceptors_check(interceptors)
    names = set(TenantSecret.objects.filter(tenant_id=virtual_host.tenant_id).values_list("name", flat=True))
    for number, spec in enumerate(interceptors, start=1):
        secret = spec.settings.get("secret") if isinstance(spec.settings, Mapping) else None
        if spec.kind == "webhook" and isinstance(secret, str) and secret and secret not in names:
            problems.append(FieldProblem(f"{number}.settings.secret", f"the tenant has no secret named {secret!r}"))
    return problems


@transaction.atomic
def interceptors_set(*, virtual_host: VirtualHost, interceptors: Sequence[InterceptorSpec]) -> list[Interceptor]:
    """Replace the host's interceptors, run in the order given from the next call on. Every one is
    checked first (`interceptors_problems`), so a bad one changes nothing."""
    problems_refuse(interceptors_problems(virtual_host=virtual_host, interceptors=interceptors))
    secrets = {s.name: s for s in TenantSecret.objects.filter(tenant_id=virtual_host.tenant_id)}
    virtual_host.interceptors.all().delete()
    created = Interceptor.objects.bulk_create(
        Interceptor(
            virtual_host=virtual_host, position=position, name=spec.name, kind=spec.kind, phases=list(spec.phases),
            methods=list(spec.methods), targets=list(spec.targets), enabled=spec.enabled,
            settings={key: value for key, value in spec.settings.items() if key != "secret"},
            secret=secrets[spec.settings["secret"]] if spec.kind == "webhook" else None,
        )
        for position, spec in enumerate(interceptors)
    )
    config_version_bump(tenant_id=virtual_host.tenant_id)
    return created
