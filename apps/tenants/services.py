"""Tenants, teams and API keys: every write goes through these functions.

Each service that changes what a gateway snapshot holds moves the tenant's configuration version
(after commit), so running gateway instances reload. Domain errors are raised as Django
`ValidationError`s, checked before writing so that a caller inside a transaction can report them and
carry on (an IntegrityError would poison the transaction)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.common.config_version import config_version_bump
from apps.common.validation_errors import problems_refuse
from apps.kernel.problems import FieldProblem
from apps.tenants.access_changes import access_changed_notify
from apps.tenants.keys import admin_token_generate, key_generate, key_hash, key_label_of_hash
from apps.tenants.models import AdminToken, ApiKey, Membership, Plan, Team, Tenant, TokenIssuer
from apps.tenants.validators import (
    ALGORITHMS,
    ApiKeyFields,
    PlanFields,
    TenantFields,
    TokenIssuerFields,
    api_key_check,
    plan_check,
    team_check,
    tenant_check,
    token_issuer_check,
)


@dataclass(frozen=True)
class IssuedKey:
    """A key just issued or re-issued. `secret` exists only here and is shown to its owner once;
    the database keeps only its hash. Left out of repr so it cannot leak into logs."""

    api_key: ApiKey
    secret: str = field(repr=False)


@dataclass(frozen=True)
class IssuedAdminToken:
    """A REST API token just issued: `secret` is shown once, as for keys."""

    admin_token: AdminToken
    secret: str = field(repr=False)


def _changed_only(problems: list[FieldProblem], *fields: str) -> list[FieldProblem]:
    """The problems of the fields a change sets: what is stored stays as it is (it may predate a rule)."""
    return [problem for problem in problems if problem.field in fields]


def tenant_create(
    *, slug: str, name: str, plan: Plan | None = None, allow_private_networks: bool | None = None
) -> Tenant:
    problems_refuse(tenant_check(TenantFields(slug=slug, name=name, allow_private_networks=allow_private_networks)))
    tenant = Tenant(slug=slug, name=name, plan=plan, allow_private_networks=allow_private_networks)
    tenant.full_clean()
    tenant.save()
    config_version_bump(tenant_id=tenant.pk, slugs=[tenant.slug])
    return tenant


def tenant_update(*, tenant: Tenant, name: str, audit_arguments: str | None = None) -> Tenant:
    """Rename the tenant and, when given, set what its audit rows keep of call arguments."""
    problems_refuse(_changed_only(tenant_check(TenantFields(
        slug=tenant.slug, name=name, audit_arguments=audit_arguments or tenant.audit_arguments,
        allow_private_networks=tenant.allow_private_networks)), "name", "audit_arguments"))
    tenant.name = name
    if audit_arguments is not None:
        tenant.audit_arguments = audit_arguments
    tenant.full_clean()
    tenant.save(update_fields=["name", "audit_arguments", "updated_at"])
    config_version_bump(tenant_id=tenant.pk)
    return tenant


def tenant_private_networks_set(*, tenant: Tenant, allowed: bool | None) -> Tenant:
    """Whether the tenant's backends, token endpoints and key sets may be at private addresses;
    None: the deployment's default (GATEWAY_ALLOW_PRIVATE_NETWORKS). Stored URLs are not checked
    again here: the gateway checks every address when it connects, so a refused one fails then."""
    if tenant.allow_private_networks is allowed:
        return tenant
    problems_refuse(_changed_only(tenant_check(TenantFields(
        slug=tenant.slug, name=tenant.name, audit_arguments=tenant.audit_arguments, allow_private_networks=allowed)),
        "allow_private_networks"))
    tenant.allow_private_networks = allowed
    tenant.save(update_fields=["allow_private_networks", "updated_at"])
    config_version_bump(tenant_id=tenant.pk)
    return tenant


@transaction.atomic
def tenant_delete(*, tenant: Tenant) -> None:
    """Delete the tenant and everything it owns. Virtual hosts go first: their mounts PROTECT
    backends and their anonymous key PROTECTs a key, which a plain cascade would refuse."""
    tenant_id, slug = tenant.pk, tenant.slug
    members = list(tenant.memberships.values_list("user_id", flat=True))
    tenant.virtual_hosts.all().delete()
    tenant.delete()
    config_version_bump(tenant_id=tenant_id, slugs=[slug])
    access_changed_notify(user_ids=members)


def plan_set(*, name: str, daily: int | None, monthly: int | None, limits_editable: bool = True) -> Plan:
    """Create the plan `name`, or replace its caps (units per UTC day and month; None: no cap) and
    whether its tenants may edit their rate limits, budgets and tool costs. A platform admin's
    operation: the tenants on the plan are not asked."""
    problems_refuse(plan_check(PlanFields(name=name, daily=daily, monthly=monthly, limits_editable=limits_editable)))
    plan = Plan.objects.filter(name=name).first() or Plan(name=name)
    plan.daily, plan.monthly, plan.limits_editable = daily, monthly, limits_editable
    plan.full_clean()
    plan.save()
    for tenant_id in plan.tenants.values_list("pk", flat=True):
        config_version_bump(tenant_id=tenant_id)
    return plan


def plan_delete(*, plan: Plan) -> None:
    """Delete a plan no tenant is on."""
    on_it = list(plan.tenants.values_list("slug", flat=True)[:5])
    if on_it:
        raise ValidationError(f"plan {plan.name!r} is assigned to tenant(s) {', '.join(on_it)}; move them first")
    plan.delete()


def tenant_plan_set(*, tenant: Tenant, plan: Plan | None) -> Tenant:
    """Put the tenant on `plan` (None: on none). A platform admin's operation: it is allowed whatever
    the tenant's current plan says about editing limits."""
    if tenant.plan_id != (plan.pk if plan else None):
        tenant.plan = plan
        # An UPDATE: it waits for a limits edit that holds the row (`limits_editable_check`).
        tenant.save(update_fields=["plan", "updated_at"])
        config_version_bump(tenant_id=tenant.pk)
    return tenant


def team_create(*, tenant: Tenant, slug: str) -> Team:
    problems_refuse(team_check(slug=slug))
    team = Team(tenant=tenant, slug=slug)
    team.full_clean()
    team.save()
    config_version_bump(tenant_id=tenant.pk)
    return team


def team_delete(*, team: Team) -> None:
    """Delete the team; its keys stay, without a team."""
    tenant_id = team.tenant_id
    team.delete()
    config_version_bump(tenant_id=tenant_id)


def _check_team(*, tenant: Tenant, team: Team | None) -> None:
    if team is not None and team.tenant_id != tenant.pk:
        raise ValidationError({"team": f"team {team.slug!r} belongs to another tenant"})


def _secret_unused(secret: str, *, exclude_pk: int | None = None) -> None:
    clashes = ApiKey.objects.filter(secret_hash=key_hash(secret))
    if exclude_pk is not None:
        clashes = clashes.exclude(pk=exclude_pk)
    if clashes.exists():
        raise ValidationError({"secret": "another key already uses this secret"})


def _new_secret(secret: str | None, *, exclude_pk: int | None = None) -> tuple[str, str]:
    """A supplied secret (which passed `api_key_check`), if unused, with no label (its label comes from its hash); or a generated
    one with its public label."""
    if secret is None:
        return key_generate()
    _secret_unused(secret, exclude_pk=exclude_pk)
    return secret, ""


def api_key_issue(
    *,
    tenant: Tenant,
    name: str,
    team: Team | None = None,
    secret: str | None = None,
    expires_at: datetime | None = None,
    scopes: Sequence[str] = (),
    owner: Any = None,
    acts_as_owner: bool = False,
) -> IssuedKey:
    """Create a key. A supplied `secret` must pass `api_key_check` and be unused; without one a
    fresh secret is generated. The plaintext is returned once, never stored.
    `scopes`: what the key may claim to do, for access rules to read (`principal.scopes`).
    `owner`: the console user issuing it (tenant members manage only their own keys);
    `acts_as_owner`: its calls are the owner's, as a person (their connected accounts: docs/identity.md)."""
    if acts_as_owner and owner is None:
        raise ValidationError({"acts_as_owner": "only a key issued by a person can act as that person"})
    problems_refuse(api_key_check(ApiKeyFields(name=name, scopes=scopes, secret=secret, expires_at=expires_at)))
    _check_team(tenant=tenant, team=team)
    secret, prefix = _new_secret(secret)
    secret_hash = key_hash(secret)
    api_key = ApiKey(
        tenant=tenant,
        team=team,
        name=name,
        prefix=prefix or key_label_of_hash(secret_hash),
        secret_hash=secret_hash,
        expires_at=expires_at,
        scopes=sorted(set(scopes)),
        owner=owner,
        acts_as_owner=acts_as_owner,
    )
    api_key.full_clean()
    api_key.save()
    config_version_bump(tenant_id=tenant.pk)
    return IssuedKey(api_key=api_key, secret=secret)


def api_key_update(
    *, api_key: ApiKey, team: Team | None, expires_at: datetime | None, scopes: Sequence[str] | None = None
) -> ApiKey:
    """Set the key's team and expiry (both replace the current values; None clears them), and its
    scopes when given."""
    problems_refuse(_changed_only(api_key_check(ApiKeyFields(
        name=api_key.name, scopes=api_key.scopes if scopes is None else scopes, expires_at=expires_at)),
        "scopes", "expires_at"))
    _check_team(tenant=api_key.tenant, team=team)
    api_key.team = team
    api_key.expires_at = expires_at
    if scopes is not None:
        api_key.scopes = sorted(set(scopes))
    api_key.full_clean()
    api_key.save(update_fields=["team", "expires_at", "scopes", "updated_at"])
    config_version_bump(tenant_id=api_key.tenant_id)
    return api_key


def api_key_reissue(*, api_key: ApiKey, secret: str | None = None) -> IssuedKey:
    """Give an active key a new secret (supplied or generated) in place, keeping its identity,
    so policies and virtual hosts that point at it stay valid. The old secret stops working."""
    if api_key.revoked_at is not None:
        raise ValidationError("a revoked key cannot be re-issued; issue a new key instead")
    problems_refuse(_changed_only(api_key_check(ApiKeyFields(
        name=api_key.name, scopes=api_key.scopes, secret=secret, expires_at=api_key.expires_at)), "secret"))
    secret, prefix = _new_secret(secret, exclude_pk=api_key.pk)
    api_key.secret_hash = key_hash(secret)
    api_key.prefix = prefix or key_label_of_hash(api_key.secret_hash)
    api_key.save(update_fields=["prefix", "secret_hash", "updated_at"])
    config_version_bump(tenant_id=api_key.tenant_id)
    return IssuedKey(api_key=api_key, secret=secret)


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    """Revoke the key for good; revoking a revoked key keeps its original revocation time."""
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at", "updated_at"])
        config_version_bump(tenant_id=api_key.tenant_id)
    return api_key


def api_key_delete(*, api_key: ApiKey) -> None:
    """Delete the key. Refused while a virtual host lets anonymous callers act as it."""
    # Through the tenant, because VirtualHost.anonymous_key has no reverse accessor (and tenants
    # must not import catalog).
    if ApiKey.objects.filter(pk=api_key.pk, tenant__virtual_hosts__anonymous_key=api_key).exists():
        raise ValidationError(f"key {api_key.name!r} is the anonymous key of a virtual host")
    tenant_id = api_key.tenant_id
    api_key.delete()
    config_version_bump(tenant_id=tenant_id)


def token_issuer_set(
    *,
    tenant: Tenant,
    issuer: str,
    audience: str,
    jwks_url: str = "",
    public_key: str = "",
    algorithms: Sequence[str] = ALGORITHMS,
    team_claim: str = "team",
    subject_claim: str = "sub",
) -> TokenIssuer:
    """Accept JWT access tokens from `issuer` for `audience` on the tenant's virtual hosts (replacing
    what was configured for that issuer). Exactly one of `jwks_url` and `public_key` (PEM)."""
    problems_refuse(token_issuer_check(TokenIssuerFields(
        issuer=issuer, audience=audience, jwks_url=jwks_url, public_key=public_key, algorithms=algorithms,
        team_claim=team_claim, subject_claim=subject_claim), allow_private=tenant.private_networks_allowed))
    token_issuer, _ = TokenIssuer.objects.update_or_create(
        tenant=tenant, issuer=issuer,
        defaults={"audience": audience, "jwks_url": jwks_url, "public_key": public_key,
                  "algorithms": list(algorithms), "team_claim": team_claim, "subject_claim": subject_claim},
    )
    config_version_bump(tenant_id=tenant.pk)
    return token_issuer


def token_issuer_delete(*, token_issuer: TokenIssuer) -> None:
    tenant_id = token_issuer.tenant_id
    token_issuer.delete()
    config_version_bump(tenant_id=tenant_id)


def membership_set(*, tenant: Tenant, user: Any, role: str) -> Membership:
    """Give `user` `role` in the tenant (replacing the role they had)."""
    if role not in Membership.Role.values:
        raise ValidationError(f"unknown role {role!r}; use one of {', '.join(Membership.Role.values)}")
    membership, _ = Membership.objects.update_or_create(tenant=tenant, user=user, defaults={"role": role})
    access_changed_notify(user_ids=[membership.user_id])  # a demotion shrinks what they may see
    return membership


def membership_delete(*, membership: Membership) -> None:
    membership.delete()
    access_changed_notify(user_ids=[membership.user_id])


def console_user_create(*, username: str, password: str) -> Any:
    """A new console user without any role (give one with `membership_set`). The password must pass
    the configured password validators; their messages are raised as a ValidationError."""
    user_model = get_user_model()
    user = user_model(username=username)
    if user_model.objects.filter(username__iexact=username).exists():
        raise ValidationError({"username": f"a user {username!r} already exists"})
    try:
        user.full_clean(exclude=["password"])
    except ValidationError as exc:
        raise ValidationError({"username": exc.message_dict.get("username", exc.messages)}) from None
    validate_password(password, user=user)
    user.set_password(password)
    user.save()
    return user


def admin_token_issue(*, user: Any, name: str, expires_at: datetime | None = None) -> IssuedAdminToken:
    """A REST API token acting as `user`; the plaintext is returned once, never stored."""
    if AdminToken.objects.filter(user=user, name=name).exists():
        raise ValidationError(f"you already have a token named {name!r}")
    secret, prefix = admin_token_generate()
    token = AdminToken(user=user, name=name, prefix=prefix, secret_hash=key_hash(secret), expires_at=expires_at)
    token.full_clean()
    token.save()
    return IssuedAdminToken(admin_token=token, secret=secret)


def admin_token_revoke(*, admin_token: AdminToken) -> AdminToken:
    if admin_token.revoked_at is None:
        admin_token.revoked_at = timezone.now()
        admin_token.save(update_fields=["revoked_at", "updated_at"])
    return admin_token


def admin_token_authenticate(*, secret: str) -> AdminToken | None:
    """The active token with this secret (its user loaded), or None. Marks it used at most once a
    minute, so a busy automation does not write on every request."""
    token = (AdminToken.objects.select_related("user")
             .filter(secret_hash=key_hash(secret), revoked_at__isnull=True).first())
    now = timezone.now()
    if token is None or (token.expires_at is not None and token.expires_at <= now) or not token.user.is_active:
        return None
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        AdminToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token
