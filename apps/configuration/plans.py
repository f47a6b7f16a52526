"""The `plans` section of the configuration document (and a tenant's `plan:`): checking it (pure,
like `validation`), bringing the stored plans in line with it (for `reconcile`), and exporting them.

Plans are the platform's, not a tenant's: what a plan caps and locks is described in
docs/policies.md#plans; here plans are only stored, through apps/tenants/services.py."""

from __future__ import annotations

from typing import Any

from apps.configuration.document import PlanSpec
from apps.configuration.fields import FieldChecks
from apps.configuration.reports import Action, Change
from apps.tenants.models import Plan
from apps.tenants.selectors import plan_get, plan_list
from apps.tenants.services import plan_delete, plan_set
from apps.tenants.validators import PlanFields, plan_check

_FIELDS = ("name", "daily", "monthly", "limits_editable")


# --- validation ----------------------------------------------------------------------------------
def plans_check(checks: FieldChecks, raw: Any) -> dict[str, PlanSpec]:
    """The document's plans by name; problems are recorded on `checks` at their paths."""
    plans: dict[str, PlanSpec] = {}
    for i, item in enumerate(checks.items(raw, "plans")):
        path = f"plans[{i}]"
        fields = checks.mapping(item, path, fields=_FIELDS, required=("name",))
        if fields is None:
            continue
        name, editable = fields.get("name"), fields.get("limits_editable", True)
        daily, monthly = fields.get("daily"), fields.get("monthly")
        wrong = checks.refuse(path, plan_check(PlanFields(
            name=name, daily=daily, monthly=monthly, limits_editable=editable)), given=fields)
        name = name if isinstance(name, str) else ""
        daily = None if "daily" in wrong else daily
        monthly = None if "monthly" in wrong else monthly
        editable = True if "limits_editable" in wrong else editable
        if name in plans:
            checks.add(f"{path}.name", f"duplicate plan {name!r}")
        elif name:
            plans[name] = PlanSpec(name=name, daily=daily, monthly=monthly, limits_editable=editable)
    return plans


def tenant_plan_check(checks: FieldChecks, raw: Any, path: str, plans: dict[str, PlanSpec]) -> str | None:
    """A tenant's `plan`: the name of one of the document's plans, or None (absent or null)."""
    if raw is None:
        return None
    name = checks.text(raw, path, max_length=64)
    if name and name not in plans:
        checks.add(path, f"unknown plan {name!r} (add it under plans)")
    return name or None


# --- reconcile -----------------------------------------------------------------------------------
def plan_reconcile(*, spec: PlanSpec) -> tuple[Plan, Change]:
    """Give the plan `spec`'s caps and flag, writing only when the stored plan differs."""
    stored = plan_get(name=spec.name)
    wanted = {"daily": spec.daily, "monthly": spec.monthly, "limits_editable": spec.limits_editable}
    summary = _summary(spec)
    if stored is not None:
        changed = [field for field, value in wanted.items() if getattr(stored, field) != value]
        if not changed:
            return stored, Change(action=Action.UNCHANGED, kind="plan", name=spec.name, detail=summary)
    plan = plan_set(name=spec.name, daily=spec.daily, monthly=spec.monthly, limits_editable=spec.limits_editable)
    if stored is None:
        return plan, Change(action=Action.CREATED, kind="plan", name=spec.name, detail=summary)
    return plan, Change(action=Action.UPDATED, kind="plan", name=spec.name, detail=", ".join(changed))


def plan_locks_newly(*, spec: PlanSpec) -> bool:
    """Whether applying `spec` forbids editing limits where they could be edited until now: a new
    plan that forbids it, or one that allowed it and will not."""
    return not spec.limits_editable and not Plan.objects.filter(name=spec.name, limits_editable=False).exists()


def plans_prune(*, specs: tuple[PlanSpec, ...]) -> list[Change]:
    """Delete the plans `specs` do not name (run after the tenants on them are gone or moved)."""
    named = {spec.name for spec in specs}
    changes = []
    for plan in plan_list():
        if plan.name not in named:
            plan_delete(plan=plan)
            changes.append(Change(action=Action.DELETED, kind="plan", name=plan.name))
    return changes


def _summary(spec: PlanSpec) -> str:
    parts = [f"{spec.daily} per day"] if spec.daily is not None else []
    if spec.monthly is not None:
        parts.append(f"{spec.monthly} per month")
    if not spec.limits_editable:
        parts.append("limits locked")
    return ", ".join(parts)


# --- export --------------------------------------------------------------------------------------
def plans_export() -> list[dict[str, Any]]:
    """Every plan, by name; absent caps and the default `limits_editable: true` are left out."""
    entries = []
    for plan in plan_list():
        item: dict[str, Any] = {"name": plan.name}
        if plan.daily is not None:
            item["daily"] = plan.daily
        if plan.monthly is not None:
            item["monthly"] = plan.monthly
        if not plan.limits_editable:
            item["limits_editable"] = False
        entries.append(item)
    return entries
