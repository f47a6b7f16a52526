"""A virtual host's tool curation: the include/exclude rules that choose which of its backends' tools
it serves, and the descriptions it shows instead of the backends' (`apps.kernel.curation` says what
the rules mean; docs/virtual-hosts.md, "Curating a host's tools"). Names are changed with aliases
(`apps.catalog.services.tool_alias_set`).

Every write moves the tenant's configuration version, so gateways serve the change at once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.catalog.models import ToolOverride, ToolRule, VirtualHost
from apps.catalog.selectors import virtual_host_naming_get
from apps.common.config_version import config_version_bump
from apps.common.validation_errors import problems_refuse
from apps.kernel.curation import RULES_MAX, ToolRuleSpec, description_check, tool_rule_check
from apps.kernel.problems import FieldProblem

Target = tuple[str, str]  # (map key, tool name at the backend)
#: Tools one hide or show names (a page's worth, and then some).
TOOLS_AT_ONCE_MAX = 500


def _map_keys(virtual_host: VirtualHost) -> set[str]:
    return set(virtual_host.mounts.values_list("map_key", flat=True))


def _refuse_unmounted(virtual_host: VirtualHost, targets: Sequence[Target]) -> None:
    if len(targets) > TOOLS_AT_ONCE_MAX:
        raise ValidationError({"tools": f"name at most {TOOLS_AT_ONCE_MAX} tools at once"})
    mounted = _map_keys(virtual_host)
    problems_refuse([FieldProblem("map_key", f"map key {key!r} is not mounted on this virtual host")
                     for key in sorted({key for key, _ in targets} - mounted)])


@transaction.atomic
def tool_rules_add(*, virtual_host: VirtualHost, rules: Sequence[ToolRuleSpec]) -> list[ToolRule]:
    """Add `rules` to the host's curation (a rule it has already is left as it is). Every rule is
    checked first: one bad rule refuses them all, naming it."""
    map_keys = _map_keys(virtual_host)
    problems = [FieldProblem(problem.field if len(rules) == 1 else f"rules[{i}].{problem.field}", problem.message)
                for i, rule in enumerate(rules) for problem in tool_rule_check(rule, map_keys=map_keys)]
    problems_refuse(problems)
    existing = {(r.action, r.map_key, r.match, r.pattern): r for r in ToolRule.objects.filter(virtual_host=virtual_host)}
    new = {(r.action, r.map_key, r.match, r.pattern) for r in rules} - existing.keys()
    if len(existing) + len(new) > RULES_MAX:
        raise ValidationError({"rules": f"a virtual host has at most {RULES_MAX} curation rules"})
    # A rule another request adds meanwhile is no conflict: it is the same rule.
    ToolRule.objects.bulk_create(
        (ToolRule(virtual_host=virtual_host, action=a, map_key=k, match=m, pattern=p) for a, k, m, p in sorted(new)),
        ignore_conflicts=True)
    if new:
        config_version_bump(tenant_id=virtual_host.tenant_id)
    by_key = {(r.action, r.map_key, r.match, r.pattern): r for r in ToolRule.objects.filter(virtual_host=virtual_host)}
    return [by_key[(r.action, r.map_key, r.match, r.pattern)] for r in rules]


def tool_rule_delete(*, tool_rule: ToolRule) -> None:
    tenant_id = tool_rule.virtual_host.tenant_id
    tool_rule.delete()
    config_version_bump(tenant_id=tenant_id)


@dataclass(frozen=True)
class ShowResult:
    """What `tools_show` did: rules it removed or added, and the tools it could not show with why."""

    removed: int
    added: int
    still_hidden: dict[Target, str]


@transaction.atomic
def tools_hide(*, virtual_host: VirtualHost, tools: Sequence[Target]) -> list[ToolRule]:
    """Hide each tool (map key, name at the backend) with an exclude rule naming it."""
    _refuse_unmounted(virtual_host, tools)
    return tool_rules_add(virtual_host=virtual_host, rules=[
        ToolRuleSpec(ToolRule.Action.EXCLUDE, ToolRule.Match.NAME, name, key) for key, name in dict.fromkeys(tools)])


@transaction.atomic
def tools_show(*, virtual_host: VirtualHost, tools: Sequence[Target]) -> ShowResult:
    """Serve each tool again: remove the exclude rules that name it exactly, and when include rules
    leave it out, add one naming it. A tool hidden by an exclude glob or tag stays hidden (an
    exclusion wins): it is returned with the rule that hides it, for the operator to narrow."""
    _refuse_unmounted(virtual_host, tools)
    wanted = list(dict.fromkeys(tools))
    mounted = sorted(_map_keys(virtual_host))
    names = {(key, pattern) for key, name in wanted for pattern in (name, f"{key}-{name}" if len(mounted) > 1 else name)}
    exact = []
    narrowed: list[ToolRuleSpec] = []  # what a removed rule of every backend still hides elsewhere
    for rule in virtual_host.tool_rules.filter(action=ToolRule.Action.EXCLUDE, match=ToolRule.Match.NAME):
        freed = {key for key in ([rule.map_key] if rule.map_key else mounted) if (key, rule.pattern) in names}
        if freed:
            exact.append(rule)
            if not rule.map_key:  # it named the tool on every backend: keep it hidden on the others
                narrowed.extend(ToolRuleSpec(rule.action, rule.match, rule.pattern, key)
                                for key in mounted if key not in freed)
    if exact:
        ToolRule.objects.filter(pk__in=[rule.pk for rule in exact]).delete()
        config_version_bump(tenant_id=virtual_host.tenant_id)
    if narrowed:
        tool_rules_add(virtual_host=virtual_host, rules=narrowed)
    curation = virtual_host_naming_get(virtual_host=virtual_host).curation
    includes = [ToolRuleSpec(ToolRule.Action.INCLUDE, ToolRule.Match.NAME, name, key) for key, name in wanted
                if curation is not None and not curation.shows(key, name) and curation.hidden_by(key, name) is None]
    if includes:
        tool_rules_add(virtual_host=virtual_host, rules=includes)
        curation = virtual_host_naming_get(virtual_host=virtual_host).curation
    hidden: dict[Target, str] = {}
    for key, name in wanted:
        if curation is not None and not curation.shows(key, name):
            rule = curation.hidden_by(key, name)
            hidden[(key, name)] = (f"hidden by the rule {rule_describe(rule)}" if rule else "left out by the include rules")
    return ShowResult(len(exact), len(includes), hidden)


def rule_describe(rule: ToolRuleSpec | ToolRule) -> str:
    """A rule in words, e.g. `exclude glob 'Delete*' of s3`."""
    of = f" of {rule.map_key}" if rule.map_key else ""
    return f"{rule.action} {rule.match} {rule.pattern!r}{of}"


def tool_override_set(*, virtual_host: VirtualHost, map_key: str, upstream_name: str, description: str) -> ToolOverride:
    """Show `description` for the tool instead of its backend's."""
    problems = description_check(description)
    if map_key not in _map_keys(virtual_host):
        problems.append(FieldProblem("map_key", f"map key {map_key!r} is not mounted on this virtual host"))
    if not isinstance(upstream_name, str) or not 0 < len(upstream_name) <= 128:
        problems.append(FieldProblem("tool", "tool must be the tool's name at the backend (1-128 characters)"))
    problems_refuse(problems)
    override, _ = ToolOverride.objects.update_or_create(
        virtual_host=virtual_host, map_key=map_key, upstream_name=upstream_name, defaults={"description": description})
    config_version_bump(tenant_id=virtual_host.tenant_id)
    return override


def tool_override_delete(*, tool_override: ToolOverride) -> None:
    tenant_id = tool_override.virtual_host.tenant_id
    tool_override.delete()
    config_version_bump(tenant_id=tenant_id)
