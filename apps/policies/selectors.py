"""Read-side of access policies and limits: the compiled policy and tool costs of a virtual host, the
effective budgets of a tenant, and the policy simulator."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apps.catalog.models import VirtualHost
from apps.gateway.pipeline.costs import ToolCosts, ToolCostSpec, call_cost, tool_costs_compile
from apps.gateway.pipeline.names import Naming
from apps.gateway.pipeline.policy import Policy, PolicyError, RuleSpec, policy_compile
from apps.gateway.pipeline.values import Budget, Principal
from apps.policies.models import AccessPolicy
from apps.policies.models import Budget as StoredBudget
from apps.tenants.models import ApiKey, Tenant

log = logging.getLogger(__name__)


def access_policy_compiled(*, virtual_host: VirtualHost) -> Policy | None:
    """The host's access policy, compiled (rules prefetched as `access_policy__rules` are used);
    None when it has none. Rules are checked when set, so one that no longer compiles (a CEL library
    upgrade) is a bug: the host then denies everything rather than open up."""
    try:
        stored = virtual_host.access_policy
    except AccessPolicy.DoesNotExist:
        return None
    specs = [
        RuleSpec(rule.rule_id, rule.subject_kind, rule.subject_name, rule.effect, tuple(rule.tools), rule.condition)
        for rule in stored.rules.all()
    ]
    try:
        return policy_compile(stored.default_effect, specs)
    except PolicyError as exc:
        log.error("virtual host %s: access policy does not compile, denying every call: %s", virtual_host, exc)
        return policy_compile("deny", [])


def tool_costs_compiled(*, virtual_host: VirtualHost) -> ToolCosts | None:
    """The host's tool costs, compiled (entries prefetched as `tool_costs` are used); None when it
    has none. Entries are checked when set, so one that no longer compiles is a bug: the host then
    charges the default cost for every call rather than refuse them."""
    specs = [ToolCostSpec(tuple(entry.tools), entry.cost) for entry in virtual_host.tool_costs.all()]
    if not specs:
        return None
    try:
        return tool_costs_compile(specs)
    except PolicyError as exc:
        log.error("virtual host %s: tool costs do not compile, charging 1 unit per call: %s", virtual_host, exc)
        return None


@dataclass(frozen=True, slots=True)
class EffectiveBudgets:
    """A tenant's budgets with its plan's caps applied (`budgets_effective`)."""

    tenant_id: int
    own: dict[tuple[str, str], tuple[int | None, int | None]]  # (scope, name) -> (daily, monthly)
    plan: str = ""
    plan_daily: int | None = None
    plan_monthly: int | None = None

    def of(self, scope: str, name: str) -> Budget | None:
        """The budget of a key, a team or a token subject (`scope` "token", whose only caps are the
        plan's): the lower of its own cap and the plan's for each period; None when neither caps it."""
        daily, monthly = self.own.get((scope, name), (None, None))
        daily, daily_plan = _clamped(daily, self.plan_daily)
        monthly, monthly_plan = _clamped(monthly, self.plan_monthly)
        if daily is None and monthly is None:
            return None
        return Budget(
            self.tenant_id, scope, name, daily, monthly,
            daily_plan=self.plan if daily_plan else "", monthly_plan=self.plan if monthly_plan else "",
        )


def _clamped(own: int | None, plan: int | None) -> tuple[int | None, bool]:
    """The effective cap, and whether it is the plan's."""
    if plan is not None and (own is None or plan < own):
        return plan, True
    return own, False


def budgets_effective(*, tenant: Tenant) -> EffectiveBudgets:
    """The tenant's budgets, clamped to its plan (read with `tenant.plan`: select it along)."""
    own = {(b.scope, b.name): (b.daily, b.monthly) for b in StoredBudget.objects.filter(tenant=tenant)}
    plan = tenant.plan
    if plan is None:
        return EffectiveBudgets(tenant.pk, own)
    return EffectiveBudgets(tenant.pk, own, plan.name, plan.daily, plan.monthly)


@dataclass(frozen=True, slots=True)
class Simulation:
    """What the gateway would do with one call: whether the tool is listed for the key, whether the
    call passes, which rule decided (None: the default, or no policy), the upstream target, and the
    budget units the call would cost (0 when the rules refuse it; rate limits and budgets, which
    depend on what was spent, are not consulted)."""

    listed: bool
    allowed: bool
    rule: str | None
    reason: str
    map_key: str | None
    upstream_name: str | None
    cost: int = 0


def access_decision_simulate(
    *, virtual_host: VirtualHost, key: ApiKey, tool: str, arguments: Mapping[str, Any]
) -> Simulation:
    """The policy simulator (for the console): `key` calls the exposed tool `tool` with `arguments`.
    Decided from the configuration alone: whether the backend really has the tool is not asked."""
    mounts = list(virtual_host.mounts.values_list("map_key", flat=True))
    aliases = {a.alias: (a.map_key, a.upstream_name) for a in virtual_host.tool_aliases.all()}
    target = Naming.build(mounts, aliases).route_tool(tool)
    if target is None:
        return Simulation(False, False, None, f"{tool!r} names no tool of this virtual host", None, None)
    principal = Principal(
        tenant_id=key.tenant_id, tenant_slug=key.tenant.slug, key_id=key.pk, key_name=key.name,
        team=key.team.slug if key.team else None,
    )
    current = VirtualHost.objects.prefetch_related("access_policy__rules", "tool_costs").get(pk=virtual_host.pk)
    policy = access_policy_compiled(virtual_host=current)
    cost = call_cost(tool_costs_compiled(virtual_host=current), "tools/call", tool, target[1])
    if policy is None:
        return Simulation(True, True, None, "allowed: the virtual host has no access policy", *target, cost)
    if not policy.visible(principal, tool, target[1]):
        return Simulation(False, False, None, "hidden from this key: a call is answered as an unknown tool", *target)
    decision = policy.decide(principal, tool, target[1], arguments)
    return Simulation(True, decision.allowed, decision.rule, decision.reason, *target, cost if decision.allowed else 0)
