"""Read-side of access policies and limits: the compiled policy and tool costs of a virtual host, the
tools a host exposes as the catalog knows them (for the warning on rules that name none of them,
and the simulator), the effective budgets of a tenant, the policy simulator, what the console and
the API list, and the current use of rate limits and budgets (read from the gateway limiter's
Redis counters)."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import redis
from django.db.models import Count, Prefetch, QuerySet

from apps.catalog.models import Backend, Tool, VirtualHost
from apps.catalog.selectors import virtual_host_naming_get
from apps.common.redis import redis_client
from apps.common.secrets import secret_decrypt
from apps.kernel.costs import ToolCosts, ToolCostSpec, call_cost, tool_costs_compile
from apps.kernel.identity import Budget, Limit, Principal
from apps.kernel.interceptors import (
    InterceptorError,
    Interceptors,
    InterceptorSpec,
    Trial,
    interceptors_compile,
    interceptors_refusing,
    interceptors_try,
)
from apps.kernel.names import Naming
from apps.kernel.policy import ConditionError, Policy, PolicyError, RuleSpec, patterns_unmatched, policy_compile
from apps.policies.counters import bucket_key, budget_key
from apps.policies.models import AccessPolicy, AccessRule, Interceptor, RateLimit, ToolCost
from apps.policies.models import Budget as StoredBudget
from apps.retrieval.models import IndexedTool
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


def interceptor_specs_list(*, virtual_host: VirtualHost) -> list[InterceptorSpec]:
    """The host's interceptors as configured, in order (prefetched `interceptors__secret` are used);
    a webhook's `secret` setting names its tenant secret."""
    return [_spec(row) for row in virtual_host.interceptors.all()]


def _spec(row: Interceptor) -> InterceptorSpec:
    settings = dict(row.settings)
    if row.secret is not None:
        settings["secret"] = row.secret.name
    return InterceptorSpec(row.name, row.kind, tuple(row.phases), tuple(row.methods), tuple(row.targets), settings,
                           row.enabled)


def interceptors_compiled(*, virtual_host: VirtualHost, allow_private: bool) -> Interceptors | None:
    """The host's enabled interceptors, compiled (prefetched `interceptors__secret` are used); None
    when it has none. They are checked when set, so one that no longer compiles (a detector library
    upgrade) is a bug: the host then refuses every call it would have inspected rather than let
    through what it was told to stop."""
    rows = list(virtual_host.interceptors.all())
    if not rows:
        return None
    keys = {row.secret.name: secret_decrypt(row.secret.value).encode() for row in rows if row.secret is not None}
    try:
        return interceptors_compile([_spec(row) for row in rows], keys=keys, allow_private=allow_private)
    except InterceptorError as exc:
        log.error("virtual host %s: interceptors do not compile, refusing its calls: %s", virtual_host, exc)
        return interceptors_refusing(f"the host's interceptors cannot run ({exc}); an administrator must fix them")


# --- The tools a host exposes, as the catalog knows them ----------------------------------------


@dataclass(frozen=True, slots=True)
class HostTools:
    """The tools a virtual host exposes as the catalog knows them, without asking any backend: an
    OpenAPI backend's are its active spec's compiled tools, an MCP backend's those the tool index
    holds. `tools`: (exposed name, upstream name) of each, named by the host's naming; `upstream`:
    map key -> its backend's tool names; `unknown`: map key -> why that backend's tools are not
    known (an OpenAPI backend without a compiled spec, an MCP backend the index holds nothing of)."""

    naming: Naming
    tools: tuple[tuple[str, str], ...]
    upstream: dict[str, frozenset[str]]
    unknown: dict[str, str]


def host_tools_known(*, virtual_host: VirtualHost) -> HostTools:
    """What `HostTools` says of `virtual_host`: names as the gateway's naming contract gives them
    (mounts, aliases and the host's tool curation; a tool it does not serve is not exposed)."""
    naming = virtual_host_naming_get(virtual_host=virtual_host)
    mounts = list(virtual_host.mounts.select_related("backend").order_by("map_key"))
    specs = [m.backend.active_spec_id for m in mounts if m.backend.kind == Backend.Kind.OPENAPI]
    mcp = [m.backend_id for m in mounts if m.backend.kind != Backend.Kind.OPENAPI]
    names: dict[int, set[str]] = {}
    rows = Tool.objects.filter(spec_version_id__in=[spec for spec in specs if spec is not None])
    for backend_id, name in rows.values_list("backend_id", "name"):
        names.setdefault(backend_id, set()).add(name)
    for backend_id, name in IndexedTool.objects.filter(backend_id__in=mcp).values_list("backend_id", "name"):
        names.setdefault(backend_id, set()).add(name)
    tools: list[tuple[str, str]] = []
    upstream: dict[str, frozenset[str]] = {}
    unknown: dict[str, str] = {}
    for mount in mounts:
        backend = mount.backend
        where = f"backend {backend.name!r} (mount {mount.map_key!r})"
        if backend.kind == Backend.Kind.OPENAPI and backend.active_spec_id is None:
            unknown[mount.map_key] = f"{where} has no compiled OpenAPI spec yet"
            continue
        if backend.kind != Backend.Kind.OPENAPI and backend.pk not in names:
            unknown[mount.map_key] = (f"the tools of MCP {where} are not known: the tool index holds none of them "
                                      "(not indexed yet, or indexing is off)")
            continue
        upstream[mount.map_key] = frozenset(names.get(backend.pk, ()))
        tools.extend((exposed, name) for name in sorted(upstream[mount.map_key])
                     for exposed in naming.tool_names(mount.map_key, name))
    return HostTools(naming, tuple(tools), upstream, unknown)


def access_rules_unmatched(*, virtual_host: VirtualHost, rules: Sequence[RuleSpec]) -> list[str]:
    """A warning for each rule of `rules` that is new, or names other tools than the stored rule of
    its id, and has a pattern that names no tool of the host as the catalog knows them
    (`host_tools_known`); where a backend's tools are not known, the warning says so rather than
    claim the pattern names nothing. Rules as they were stored are not warned about again."""
    stored = AccessRule.objects.filter(policy__virtual_host=virtual_host).values_list("rule_id", "tools")
    before = {(rule_id, frozenset(tools)) for rule_id, tools in stored}
    changed = [rule for rule in rules if (rule.id, frozenset(rule.tools)) not in before]
    if not changed:
        return []
    known = host_tools_known(virtual_host=virtual_host)
    warnings = []
    for rule in changed:
        unmatched = patterns_unmatched(tuple(rule.tools), known.tools)
        if not unmatched:
            continue
        names = ", ".join(repr(pattern) for pattern in unmatched)
        verb = "matches" if len(unmatched) == 1 else "match"
        if known.unknown:
            warnings.append(
                f"rule {rule.id!r}: {names} {verb} no tool of virtual host {virtual_host.slug!r} that the catalog "
                f"knows; {'; '.join(known.unknown.values())}: it may name one of those"
            )
        else:
            has = f"its {len(known.tools)} tools" if known.tools else "it has none"
            warnings.append(
                f"rule {rule.id!r}: {names} {verb} no tool of virtual host {virtual_host.slug!r} ({has}, as the "
                "catalog knows them): the rule does nothing for such a name until the host has such a tool"
            )
    return warnings


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
    """What the gateway would do with one call: whether the tool is listed for the caller, whether
    the call passes, which rule decided (None: the default, or no policy), the upstream target, and
    the budget units the call would cost (0 when the rules refuse it; rate limits and budgets, which
    depend on what was spent, are not consulted). `hidden_by`: for a tool the caller does not see,
    the rule that hides it (None when no rule allows it and the default is deny).

    `tool_known`: whether the host exposes the tool as the catalog knows its backends' tools
    (False: an unknown tool, whatever the rules say; None: its backend's tools are not known, and
    `tools_note` says why). `condition_errors`: the conditions that could not be evaluated with
    these arguments, and how each counted."""

    listed: bool
    allowed: bool
    rule: str | None
    reason: str
    map_key: str | None
    upstream_name: str | None
    cost: int = 0
    hidden_by: str | None = None
    tool_known: bool | None = True
    tools_note: str = ""
    condition_errors: tuple[ConditionError, ...] = ()


@dataclass(frozen=True, slots=True)
class SimulatedToken:
    """A JWT access token as the simulator's caller: its subject, the tenant's team its claims name
    (None: none the tenant knows) and its scopes. Access rules never name a token's issuer, so
    none is asked for; a rule for a key never applies to a token."""

    subject: str
    team: str | None = None
    scopes: tuple[str, ...] = ()


_SIMULATED_ISSUER = "simulator"


def _simulated_principal(tenant: Tenant, key: ApiKey | None, token: SimulatedToken | None) -> Principal:
    if key is not None:
        return Principal(
            tenant_id=key.tenant_id, tenant_slug=tenant.slug, key_id=key.pk, key_name=key.name,
            team=key.team.slug if key.team else None, scopes=tuple(key.scopes or ()),
        )
    if token is None:
        raise ValueError("give a key or a token")
    return Principal(
        tenant_id=tenant.pk, tenant_slug=tenant.slug, key_id=-1, key_name=token.subject, team=token.team,
        issuer=_SIMULATED_ISSUER, scopes=token.scopes,
    )


def access_decision_simulate(
    *,
    virtual_host: VirtualHost,
    tool: str,
    arguments: Mapping[str, Any],
    key: ApiKey | None = None,
    token: SimulatedToken | None = None,
) -> Simulation:
    """The policy simulator (for the console and the API): `key` (one of the host's tenant's keys)
    or `token` calls the exposed tool `tool` with `arguments`. Decided from the configuration and
    the tools the catalog knows (`host_tools_known`); no backend is asked."""
    known = host_tools_known(virtual_host=virtual_host)
    target = known.naming.route_tool(tool)
    unknown = "unknown tool: a call is answered -32602 Unknown tool, whatever the rules say"
    if target is None:
        return Simulation(False, False, None, f"{unknown}; {tool!r} names no tool of this virtual host", None, None,
                          tool_known=False)
    map_key, upstream = target
    note = known.unknown.get(map_key, "")
    if not note and upstream not in known.upstream.get(map_key, frozenset()):
        reason = (f"{unknown}; {tool!r} would route to {upstream!r} on mount {map_key!r}, but its backend has no "
                  "such tool (as the catalog knows its tools)")
        return Simulation(False, False, None, reason, *target, tool_known=False)
    facts: dict[str, Any] = {"tool_known": None if note else True,
             "tools_note": f"{note}: whether it has {upstream!r} was not checked" if note else ""}
    principal = _simulated_principal(virtual_host.tenant, key, token)
    current = VirtualHost.objects.prefetch_related("access_policy__rules", "tool_costs").get(pk=virtual_host.pk)
    policy = access_policy_compiled(virtual_host=current)
    cost = call_cost(tool_costs_compiled(virtual_host=current), "tools/call", tool, upstream)
    if policy is None:
        return Simulation(True, True, None, "allowed: the virtual host has no access policy", *target, cost, **facts)
    errors: list[ConditionError] = []
    decision = policy.decide(principal, tool, upstream, arguments, errors)
    facts["condition_errors"] = tuple(errors)
    if not policy.visible(principal, tool, upstream):
        # Hidden: any call is refused, by the rule (or the default) that refuses it with these arguments.
        by = f"rule {decision.rule!r}" if decision.rule else "the default (deny), no rule allowing it"
        reason = f"hidden from this caller by {by}: a call is answered as an unknown tool"
        return Simulation(False, False, None, reason, *target, hidden_by=decision.rule, **facts)
    cost = cost if decision.allowed else 0
    return Simulation(True, decision.allowed, decision.rule, decision.reason, *target, cost, **facts)


# --- What the console and the API list ---------------------------------------------------------


def policy_virtual_host_get(*, tenant: Tenant, virtual_host_id: int) -> VirtualHost | None:
    """One of the tenant's virtual hosts, its policy's rules (in order) and tool costs prefetched;
    None when the tenant has no host with that id."""
    return (
        VirtualHost.objects.filter(tenant=tenant, pk=virtual_host_id)
        .select_related("tenant", "access_policy")
        .prefetch_related(
            Prefetch("access_policy__rules", queryset=AccessRule.objects.order_by("position")),
            Prefetch("tool_costs", queryset=ToolCost.objects.order_by("position")),
        )
        .first()
    )


def policy_virtual_host_list(*, tenant: Tenant) -> QuerySet[VirtualHost]:
    """The tenant's virtual hosts by slug, each with `rule_count` and `tool_cost_count` and its
    policy's default (`access_policy`, selected along; None without a policy)."""
    return (
        VirtualHost.objects.filter(tenant=tenant)
        .select_related("access_policy")
        .annotate(
            rule_count=Count("access_policy__rules", distinct=True),
            tool_cost_count=Count("tool_costs", distinct=True),
        )
        .order_by("slug")
    )


def access_rules_of(*, virtual_host: VirtualHost) -> tuple[str | None, list[RuleSpec]]:
    """The host's policy as (default, rules in order); (None, []) when it has none. Reads the
    prefetched rules of `policy_virtual_host_get`."""
    try:
        stored = virtual_host.access_policy
    except AccessPolicy.DoesNotExist:
        return None, []
    rules = [
        RuleSpec(rule.rule_id, rule.subject_kind, rule.subject_name, rule.effect, tuple(rule.tools), rule.condition)
        for rule in stored.rules.all()
    ]
    return stored.default_effect, rules


def tool_costs_of(*, virtual_host: VirtualHost) -> list[ToolCostSpec]:
    """The host's tool costs in order (prefetched by `policy_virtual_host_get`)."""
    return [ToolCostSpec(tuple(entry.tools), entry.cost) for entry in virtual_host.tool_costs.all()]


def rate_limit_list(*, tenant: Tenant) -> QuerySet[RateLimit]:
    return RateLimit.objects.filter(tenant=tenant).order_by("scope", "name")


def budget_list(*, tenant: Tenant) -> QuerySet[StoredBudget]:
    return StoredBudget.objects.filter(tenant=tenant).order_by("scope", "name")


# --- Current usage, read from the limiter's Redis counters (apps/gateway/adapters/redis_rate_limiter.py) -----------------


@dataclass(frozen=True, slots=True)
class RateUsage:
    """How much of a rate limit is in use now: `used` of `limit` calls (GCRA: the calls whose
    slots have not yet been given back), and seconds until a burst of the whole limit passes again.
    `checked` False: Redis could not be read."""

    used: int
    limit: int
    full_in_seconds: float = 0.0
    checked: bool = True


@dataclass(frozen=True, slots=True)
class BudgetUsage:
    """Units spent in the current UTC day and month. `checked` False: Redis could not be read."""

    day: int
    month: int
    checked: bool = True


#: Redis's clock, then each KEY's value (no ARGV) or the named fields of each KEY's hash: one
#: script, so that the clock is the one of the node the counters live on (the limiter's clock).
_COUNTERS_READ = """
local out = {redis.call('TIME')}
for i, key in ipairs(KEYS) do
  if #ARGV == 0 then out[i + 1] = redis.call('GET', key) else out[i + 1] = redis.call('HMGET', key, unpack(ARGV)) end
end
return out
"""


def _counters_read(keys: Sequence[str], *, fields: Sequence[str]) -> list[Any]:
    """Redis's time and the counters at `keys`, all of one tenant (one hash tag: one slot)."""
    return redis_client().eval(_COUNTERS_READ, len(keys), *keys, *fields)


def rate_limit_usage(*, limits: Sequence[RateLimit]) -> dict[int, RateUsage]:
    """The current use of each stored limit, by its id, in one Redis round trip. The bucket holds
    its "theoretical arrival time" (`limits._ADMIT`): how far it lies ahead of now, in emission
    intervals (window / limit), is how many calls are counted."""
    if not limits:
        return {}
    keys = [bucket_key(Limit(row.tenant_id, row.scope, row.name, row.limit, row.window_seconds)) for row in limits]
    try:
        (seconds, micro), *values = _counters_read(keys, fields=())
    except (redis.RedisError, OSError) as exc:  # shown as unknown, not a 500
        log.warning("rate limit usage unreadable: %s", exc)
        return {row.pk: RateUsage(0, row.limit, checked=False) for row in limits}
    now = int(seconds) * 1_000_000 + int(micro)
    usage = {}
    for row, value in zip(limits, values, strict=True):
        ahead = max(0.0, float(value) - now) if value is not None else 0.0
        interval = row.window_seconds * 1_000_000 / row.limit
        used = min(row.limit, math.ceil(ahead / interval - 1e-9)) if ahead else 0
        usage[row.pk] = RateUsage(used, row.limit, round(ahead / 1_000_000, 3))
    return usage


def _day_number(moment: date) -> int:
    return (moment - date(1970, 1, 1)).days


def budget_usage(*, tenant: Tenant, subjects: Sequence[tuple[str, str]]) -> dict[tuple[str, str], BudgetUsage]:
    """Units each (scope, name) of `tenant` has spent this UTC day and month, in one Redis round
    trip. The limiter's hash per subject (`limits._ADMIT`) holds the day it last spent in (`d`,
    days since 1970-01-01) and what it spent that day (`du`), and the month likewise (`m`: the
    number of the month's first day; `mu`); a period other than the current one spent nothing yet."""
    if not subjects:
        return {}
    keys = [budget_key(Budget(tenant.pk, scope, name, None, None)) for scope, name in subjects]
    try:
        (seconds, _micro), *states = _counters_read(keys, fields=("d", "du", "m", "mu"))
    except (redis.RedisError, OSError) as exc:  # shown as unknown, not a 500
        log.warning("budget usage unreadable: %s", exc)
        return {subject: BudgetUsage(0, 0, checked=False) for subject in subjects}
    today = datetime.fromtimestamp(int(seconds), UTC).date()
    day, month = _day_number(today), _day_number(today.replace(day=1))
    usage = {}
    for subject, (d, du, m, mu) in zip(subjects, states, strict=True):
        spent_day = int(du) if d is not None and int(d) == day and du is not None else 0
        spent_month = int(mu) if m is not None and int(m) == month and mu is not None else 0
        usage[subject] = BudgetUsage(spent_day, spent_month)
    return usage


def interceptors_trial(*, virtual_host: VirtualHost, phase: str, method: str, target: str, value: Any) -> Trial:
    """The host's interceptors as stored, run over sample content (`kernel.interceptors.interceptors_try`)."""
    host = VirtualHost.objects.prefetch_related("interceptors__secret").select_related("tenant").get(pk=virtual_host.pk)
    chain = interceptors_compiled(virtual_host=host, allow_private=host.tenant.private_networks_allowed)
    return interceptors_try(chain, phase=phase, method=method, target=target, value=value)
