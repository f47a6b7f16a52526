"""Read-side of access policies: the compiled policy of a virtual host, and the policy simulator."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apps.catalog.models import VirtualHost
from apps.gateway.pipeline.names import Naming
from apps.gateway.pipeline.policy import Policy, PolicyError, RuleSpec, policy_compile
from apps.gateway.pipeline.values import Principal
from apps.policies.models import AccessPolicy
from apps.tenants.models import ApiKey

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


@dataclass(frozen=True, slots=True)
class Simulation:
    """What the gateway would do with one call: whether the tool is listed for the key, whether the
    call passes, which rule decided (None: the default, or no policy), and the upstream target."""

    listed: bool
    allowed: bool
    rule: str | None
    reason: str
    map_key: str | None
    upstream_name: str | None


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
    current = VirtualHost.objects.prefetch_related("access_policy__rules").get(pk=virtual_host.pk)
    policy = access_policy_compiled(virtual_host=current)
    if policy is None:
        return Simulation(True, True, None, "allowed: the virtual host has no access policy", *target)
    if not policy.visible(principal, tool, target[1]):
        return Simulation(False, False, None, "hidden from this key: a call is answered as an unknown tool", *target)
    decision = policy.decide(principal, tool, target[1], arguments)
    return Simulation(True, decision.allowed, decision.rule, decision.reason, *target)
