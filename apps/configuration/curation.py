"""The `tools` section of a virtual host in the configuration document — the host's tool curation
(docs/virtual-hosts.md, "Curating a host's tools"): checking it (pure, like `validation`), bringing a
host's stored rules and descriptions in line with it (for `reconcile`), and exporting it.

```yaml
tools:
  include: [{tag: pets, of: api}, {glob: "Describe*"}]   # or a plain string: a tool name
  exclude: [{name: DeleteBucket, of: s3}]
  descriptions: {"s3:ListBuckets": "List the buckets of this account."}
```
"""

from __future__ import annotations

from typing import Any

from apps.catalog.curation import (
    rule_describe,
    tool_override_delete,
    tool_override_set,
    tool_rule_delete,
    tool_rules_add,
)
from apps.catalog.models import VirtualHost
from apps.configuration.fields import FieldChecks
from apps.configuration.reports import Action, Change
from apps.kernel.curation import ToolRuleSpec, description_check, tool_rule_check

_TOOLS_FIELDS = ("include", "exclude", "descriptions")
_MATCHES = ("name", "glob", "tag")

Descriptions = tuple[tuple[str, str, str], ...]  # (map key, tool name at the backend, description)


def curation_check(
    checks: FieldChecks, raw: Any, path: str, *, map_keys: set[str]
) -> tuple[tuple[ToolRuleSpec, ...], Descriptions]:
    """A host's `tools` section; problems are recorded on `checks` at their paths."""
    if raw is None:
        return (), ()
    fields = checks.mapping(raw, path, fields=_TOOLS_FIELDS, required=())
    if fields is None:
        return (), ()
    rules: list[ToolRuleSpec] = []
    for action in ("include", "exclude"):
        for i, item in enumerate(checks.items(fields.get(action), f"{path}.{action}")):
            item_path = f"{path}.{action}[{i}]"
            rule = _rule(checks, action, item, item_path)
            if rule is None:
                continue
            wrong = tool_rule_check(rule, map_keys=map_keys)
            for problem in wrong:
                field = {"map_key": "of", "pattern": rule.match}.get(problem.field, problem.field)
                checks.add(f"{item_path}.{field}", problem.message)
            if not wrong and rule not in rules:
                rules.append(rule)
    described: list[tuple[str, str, str]] = []
    for target, text in checks.pairs(fields.get("descriptions"), f"{path}.descriptions"):
        item_path = f"{path}.descriptions.{target}"
        map_key, colon, name = target.partition(":")
        if not colon or not name:
            checks.add(item_path, "must be named 'map-key:tool-name'")
        elif map_key not in map_keys:
            checks.add(item_path, f"map key {map_key!r} is not mounted on this virtual host")
        elif problems := description_check(text):
            checks.add(item_path, problems[0].message)
        else:
            described.append((map_key, name, text))
    return tuple(rules), tuple(described)


def _rule(checks: FieldChecks, action: str, item: Any, path: str) -> ToolRuleSpec | None:
    if isinstance(item, str):
        return ToolRuleSpec(action, "name", item)
    fields = checks.mapping(item, path, fields=(*_MATCHES, "of"), required=())
    if fields is None:
        return None
    given = [match for match in _MATCHES if match in fields]
    if len(given) != 1:
        checks.add(path, "name exactly one of name, glob or tag")
        return None
    pattern, of = fields[given[0]], fields.get("of", "")
    if not isinstance(pattern, str) or not isinstance(of, str):
        checks.add(path, f"{given[0]} and of must be strings")
        return None
    return ToolRuleSpec(action, given[0], pattern, of)


def curation_reconcile(
    *, host: VirtualHost, rules: tuple[ToolRuleSpec, ...], descriptions: Descriptions, name: str,
) -> list[Change]:
    """Add the document's rules and descriptions the host lacks, and correct the descriptions that
    differ (mounts are in line already). What the host has beyond them stays: `curation_prune`
    deletes it, with `--prune` only."""
    changes: list[Change] = []
    stored = {ToolRuleSpec(r.action, r.match, r.pattern, r.map_key) for r in host.tool_rules.all()}
    new = [spec for spec in rules if spec not in stored]
    if new:
        tool_rules_add(virtual_host=host, rules=new)
        changes.extend(Change(Action.CREATED, "tool_rule", f"{name} {rule_describe(spec)}", "") for spec in new)
    current = {(o.map_key, o.upstream_name): o.description for o in host.tool_overrides.all()}
    for key, tool, text in descriptions:
        before = current.get((key, tool))
        if before == text:
            continue
        tool_override_set(virtual_host=host, map_key=key, upstream_name=tool, description=text)
        changes.append(Change(Action.UPDATED if before is not None else Action.CREATED, "tool_description",
                              f"{name} {key}:{tool}", ""))
    return changes


def curation_prune(
    *, host: VirtualHost, rules: tuple[ToolRuleSpec, ...], descriptions: Descriptions, name: str,
) -> list[Change]:
    """Delete the host's rules and descriptions the document does not name (`--prune`)."""
    changes: list[Change] = []
    for rule in host.tool_rules.all():
        spec = ToolRuleSpec(rule.action, rule.match, rule.pattern, rule.map_key)
        if spec not in rules:
            tool_rule_delete(tool_rule=rule)
            changes.append(Change(Action.DELETED, "tool_rule", f"{name} {rule_describe(spec)}", ""))
    named = {(key, tool) for key, tool, _ in descriptions}
    for override in host.tool_overrides.all():
        if (override.map_key, override.upstream_name) not in named:
            tool_override_delete(tool_override=override)
            changes.append(Change(Action.DELETED, "tool_description", f"{name} {override.map_key}:{override.upstream_name}", ""))
    return changes


def curation_export(*, host: VirtualHost) -> dict[str, Any]:
    """The host's `tools` section (empty when it curates nothing)."""
    section: dict[str, Any] = {}
    for rule in host.tool_rules.all():
        item: dict[str, str] = {rule.match: rule.pattern}
        if rule.map_key:
            item["of"] = rule.map_key
        section.setdefault(rule.action, []).append(item)
    described = {f"{o.map_key}:{o.upstream_name}": o.description for o in host.tool_overrides.all()}
    if described:
        section["descriptions"] = described
    return section
