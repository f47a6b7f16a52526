"""Bringing the database in line with a validated document, one entity at a time, through the
tenants, catalog and policies services (which also move each tenant's configuration version).

Internal to `config_apply`, which owns the transaction. Conflicts only the database can reveal
(a secret another key already uses, a revoked key the file names as active) are collected as
problems with the document path; the caller then rolls everything back."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.core.exceptions import ValidationError

from apps.catalog.models import Backend, VirtualHost
from apps.catalog.selectors import backend_list, virtual_host_list
from apps.catalog.services import (
    ToolTarget,
    backend_delete,
    mount_delete,
    mount_set,
    tool_alias_delete,
    tool_alias_set,
    virtual_host_create,
    virtual_host_delete,
    virtual_host_tool_search_set,
    virtual_host_update,
)
from apps.configuration.backends import backend_reconcile
from apps.configuration.budgets import budget_reconcile, budgets_prune, tool_costs_prune, tool_costs_reconcile
from apps.configuration.credentials import tenant_secret_reconcile, tenant_secrets_prune
from apps.configuration.curation import curation_prune, curation_reconcile
from apps.configuration.document import (
    BackendSpec,
    BudgetSpec,
    ConfigDocument,
    PlanSpec,
    PolicySpec,
    Problem,
    RateLimitSpec,
    TenantSpec,
    TokenIssuerSpec,
    ToolCostEntrySpec,
    VirtualHostSpec,
)
from apps.configuration.interceptors import interceptors_prune, interceptors_reconcile
from apps.configuration.issuers import token_issuer_reconcile, token_issuers_prune
from apps.configuration.limits import rate_limit_reconcile, rate_limits_prune
from apps.configuration.plans import plan_locks_newly, plan_reconcile, plans_prune
from apps.configuration.policies import policy_prune, policy_reconcile
from apps.configuration.reports import Action, Change, GeneratedSecret
from apps.configuration.sign_in import identity_provider_reconcile, sign_in_wanted
from apps.oauth.services import authorization_server_configure
from apps.tenants.keys import key_hash
from apps.tenants.models import ApiKey, Plan, Team, Tenant
from apps.tenants.selectors import api_key_list, team_list, tenant_get, tenant_list
from apps.tenants.services import (
    api_key_delete,
    api_key_issue,
    api_key_reissue,
    api_key_revoke,
    api_key_update,
    team_create,
    team_delete,
    tenant_create,
    tenant_delete,
    tenant_plan_set,
    tenant_private_networks_set,
    tenant_update,
)


class Reconciler:
    """One apply run. `run()` performs it; afterwards `changes`, `generated` and `problems` say
    what happened. Must be called inside a transaction the caller rolls back on problems."""

    def __init__(self, *, document: ConfigDocument, prune: bool, base_dir: Path | None = None) -> None:
        self.document = document
        self.base_dir = base_dir  # where relative spec paths start; None: the working directory
        self.uploaded: list[int] = []  # spec versions queued for compilation
        self.prune = prune
        self.changes: list[Change] = []
        self.generated: list[GeneratedSecret] = []
        self.problems: list[Problem] = []
        self._tenants: dict[str, Tenant] = {}
        self._teams: dict[str, dict[str, Team]] = {}
        self._keys: dict[str, dict[str, ApiKey]] = {}
        self._backends: dict[tuple[str, str], Backend] = {}
        self._plans: dict[str, Plan] = {}
        self._plans_later: list[tuple[Tenant, str, str]] = []  # (tenant, locking plan's name, path)

    def run(self) -> None:
        # Order matters: keys need teams, mounts need backends, vhosts need keys, policies need
        # vhosts and the teams and keys their rules name, rate limits the teams and keys they
        # limit, token issuers only their tenant; pruning runs last and from the leaves up,
        # because mounts PROTECT backends and anonymous keys.
        # Plans: whatever lets a tenant edit its limits (a plan unlocked, a tenant moved to a plan
        # that allows editing) is written before the limits, whatever forbids it after them. So an
        # apply refuses a change to a tenant's limits only when its plan forbids editing them both
        # before and after the apply; moving tenants between plans is a platform admin's act.
        locking = [(i, plan) for i, plan in enumerate(self.document.plans) if plan_locks_newly(spec=plan)]
        for i, plan in enumerate(self.document.plans):
            if (i, plan) not in locking:
                self._plan(plan, f"plans[{i}]")
        for i, spec in enumerate(self.document.tenants):
            self._tenant(spec, f"tenants[{i}]")
        for i, issuer in enumerate(self.document.token_issuers):  # before the credentials that exchange its tokens
            self._tenant_part(issuer, f"token_issuers[{i}]", token_issuer_reconcile)
        for i, spec in enumerate(self.document.backends):
            self._backend(spec, f"backends[{i}]")
        kept_hosts: dict[str, set[str]] = {}
        for i, spec in enumerate(self.document.virtual_hosts):
            kept_hosts.setdefault(spec.tenant, set()).add(spec.slug)
            self._virtual_host(spec, f"virtual_hosts[{i}]")
        for i, policy in enumerate(self.document.policies):
            self._policy(policy, f"policies[{i}]")
        for i, limit in enumerate(self.document.rate_limits):
            self._tenant_part(limit, f"rate_limits[{i}]", rate_limit_reconcile)
        for i, budget in enumerate(self.document.budgets):
            self._tenant_part(budget, f"budgets[{i}]", budget_reconcile)
        self._tool_costs()
        if self.prune and not self.problems:
            with self._reporting("(prune)"):
                self._prune(kept_hosts)
        for i, plan in locking:
            self._plan(plan, f"plans[{i}]")
        for tenant, name, path in self._plans_later:
            if name in self._plans:  # else the plan failed, which is reported
                with self._reporting(path):
                    tenant_plan_set(tenant=tenant, plan=self._plans[name])
        if self.prune and not self.problems:
            with self._reporting("(prune)"):
                self.changes.extend(plans_prune(specs=self.document.plans))  # no tenant is on them now

    # --- bookkeeping ---------------------------------------------------------------------------
    def _record(self, action: Action, kind: str, name: str, details: list[str] | None = None) -> None:
        self.changes.append(Change(action=action, kind=kind, name=name, detail=", ".join(details or [])))

    @contextmanager
    def _reporting(self, path: str) -> Iterator[None]:
        """Turn a service's ValidationError into a problem at `path` and carry on."""
        try:
            yield
        except ValidationError as error:
            self.problems.extend(Problem(path, message) for message in error.messages)

    # --- tenants, teams, keys ------------------------------------------------------------------
    def _tenant(self, spec: TenantSpec, path: str) -> None:
        tenant = tenant_get(slug=spec.slug)
        with self._reporting(path):
            details = []
            created = tenant is None
            if tenant is None:
                tenant = tenant_create(slug=spec.slug, name=spec.name)
            elif tenant.name != spec.name:
                tenant_update(tenant=tenant, name=spec.name)
                details.append("name")
            if (tenant.plan.name if tenant.plan else None) != spec.plan:
                details.append(f"plan {spec.plan}" if spec.plan else "plan removed")
                wanted = next((plan for plan in self.document.plans if plan.name == spec.plan), None)
                if wanted is not None and not wanted.limits_editable:
                    self._plans_later.append((tenant, wanted.name, path))  # after the limits (see `run`)
                elif wanted is None or wanted.name in self._plans:  # else the plan failed, which is reported
                    tenant_plan_set(tenant=tenant, plan=self._plans[wanted.name] if wanted else None)
            if tenant.allow_private_networks is not spec.allow_private_networks:
                private = spec.allow_private_networks
                details.append("private networks " + ("default" if private is None else "allowed" if private else "refused"))
                tenant_private_networks_set(tenant=tenant, allowed=private)
            wanted = sign_in_wanted(tenant, spec.sign_in) if spec.sign_in is not None else None
            if wanted is not None:
                details.append("sign-in " + ("on" if wanted.enabled else "off"))
                authorization_server_configure(
                    tenant=tenant, enabled=wanted.enabled, allow_registration=wanted.registration,
                    allow_metadata_documents=wanted.metadata_documents)
            action = Action.CREATED if created else Action.UPDATED if details else Action.UNCHANGED
            self._record(action, "tenant", spec.slug, details)
            self._tenants[spec.slug] = tenant
        if spec.slug not in self._tenants:
            return
        if spec.identity_provider is not None:
            # Its own path: the provider is asked for its metadata, and an answer it gives is its problem.
            with self._reporting(f"{path}.identity_provider"):
                changed = identity_provider_reconcile(tenant=tenant, spec=spec.identity_provider)
                self._record(Action.UNCHANGED if changed is None else Action.DELETED if "removed" in changed
                             else Action.UPDATED, "identity_provider", spec.slug)
        teams = {team.slug: team for team in team_list(tenant=tenant)}
        for j, slug in enumerate(spec.teams):
            name = f"{spec.slug}/{slug}"
            if slug in teams:
                self._record(Action.UNCHANGED, "team", name)
                continue
            with self._reporting(f"{path}.teams[{j}]"):
                teams[slug] = team_create(tenant=tenant, slug=slug)
                self._record(Action.CREATED, "team", name)
        self._teams[spec.slug] = teams
        self._keys[spec.slug] = {key.name: key for key in api_key_list(tenant=tenant)}
        for j in range(len(spec.keys)):
            with self._reporting(f"{path}.keys[{j}]"):
                self._key(tenant, spec, j, path)
        for j, secret in enumerate(spec.secrets or ()):  # before the backends whose credentials use them
            with self._reporting(f"{path}.secrets[{j}]"):
                self.changes.append(tenant_secret_reconcile(tenant=tenant, spec=secret))

    def _key(self, tenant: Tenant, tenant_spec: TenantSpec, index: int, tenant_path: str) -> None:
        spec = tenant_spec.keys[index]
        name = f"{tenant.slug}/{spec.name}"
        team = self._teams[tenant.slug].get(spec.team) if spec.team else None
        key = self._keys[tenant.slug].get(spec.name)
        if key is None:
            issued = api_key_issue(
                tenant=tenant, name=spec.name, team=team, secret=spec.secret, expires_at=spec.expires_at,
                scopes=spec.scopes or (),
            )
            self._keys[tenant.slug][spec.name] = issued.api_key
            details = []
            if spec.revoked:
                api_key_revoke(api_key=issued.api_key)
                details.append("revoked")
            elif spec.secret is None:
                self.generated.append(GeneratedSecret(tenant=tenant.slug, key=spec.name, secret=issued.secret))
                details.append("secret generated")
            self._record(Action.CREATED, "key", name, details)
            return
        if key.revoked_at is not None and not spec.revoked:
            self.problems.append(
                Problem(
                    f"{tenant_path}.keys[{index}]",
                    f"key {spec.name!r} is revoked and revocation cannot be undone: "
                    "add `revoked: true`, or use a new key name",
                )
            )
            return
        details = []
        if key.team_id != (team.pk if team else None):
            details.append("team")
        if key.expires_at != spec.expires_at:
            details.append("expires_at")
        if spec.scopes is not None and tuple(sorted(key.scopes or ())) != spec.scopes:
            details.append("scopes")
        if details:
            api_key_update(api_key=key, team=team, expires_at=spec.expires_at, scopes=spec.scopes)
        # A file without a secret keeps whatever secret the key has (exports carry none); a file
        # with one is the truth. A revoked key is never given a working secret again.
        if spec.secret is not None and key.revoked_at is None and key_hash(spec.secret) != key.secret_hash:
            api_key_reissue(api_key=key, secret=spec.secret)
            details.append("secret re-issued")
        if spec.revoked and key.revoked_at is None:
            api_key_revoke(api_key=key)
            details.append("revoked")
        self._record(Action.UPDATED if details else Action.UNCHANGED, "key", name, details)

    # --- backends --------------------------------------------------------------------------------
    def _backend(self, spec: BackendSpec, path: str) -> None:
        tenant = self._tenants.get(spec.tenant)
        if tenant is None:
            return
        with self._reporting(path):
            backend, change = backend_reconcile(
                tenant=tenant, spec=spec, base_dir=self.base_dir, uploaded=self.uploaded
            )
            self.changes.append(change)
            self._backends[(spec.tenant, spec.name)] = backend

    # --- virtual hosts -------------------------------------------------------------------------
    def _virtual_host(self, spec: VirtualHostSpec, path: str) -> None:
        tenant = self._tenants.get(spec.tenant)
        if tenant is None:
            return
        name = f"{spec.tenant}/{spec.slug}"
        anonymous_key = self._keys[spec.tenant].get(spec.anonymous_key) if spec.anonymous_key else None
        if spec.anonymous_key and anonymous_key is None:
            return  # the key failed to be issued; that problem is already reported
        host = virtual_host_list(tenant=tenant).filter(slug=spec.slug).first()
        with self._reporting(path):
            if host is None:
                host = virtual_host_create(
                    tenant=tenant, slug=spec.slug, allow_anonymous=spec.allow_anonymous, anonymous_key=anonymous_key
                )
                if (wanted := _tool_search(spec, host)) != (host.tool_search, host.tool_search_name):
                    virtual_host_tool_search_set(virtual_host=host, mode=wanted[0], name=wanted[1])
                self._record(Action.CREATED, "virtual_host", name)
            else:
                details = []
                if host.allow_anonymous != spec.allow_anonymous:
                    details.append("allow_anonymous")
                if host.anonymous_key_id != (anonymous_key.pk if anonymous_key else None):
                    details.append("anonymous_key")
                if details:
                    virtual_host_update(
                        virtual_host=host, allow_anonymous=spec.allow_anonymous, anonymous_key=anonymous_key
                    )
                if (wanted := _tool_search(spec, host)) != (host.tool_search, host.tool_search_name):
                    virtual_host_tool_search_set(virtual_host=host, mode=wanted[0], name=wanted[1])
                    details.append("tool_search")
                self._record(Action.UPDATED if details else Action.UNCHANGED, "virtual_host", name, details)
        if host is None:
            return
        self._mounts_and_aliases(host, spec, path)
        with self._reporting(f"{path}.tools"):
            self.changes.extend(curation_reconcile(
                host=host, rules=spec.tool_rules, descriptions=spec.tool_descriptions, name=f"{spec.tenant}/{spec.slug}"))
        if spec.interceptors is not None:
            with self._reporting(f"{path}.interceptors"):
                self.changes.extend(interceptors_reconcile(host=host, specs=spec.interceptors,
                                                           name=f"{spec.tenant}/{spec.slug}"))

    def _mounts_and_aliases(self, host: VirtualHost, spec: VirtualHostSpec, path: str) -> None:
        prefix = f"{spec.tenant}/{spec.slug}"
        mounts = {mount.map_key: mount for mount in host.mounts.select_related("backend")}
        for mount_spec in spec.mounts:
            backend = self._backends.get((spec.tenant, mount_spec.backend))
            if backend is None:
                continue  # the backend failed; already reported
            current = mounts.get(mount_spec.map_key)
            name = f"{prefix}:{mount_spec.map_key}"
            if current is not None and current.backend_id == backend.pk:
                self._record(Action.UNCHANGED, "mount", name, [mount_spec.backend])
                continue
            with self._reporting(f"{path}.backends.{mount_spec.map_key}"):
                mount_set(virtual_host=host, map_key=mount_spec.map_key, backend=backend)
                action = Action.CREATED if current is None else Action.UPDATED
                self._record(action, "mount", name, [mount_spec.backend])
        aliases = {alias.alias: alias for alias in host.tool_aliases.all()}
        for alias_spec in spec.tool_aliases:
            current_alias = aliases.get(alias_spec.alias)
            name = f"{prefix} {alias_spec.alias}"
            target = f"{alias_spec.map_key}:{alias_spec.upstream_name}"
            if current_alias is not None and (current_alias.map_key, current_alias.upstream_name) == (
                alias_spec.map_key, alias_spec.upstream_name,
            ):
                self._record(Action.UNCHANGED, "alias", name, [target])
                continue
            with self._reporting(f"{path}.tool_aliases.{alias_spec.alias}"):
                tool_alias_set(
                    virtual_host=host, alias=alias_spec.alias,
                    target=ToolTarget(map_key=alias_spec.map_key, upstream_name=alias_spec.upstream_name),
                )
                action = Action.CREATED if current_alias is None else Action.UPDATED
                self._record(action, "alias", name, [target])

    def _policy(self, spec: PolicySpec, path: str) -> None:
        tenant = self._tenants.get(spec.tenant)
        host = virtual_host_list(tenant=tenant).filter(slug=spec.virtual_host).first() if tenant else None
        if host is None:
            return  # the tenant or the host failed; that problem is already reported
        with self._reporting(path):
            self.changes.append(policy_reconcile(virtual_host=host, spec=spec))

    def _plan(self, spec: PlanSpec, path: str) -> None:
        with self._reporting(path):
            self._plans[spec.name], change = plan_reconcile(spec=spec)
            self.changes.append(change)

    def _tool_costs(self) -> None:
        """Each virtual host's tool costs, its entries in the order written; a problem is reported
        at the host's first entry."""
        hosts: dict[tuple[str, str], tuple[int, list[ToolCostEntrySpec]]] = {}
        for i, entry in enumerate(self.document.tool_costs):
            hosts.setdefault((entry.tenant, entry.virtual_host), (i, []))[1].append(entry)
        for (tenant_slug, slug), (first, entries) in hosts.items():
            tenant = self._tenants.get(tenant_slug)
            host = virtual_host_list(tenant=tenant).filter(slug=slug).first() if tenant else None
            if host is None:
                continue  # the tenant or the host failed; that problem is already reported
            with self._reporting(f"tool_costs[{first}]"):
                self.changes.append(tool_costs_reconcile(virtual_host=host, specs=tuple(entries)))

    def _tenant_part(
        self, spec: RateLimitSpec | TokenIssuerSpec | BudgetSpec, path: str, reconcile: Callable[..., Change]
    ) -> None:
        """A section entry that belongs to a tenant (rate limits, token issuers, budgets)."""
        tenant = self._tenants.get(spec.tenant)
        if tenant is None:
            return  # the tenant failed; that problem is already reported
        with self._reporting(path):
            self.changes.append(reconcile(tenant=tenant, spec=spec))

    # --- prune ---------------------------------------------------------------------------------
    def _prune(self, kept_hosts: dict[str, set[str]]) -> None:
        """Delete what the document no longer names, leaves first. A tenant the document does not
        name goes with everything it owns (reported as the one tenant deletion)."""
        with_policy = {(p.tenant, p.virtual_host) for p in self.document.policies}
        with_costs = {(c.tenant, c.virtual_host) for c in self.document.tool_costs}
        for spec in self.document.virtual_hosts:
            host = virtual_host_list(tenant=self._tenants[spec.tenant]).filter(slug=spec.slug).first()
            prefix = f"{spec.tenant}/{spec.slug}"
            self.changes.extend(curation_prune(
                host=host, rules=spec.tool_rules, descriptions=spec.tool_descriptions, name=prefix))
            named_aliases = {a.alias for a in spec.tool_aliases}
            for alias in host.tool_aliases.all():
                if alias.alias not in named_aliases:
                    tool_alias_delete(tool_alias=alias)
                    self._record(Action.DELETED, "alias", f"{prefix} {alias.alias}")
            named_mounts = {m.map_key for m in spec.mounts}
            for mount in host.mounts.all():
                if mount.map_key not in named_mounts:
                    mount_delete(mount=mount)
                    self._record(Action.DELETED, "mount", f"{prefix}:{mount.map_key}")
            if spec.interceptors is None and (change := interceptors_prune(host=host, name=prefix)):
                self.changes.append(change)
            if (spec.tenant, spec.slug) not in with_policy and (change := policy_prune(virtual_host=host, name=prefix)):
                self.changes.append(change)
            if (spec.tenant, spec.slug) not in with_costs and (
                change := tool_costs_prune(virtual_host=host, name=prefix)
            ):
                self.changes.append(change)
        named_backends = {(b.tenant, b.name) for b in self.document.backends}
        for spec in self.document.tenants:
            tenant = self._tenants[spec.slug]
            self.changes.extend(rate_limits_prune(tenant=tenant, specs=self.document.rate_limits))
            self.changes.extend(budgets_prune(tenant=tenant, specs=self.document.budgets))
            self.changes.extend(token_issuers_prune(tenant=tenant, specs=self.document.token_issuers))
            for host in virtual_host_list(tenant=tenant):
                if host.slug not in kept_hosts.get(spec.slug, set()):
                    virtual_host_delete(virtual_host=host)
                    self._record(Action.DELETED, "virtual_host", f"{spec.slug}/{host.slug}")
            for backend in backend_list(tenant=tenant):
                if (spec.slug, backend.name) not in named_backends:
                    backend_delete(backend=backend)
                    self._record(Action.DELETED, "backend", f"{spec.slug}/{backend.name}")
            if spec.secrets is not None:  # after the backends: a deleted one no longer uses its secret
                self.changes.extend(tenant_secrets_prune(tenant=tenant, specs=spec.secrets))
            named_keys = {k.name for k in spec.keys}
            for key in api_key_list(tenant=tenant):
                if key.name not in named_keys:
                    api_key_delete(api_key=key)
                    self._record(Action.DELETED, "key", f"{spec.slug}/{key.name}")
            for team in team_list(tenant=tenant):
                if team.slug not in spec.teams:
                    team_delete(team=team)
                    self._record(Action.DELETED, "team", f"{spec.slug}/{team.slug}")
        for tenant in tenant_list():
            if tenant.slug not in self._tenants:
                tenant_delete(tenant=tenant)
                self._record(Action.DELETED, "tenant", tenant.slug, ["with everything it owns"])


def _tool_search(spec: VirtualHostSpec, host: VirtualHost) -> tuple[str, str]:
    """The mode and name the document asks of `host`: what it leaves out, the host keeps."""
    return (spec.tool_search or host.tool_search, spec.tool_search_name or host.tool_search_name)
