"""Setting and clearing the access policy of a virtual host."""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.catalog.models import VirtualHost
from apps.common.config_version import config_version_bump
from apps.gateway.pipeline.policy import PolicyError, RuleSpec, policy_compile
from apps.policies.models import AccessPolicy, AccessRule, RateLimit
from apps.tenants.models import Tenant


@transaction.atomic
def access_policy_set(*, virtual_host: VirtualHost, default: str, rules: Sequence[RuleSpec]) -> AccessPolicy:
    """Replace the host's policy with `default` and `rules` (in order). Every rule is checked first —
    its CEL condition compiled, its subject found in the host's tenant — so a bad rule changes nothing."""
    try:
        policy_compile(default, rules)
    except PolicyError as exc:
        raise ValidationError(str(exc)) from None
    tenant = virtual_host.tenant
    teams = set(tenant.teams.values_list("slug", flat=True))
    keys = set(tenant.api_keys.values_list("name", flat=True))
    for rule in rules:
        known = {"tenant": {tenant.slug}, "team": teams, "key": keys}[rule.subject_kind]
        if rule.subject_name not in known:
            raise ValidationError(f"rule {rule.id!r}: tenant {tenant.slug!r} has no {rule.subject_kind} {rule.subject_name!r}")
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
    return policy


def access_policy_clear(*, virtual_host: VirtualHost) -> None:
    """Remove the host's policy: every key of its tenant may see and call everything again."""
    AccessPolicy.objects.filter(virtual_host=virtual_host).delete()
    config_version_bump(tenant_id=virtual_host.tenant_id)


def rate_limit_set(*, tenant: Tenant, scope: str, name: str, limit: int, window_seconds: int) -> RateLimit:
    """Limit a key (`scope="key"`, by name) or a team (by slug) of `tenant` to `limit` routed calls per
    `window_seconds`; replaces the subject's previous limit."""
    if scope not in RateLimit.Scope.values:
        raise ValidationError(f"rate limit scope must be key or team, not {scope!r}")
    subjects = tenant.api_keys if scope == "key" else tenant.teams
    if not subjects.filter(**{"name" if scope == "key" else "slug": name}).exists():
        raise ValidationError(f"tenant {tenant.slug!r} has no {scope} {name!r}")
    if not (isinstance(limit, int) and limit >= 1 and isinstance(window_seconds, int) and window_seconds >= 1):
        raise ValidationError("limit and window_seconds must be whole numbers of at least 1")
    rate_limit, _ = RateLimit.objects.update_or_create(
        tenant=tenant, scope=scope, name=name, defaults={"limit": limit, "window_seconds": window_seconds}
    )
    config_version_bump(tenant_id=tenant.pk)
    return rate_limit


def rate_limit_clear(*, tenant: Tenant, scope: str, name: str) -> None:
    RateLimit.objects.filter(tenant=tenant, scope=scope, name=name).delete()
    config_version_bump(tenant_id=tenant.pk)
