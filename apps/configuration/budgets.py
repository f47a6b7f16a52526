"""The `budgets` and `tool_costs` sections of the configuration document: checking them (pure, like
`validation`), bringing a tenant's stored budgets and a virtual host's tool costs in line with them
(for `reconcile`), and exporting them.

How budgets are counted and tools priced is the gateway's (docs/policies.md#budgets); here they are
only stored, through apps/policies/services.py, which also refuses every change for a tenant whose
plan does not allow editing its limits."""

from __future__ import annotations

from typing import Any

from apps.catalog.models import VirtualHost
from apps.configuration.document import BudgetSpec, TenantSpec, ToolCostEntrySpec, VirtualHostSpec
from apps.configuration.fields import FieldChecks
from apps.configuration.limits import entry_name, subject_entries_prune, subject_entry_check, subject_entry_reconcile
from apps.configuration.reports import Action, Change
from apps.kernel.costs import ToolCostSpec, tool_cost_check
from apps.policies.models import Budget, ToolCost
from apps.policies.services import budget_check, budget_clear, budget_set, tool_costs_clear, tool_costs_set
from apps.tenants.models import Tenant
from apps.tenants.selectors import api_key_list, team_list

_BUDGET_FIELDS = ("tenant", "scope", "name", "daily", "monthly")
_TOOL_COST_FIELDS = ("tenant", "virtual_host", "tools", "cost")


# --- validation ----------------------------------------------------------------------------------
def budgets_check(checks: FieldChecks, raw: Any, *, tenants: dict[str, TenantSpec]) -> tuple[BudgetSpec, ...]:
    """The document's budgets; problems are recorded on `checks` at their paths."""
    budgets: dict[tuple[str, str, str], BudgetSpec] = {}
    for i, item in enumerate(checks.items(raw, "budgets")):
        path = f"budgets[{i}]"
        fields = checks.mapping(item, path, fields=_BUDGET_FIELDS, required=("tenant", "scope", "name"))
        if fields is None:
            continue
        tenant, scope, name = subject_entry_check(checks, fields, path, tenants)
        daily, monthly = fields.get("daily"), fields.get("monthly")
        wrong = budget_check(daily=daily, monthly=monthly)
        for problem in wrong:
            checks.add(f"{path}.{problem.field}", problem.message)
        if wrong:
            daily = monthly = None
        if (tenant, scope, name) in budgets:
            checks.add(f"{path}.name", f"duplicate budget for {scope} {name!r} in tenant {tenant!r}")
        elif tenant and scope and name:
            budgets[(tenant, scope, name)] = BudgetSpec(
                tenant=tenant, scope=scope, name=name, daily=daily, monthly=monthly
            )
    return tuple(budgets.values())


def tool_costs_check(
    checks: FieldChecks, raw: Any, *, tenants: dict[str, TenantSpec], virtual_hosts: tuple[VirtualHostSpec, ...]
) -> tuple[ToolCostEntrySpec, ...]:
    """The document's tool costs, in the order written; problems are recorded at their paths."""
    hosts = {(host.tenant, host.slug) for host in virtual_hosts}
    entries: list[ToolCostEntrySpec] = []
    for i, item in enumerate(checks.items(raw, "tool_costs")):
        path = f"tool_costs[{i}]"
        fields = checks.mapping(item, path, fields=_TOOL_COST_FIELDS, required=_TOOL_COST_FIELDS)
        if fields is None:
            continue
        tenant = checks.text(fields.get("tenant"), f"{path}.tenant", max_length=64) if "tenant" in fields else ""
        if tenant and tenant not in tenants:
            checks.add(f"{path}.tenant", f"unknown tenant {tenant!r} (add it under tenants)")
            tenant = ""
        slug = (
            checks.text(fields.get("virtual_host"), f"{path}.virtual_host", max_length=64)
            if "virtual_host" in fields
            else ""
        )
        if tenant and slug and (tenant, slug) not in hosts:
            checks.add(
                f"{path}.virtual_host",
                f"unknown virtual host {slug!r} (add it under virtual_hosts for tenant {tenant!r})",
            )
        tools, cost = fields.get("tools"), fields.get("cost")
        if tools is not None and not isinstance(tools, list):
            tools = None  # tool_cost_check says what a list of tools is
        wrong = checks.refuse(path, tool_cost_check(ToolCostSpec(tuple(tools or ()), cost)), given=fields)
        if tenant and slug and tools and not wrong and cost is not None:
            entries.append(ToolCostEntrySpec(tenant=tenant, virtual_host=slug, tools=tuple(tools), cost=cost))
    return tuple(entries)


# --- reconcile -----------------------------------------------------------------------------------
def budget_reconcile(*, tenant: Tenant, spec: BudgetSpec) -> Change:
    """Give the key or team the budget `spec` describes, writing (and moving the configuration
    version) only when the stored one differs. Raises the service's ValidationError."""
    return subject_entry_reconcile(
        kind="budget", name=entry_name(tenant.slug, spec.scope, spec.name), summary=_summary(spec.daily, spec.monthly),
        stored=Budget.objects.filter(tenant=tenant, scope=spec.scope, name=spec.name).values("daily", "monthly").first(),
        wanted={"daily": spec.daily, "monthly": spec.monthly},
        write=lambda: budget_set(tenant=tenant, scope=spec.scope, name=spec.name, daily=spec.daily, monthly=spec.monthly),
    )


def budgets_prune(*, tenant: Tenant, specs: tuple[BudgetSpec, ...]) -> list[Change]:
    """Remove the tenant's stored budgets that `specs` do not name (for a tenant the document names),
    including budgets left behind by a key or team deleted since."""
    return subject_entries_prune(kind="budget", tenant=tenant, specs=specs,
                                 stored=Budget.objects.filter(tenant=tenant), clear=budget_clear)


def tool_costs_reconcile(*, virtual_host: VirtualHost, specs: tuple[ToolCostEntrySpec, ...]) -> Change:
    """Give the host the tool costs `specs` (its entries, in order) describe, writing only when the
    stored ones differ. Raises the service's ValidationError."""
    name = f"{virtual_host.tenant.slug}/{virtual_host.slug}"
    wanted = [(spec.tools, spec.cost) for spec in specs]
    stored = _stored_costs(virtual_host)
    summary = f"{len(wanted)} entries"
    if stored == wanted:
        return Change(action=Action.UNCHANGED, kind="tool_costs", name=name, detail=summary)
    tool_costs_set(virtual_host=virtual_host, costs=[ToolCostSpec(tools, cost) for tools, cost in wanted])
    return Change(action=Action.UPDATED if stored else Action.CREATED, kind="tool_costs", name=name, detail=summary)


def tool_costs_prune(*, virtual_host: VirtualHost, name: str) -> Change | None:
    """Remove the host's tool costs, if it has any (for a host the document names without any)."""
    if not ToolCost.objects.filter(virtual_host=virtual_host).exists():
        return None
    tool_costs_clear(virtual_host=virtual_host)
    return Change(action=Action.DELETED, kind="tool_costs", name=name)


def _stored_costs(virtual_host: VirtualHost) -> list[tuple[tuple[str, ...], int]]:
    return [(tuple(entry.tools), entry.cost) for entry in ToolCost.objects.filter(virtual_host=virtual_host)]


def _summary(daily: int | None, monthly: int | None) -> str:
    parts = [f"{daily} per day"] if daily is not None else []
    if monthly is not None:
        parts.append(f"{monthly} per month")
    return ", ".join(parts)


# --- export --------------------------------------------------------------------------------------
def budgets_export(*, tenant: Tenant) -> list[dict[str, Any]]:
    """The tenant's `budgets` entries, by scope and name; a cap that is absent is left out. A budget
    whose key or team no longer exists is left out, as for rate limits (it could not be applied)."""
    subjects = {
        Budget.Scope.KEY: {key.name for key in api_key_list(tenant=tenant)},
        Budget.Scope.TEAM: {team.slug for team in team_list(tenant=tenant)},
    }
    entries = []
    for budget in Budget.objects.filter(tenant=tenant).order_by("scope", "name"):
        if budget.name not in subjects.get(budget.scope, set()):
            continue
        item: dict[str, Any] = {"tenant": tenant.slug, "scope": budget.scope, "name": budget.name}
        if budget.daily is not None:
            item["daily"] = budget.daily
        if budget.monthly is not None:
            item["monthly"] = budget.monthly
        entries.append(item)
    return entries


def tool_costs_export(*, virtual_host: VirtualHost) -> list[dict[str, Any]]:
    """The host's `tool_costs` entries, in their order."""
    return [
        {"tenant": virtual_host.tenant.slug, "virtual_host": virtual_host.slug, "tools": list(tools), "cost": cost}
        for tools, cost in _stored_costs(virtual_host)
    ]
