"""Each tenants entity's one check — `tenant_check`, `team_check`, `api_key_check`, `plan_check` —
shared by the services, the REST API, the console and the configuration validator, so that a bad
value is refused with the same words wherever it is typed. Pure: the rules that need stored data
(a slug already taken, a secret another key uses, a team of another tenant) stay in the services.

Values are as given (a document may hold a number where a name belongs): the checks judge them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from django.core.exceptions import ValidationError

from apps.common.url_guard import url_address_validate
from apps.kernel.identity import CONSOLE_KEY_PREFIX
from apps.kernel.problems import FieldProblem
from apps.tenants.keys import key_secret_problem
from apps.tenants.models import ApiKey, Tenant, TokenIssuer, slug_validator

#: What a key scope may be; access rules read scopes as `principal.scopes`.
SCOPE_PATTERN = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")
#: The largest cap a plan can have (the column is a PostgreSQL integer).
PLAN_CAP_MAX = 2_147_483_647
SLUG_MAX_LENGTH = 64
TENANT_NAME_MAX_LENGTH = Tenant._meta.get_field("name").max_length
KEY_NAME_MAX_LENGTH = ApiKey._meta.get_field("name").max_length
#: The JWT algorithms an issuer may sign with.
ALGORITHMS = ("RS256", "ES256", "EdDSA")
_ISSUER_TEXT_MAX_LENGTH = TokenIssuer._meta.get_field("issuer").max_length
_CLAIM_MAX_LENGTH = TokenIssuer._meta.get_field("team_claim").max_length
# A PEM public key is short (an RSA 4096-bit one is about 800 characters); anything far longer is
# some other file pasted by mistake.
_PUBLIC_KEY_MAX_LENGTH = 10_000


@dataclass(frozen=True, slots=True)
class TenantFields:
    """A tenant's own attributes as a face hands them over (its plan is a reference: the service's)."""

    slug: object
    name: object
    audit_arguments: object = Tenant.AuditArguments.OFF
    allow_private_networks: object = None


@dataclass(frozen=True, slots=True)
class ApiKeyFields:
    """A key's attributes as a face hands them over; `secret` None: the gateway generates one."""

    name: object
    scopes: Sequence[object] = ()
    secret: object = None
    expires_at: object = None


@dataclass(frozen=True, slots=True)
class PlanFields:
    name: object
    daily: object = None
    monthly: object = None
    limits_editable: object = True


@dataclass(frozen=True, slots=True)
class TokenIssuerFields:
    """An issuer whose JWTs a tenant accepts: exactly one of `jwks_url` and `public_key` (PEM)."""

    issuer: object
    audience: object
    jwks_url: object = ""
    public_key: object = ""
    algorithms: Sequence[object] = ALGORITHMS
    team_claim: object = "team"
    subject_claim: object = "sub"


def tenant_check(fields: TenantFields) -> list[FieldProblem]:
    """What is wrong with a tenant as `fields` describe it (empty: nothing)."""
    problems = _slug_problems("slug", "a tenant's slug", fields.slug)
    problems += _name_problems("name", fields.name, TENANT_NAME_MAX_LENGTH)
    if fields.audit_arguments not in Tenant.AuditArguments.values:
        problems.append(FieldProblem(
            "audit_arguments", f"audit_arguments must be one of {', '.join(Tenant.AuditArguments.values)}"))
    if fields.allow_private_networks is not None and not isinstance(fields.allow_private_networks, bool):
        problems.append(FieldProblem(
            "allow_private_networks", "allow_private_networks must be true, false or empty (the deployment's default)"))
    return problems


def team_check(*, slug: object) -> list[FieldProblem]:
    """What is wrong with a team's slug (empty: nothing)."""
    return _slug_problems("slug", "a team's slug", slug)


def api_key_check(fields: ApiKeyFields) -> list[FieldProblem]:
    """What is wrong with a key as `fields` describe it (empty: nothing). Scopes are a set: one
    given twice is kept once."""
    problems = _name_problems("name", fields.name, KEY_NAME_MAX_LENGTH)
    if isinstance(fields.name, str) and fields.name.startswith(CONSOLE_KEY_PREFIX):
        problems.append(FieldProblem("name", f"key names starting with {CONSOLE_KEY_PREFIX!r} are the console's test "
                                             "identities; choose another name"))
    scopes = fields.scopes
    if isinstance(scopes, (str, bytes)) or not isinstance(scopes, Sequence):
        problems.append(FieldProblem("scopes", "scopes must be a list of scopes"))
    else:
        bad = [scope for scope in scopes if not isinstance(scope, str) or not SCOPE_PATTERN.fullmatch(scope)]
        if bad:
            problems.append(FieldProblem(
                "scopes", f"a scope is 1-64 of A-Z a-z 0-9 _ . : / -, not {_shown(bad[0])}"))
    secret = fields.secret
    if secret is not None:
        problem = key_secret_problem(secret) if isinstance(secret, str) else "must be a string"
        if problem is not None:
            problems.append(FieldProblem("secret", f"the secret {problem}"))
    expires_at = fields.expires_at
    if expires_at is not None and (not isinstance(expires_at, datetime) or expires_at.tzinfo is None):
        problems.append(FieldProblem("expires_at", "expires_at must be a time with a timezone, or empty"))
    return problems


def plan_check(fields: PlanFields) -> list[FieldProblem]:
    """What is wrong with a plan as `fields` describe it (empty: nothing). Each cap is a whole
    number of units from 0, or None: no cap for that period."""
    problems = _slug_problems("name", "a plan's name", fields.name)
    problems += [
        FieldProblem(period, f"{period} must be a whole number from 0 to {PLAN_CAP_MAX}, or empty")
        for period, cap in (("daily", fields.daily), ("monthly", fields.monthly))
        # bool is an int subclass: `daily: true` would otherwise be read as 1.
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or not 0 <= cap <= PLAN_CAP_MAX)
    ]
    if not isinstance(fields.limits_editable, bool):
        problems.append(FieldProblem("limits_editable", "limits_editable must be true or false"))
    return problems


def token_issuer_check(fields: TokenIssuerFields, *, allow_private: bool, resolve: bool = True) -> list[FieldProblem]:
    """What is wrong with a token issuer as `fields` describe it (empty: nothing). `resolve`: judge
    the key set's host name by the addresses it resolves to now (a document is checked before it is
    applied: literal addresses only)."""
    problems: list[FieldProblem] = []
    for field, value in (("issuer", fields.issuer), ("audience", fields.audience)):
        if not isinstance(value, str) or not value or len(value) > _ISSUER_TEXT_MAX_LENGTH:
            problems.append(FieldProblem(field, f"{field} must be 1-{_ISSUER_TEXT_MAX_LENGTH} characters"))
    for field, value in (("team_claim", fields.team_claim), ("subject_claim", fields.subject_claim)):
        if not isinstance(value, str) or not value or len(value) > _CLAIM_MAX_LENGTH:
            problems.append(FieldProblem(field, f"{field} must be 1-{_CLAIM_MAX_LENGTH} characters"))
    algorithms = fields.algorithms
    if (isinstance(algorithms, (str, bytes)) or not isinstance(algorithms, Sequence) or not algorithms
            or any(alg not in ALGORITHMS for alg in algorithms) or len(set(algorithms)) != len(algorithms)):
        problems.append(FieldProblem(
            "algorithms", f"algorithms must be a list of one or more of {', '.join(ALGORITHMS)}, each once"))
        algorithms = ALGORITHMS
    jwks_url, public_key = fields.jwks_url, fields.public_key
    # null included: a key source not given is left out, not null.
    wrong_type = [FieldProblem(field, f"{field} must be a string")
                  for field, value in (("jwks_url", jwks_url), ("public_key", public_key)) if not isinstance(value, str)]
    if wrong_type:
        problems += wrong_type
    elif bool(jwks_url) == bool(public_key):
        problems.append(FieldProblem("jwks_url", "give exactly one of jwks_url and public_key"))
    elif jwks_url:
        problems += [FieldProblem("jwks_url", message) for message in _jwks_url_problems(jwks_url, allow_private, resolve)]
    elif len(public_key) > _PUBLIC_KEY_MAX_LENGTH:
        problems.append(FieldProblem("public_key", f"public_key must be a PEM public key of at most "
                                                   f"{_PUBLIC_KEY_MAX_LENGTH} characters"))
    else:
        try:
            usable = public_key_algorithms(public_key)
        except ValueError:  # not the library's message: it may quote the key
            problems.append(FieldProblem("public_key", "public_key is not a PEM public key "
                                                       "('-----BEGIN PUBLIC KEY----- ...')"))
        else:
            if not set(usable) & set(algorithms):  # type: ignore[arg-type]
                problems.append(FieldProblem("public_key", key_algorithms_problem(usable, algorithms)))  # type: ignore[arg-type]
    return problems


def _jwks_url_problems(url: str, allow_private: bool, resolve: bool) -> list[str]:
    wrong = [f"jwks_url must be an http:// or https:// URL of at most {_ISSUER_TEXT_MAX_LENGTH} characters"]
    if len(url) > _ISSUER_TEXT_MAX_LENGTH or not url.startswith(("https://", "http://")):
        return wrong
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return wrong
    if not parts.hostname or any(ch.isspace() for ch in url):
        return wrong
    try:
        url_address_validate(url, allow_private=allow_private, resolve=resolve)
    except ValidationError as error:
        return list(error.messages)
    return []


def public_key_algorithms(pem: str) -> tuple[str, ...]:
    """The accepted algorithms a PEM public key can verify (RS256 for RSA, ES256 for EC P-256,
    EdDSA for Ed25519; none for other keys). Raises ValueError when it is no PEM public key."""
    try:
        key = serialization.load_pem_public_key(pem.encode())
    except UnsupportedAlgorithm as exc:
        raise ValueError(str(exc)) from None
    if isinstance(key, rsa.RSAPublicKey):
        return ("RS256",)
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return ("ES256",)
    if isinstance(key, ed25519.Ed25519PublicKey):
        return ("EdDSA",)
    return ()


def key_algorithms_problem(usable: Sequence[str], algorithms: Sequence[str]) -> str:
    """Why a public key that can verify `usable` is no use for tokens signed with `algorithms`."""
    if not usable:
        return f"the public key is of a type none of {', '.join(ALGORITHMS)} uses (RSA, EC P-256 or Ed25519)"
    return f"the public key verifies {usable[0]} tokens, but algorithms lists only {', '.join(algorithms)}"


def _slug_problems(field: str, what: str, value: object) -> list[FieldProblem]:
    if isinstance(value, str) and slug_validator.regex.fullmatch(value):
        return []
    shown = f", not {_shown(value)}" if value not in ("", None) else ""
    return [FieldProblem(field, f"{what} is 1-{SLUG_MAX_LENGTH} lowercase letters, digits and inner hyphens{shown}")]


def _name_problems(field: str, value: object, max_length: int) -> list[FieldProblem]:
    if isinstance(value, str) and value.strip() and len(value) <= max_length:
        return []
    return [FieldProblem(field, f"{field} must be 1-{max_length} characters, not all spaces")]


def _shown(value: object) -> str:
    """A value as a refusal quotes it: a pasted page does not come back whole."""
    text = repr(value)
    return text if len(text) <= 70 else f"{text[:60]}…"
