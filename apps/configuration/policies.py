"""The `policies` section of the configuration document: checking it (pure, like `validation`),
bringing a virtual host's stored access policy in line with it (for `reconcile`), and exporting it.

The rules' meaning is the gateway's (apps/kernel/policy.py); every rule is compiled here
with the gateway's own `policy_check`, so a document that validates never fails on a rule when it
is applied."""

from __future__ import annotations

from typing import Any

from apps.catalog.models import VirtualHost
from apps.configuration.document import PolicySpec, TenantSpec, VirtualHostSpec
from apps.configuration.fields import FieldChecks
from apps.configuration.reports import Action, Change
from apps.kernel.policy import EFFECTS, SUBJECTS, PolicyError, RuleSpec, policy_check
from apps.policies.models import AccessPolicy
from apps.policies.services import access_policy_clear, access_policy_set

DEFAULT_EFFECT = "allow"
_POLICY_FIELDS = ("tenant", "virtual_host", "default", "rules")
_RULE_FIELDS = ("id", "subject", "effect", "tools", "when")


# --- validation ----------------------------------------------------------------------------------
def policies_check(
    checks: FieldChecks, raw: Any, *, tenants: dict[str, TenantSpec], virtual_hosts: tuple[VirtualHostSpec, ...]
) -> tuple[PolicySpec, ...]:
    """The document's policies; problems are recorded on `checks` at their paths."""
    hosts = {(host.tenant, host.slug) for host in virtual_hosts}
    policies: dict[tuple[str, str], PolicySpec] = {}
    for i, item in enumerate(checks.items(raw, "policies")):
        path = f"policies[{i}]"
        fields = checks.mapping(item, path, fields=_POLICY_FIELDS, required=("tenant", "virtual_host"))
        if fields is None:
            continue
        tenant = checks.text(fields.get("tenant"), f"{path}.tenant", max_length=64)
        if tenant and tenant not in tenants:
            checks.add(f"{path}.tenant", f"unknown tenant {tenant!r} (add it under tenants)")
            tenant = ""
        slug = checks.text(fields.get("virtual_host"), f"{path}.virtual_host", max_length=64)
        if tenant and slug and (tenant, slug) not in hosts:
            checks.add(
                f"{path}.virtual_host",
                f"unknown virtual host {slug!r} (add it under virtual_hosts for tenant {tenant!r})",
            )
        default = checks.choice(fields.get("default", DEFAULT_EFFECT), f"{path}.default", list(EFFECTS))
        rules = _rules(checks, fields.get("rules"), f"{path}.rules", tenants.get(tenant), default or DEFAULT_EFFECT)
        if (tenant, slug) in policies:
            checks.add(f"{path}.virtual_host", f"duplicate policy for virtual host {slug!r} in tenant {tenant!r}")
        elif tenant and slug:
            policies[(tenant, slug)] = PolicySpec(tenant=tenant, virtual_host=slug, default=default, rules=rules)
    return tuple(policies.values())


def _rules(checks: FieldChecks, raw: Any, path: str, tenant: TenantSpec | None, default: str) -> tuple[RuleSpec, ...]:
    rules: list[RuleSpec] = []
    ids: set[str] = set()
    start = len(checks.problems)
    for j, item in enumerate(checks.items(raw, path)):
        rule_path = f"{path}[{j}]"
        before = len(checks.problems)
        fields = checks.mapping(item, rule_path, fields=_RULE_FIELDS, required=("id", "subject", "effect", "tools"))
        if fields is None:
            continue
        rule_id = fields.get("id", "")
        if not isinstance(rule_id, str):  # its form is policy_check's to judge
            checks.add(f"{rule_path}.id", "must be a string")
            rule_id = ""
        if rule_id and rule_id in ids:
            checks.add(f"{rule_path}.id", f"duplicate rule id {rule_id!r}")
        ids.add(rule_id)
        kind, name = "", ""
        if "subject" in fields:
            kind, name = _subject(checks, fields["subject"], f"{rule_path}.subject", tenant)
        effect = checks.choice(fields["effect"], f"{rule_path}.effect", list(EFFECTS)) if "effect" in fields else ""
        tools = _tools(checks, fields["tools"], f"{rule_path}.tools") if "tools" in fields else ()
        condition = fields.get("when")
        if condition is None:  # absent or `when: null`: no condition, like other optional fields
            condition = ""
        elif not isinstance(condition, str):
            checks.add(f"{rule_path}.when", "must be a string (a CEL expression; quote it)")
            condition = ""
        rule = RuleSpec(
            id=rule_id, subject_kind=kind, subject_name=name, effect=effect, tools=tools, condition=condition
        )
        # Compile only a rule whose parts are otherwise fine: what is left to find is what only the
        # gateway knows (the id's form, the CEL condition), reported once, at the rule.
        if len(checks.problems) == before:
            try:
                policy_check(default, [rule])
            except PolicyError as error:
                checks.add(rule_path, str(error))
        rules.append(rule)
    if len(checks.problems) == start:
        try:  # what only the whole policy shows (how many rules it has)
            policy_check(default, rules)
        except PolicyError as error:
            checks.add(path, str(error))
    return tuple(rules)


def _subject(checks: FieldChecks, raw: Any, path: str, tenant: TenantSpec | None) -> tuple[str, str]:
    """(kind, name) of a rule's subject: a mapping with exactly one of tenant, team and key."""
    fields = checks.mapping(raw, path, fields=SUBJECTS, required=())
    if fields is None:
        return "", ""
    if len(fields) != 1:
        checks.add(path, "give exactly one of 'tenant', 'team' and 'key'")
        return "", ""
    ((kind, name),) = fields.items()
    if kind not in SUBJECTS:
        return "", ""  # reported as an unknown field
    where = f"{path}.{kind}"
    name = checks.text(name, where, max_length=100)
    if tenant is None or not name:
        return kind, name
    if kind == "tenant" and name != tenant.slug:
        checks.add(where, f"must be this policy's tenant {tenant.slug!r}, not {name!r}")
    elif kind == "team" and name not in tenant.teams:
        checks.add(where, f"unknown team {name!r} (add it to tenant {tenant.slug!r}'s teams)")
    elif kind == "key" and name not in {key.name for key in tenant.keys}:
        checks.add(where, f"unknown key {name!r} (add it to tenant {tenant.slug!r}'s keys)")
    return kind, name


def _tools(checks: FieldChecks, raw: Any, path: str) -> tuple[str, ...]:
    """The rule's patterns as given; how many and how long they may be is `policy_check`'s to say."""
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        checks.add(path, "must be a list of tool names or globs")
        return ()
    return tuple(raw)


# --- reconcile -----------------------------------------------------------------------------------
def policy_reconcile(*, virtual_host: VirtualHost, spec: PolicySpec) -> Change:
    """Give the host the policy `spec` describes, writing (and moving the configuration version)
    only when the stored one differs. Raises the service's ValidationError. A rule written that
    names no tool the host is known to have is stored, and its warning is in the change's detail
    (`WARNING: rule '…': …`), as the apply's report prints it."""
    name = f"{spec.tenant}/{spec.virtual_host}"
    summary = f"default {spec.default}, {len(spec.rules)} rules"
    stored = _stored(virtual_host)
    if stored is not None and stored == (spec.default, spec.rules):
        return Change(action=Action.UNCHANGED, kind="policy", name=name, detail=summary)
    warnings = access_policy_set(virtual_host=virtual_host, default=spec.default, rules=spec.rules)
    if stored is None:
        return Change(action=Action.CREATED, kind="policy", name=name, detail=_warned(summary, warnings))
    default, rules = stored
    changed = ["default"] if default != spec.default else []
    if rules != spec.rules:
        changed.append("rules")
    return Change(action=Action.UPDATED, kind="policy", name=name, detail=_warned(", ".join(changed), warnings))


def _warned(detail: str, warnings: tuple[str, ...]) -> str:
    return "; ".join([detail, *(f"WARNING: {warning}" for warning in warnings)])


def policy_prune(*, virtual_host: VirtualHost, name: str) -> Change | None:
    """Remove the host's policy, if it has one (for a host the document names without a policy)."""
    if not AccessPolicy.objects.filter(virtual_host=virtual_host).exists():
        return None
    access_policy_clear(virtual_host=virtual_host)
    return Change(action=Action.DELETED, kind="policy", name=name)


def _stored(virtual_host: VirtualHost) -> tuple[str, tuple[RuleSpec, ...]] | None:
    """The host's policy in the document's terms, or None when it has none."""
    policy = AccessPolicy.objects.filter(virtual_host=virtual_host).first()
    if policy is None:
        return None
    rules = tuple(
        RuleSpec(
            id=rule.rule_id, subject_kind=rule.subject_kind, subject_name=rule.subject_name,
            effect=rule.effect, tools=tuple(rule.tools), condition=rule.condition,
        )
        for rule in policy.rules.order_by("position")
    )
    return policy.default_effect, rules


# --- export --------------------------------------------------------------------------------------
def policy_export(*, virtual_host: VirtualHost) -> dict[str, Any] | None:
    """The host's `policies` entry, or None when it has no policy. `default` and `rules` are
    always written: the default is what a reader most needs to see."""
    stored = _stored(virtual_host)
    if stored is None:
        return None
    default, rules = stored
    return {
        "tenant": virtual_host.tenant.slug,
        "virtual_host": virtual_host.slug,
        "default": default,
        "rules": [_export_rule(rule) for rule in rules],
    }


def _export_rule(rule: RuleSpec) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": rule.id,
        "subject": {rule.subject_kind: rule.subject_name},
        "effect": rule.effect,
        "tools": list(rule.tools),
    }
    if rule.condition:
        item["when"] = rule.condition
    return item
