"""The pure validator: YAML text → `ConfigDocument`, or `ConfigInvalid` listing every problem.

No database and no I/O: every check here looks at the document alone (names, shapes, and references
between the document's own parts), using the models' field validators so that a document that
passes never fails on a field rule when it is applied."""

from __future__ import annotations

from typing import Any

import yaml
from django.core.exceptions import ValidationError

from apps.catalog.models import Backend, VirtualHost, map_key_validator, name_validator, tool_name_validator
from apps.catalog.services import DEFAULT_TIMEOUT_SECONDS, DEFAULT_TOOL_NAME_MAX_LENGTH
from apps.catalog.validators import (
    BackendFields,
    VirtualHostFields,
    backend_check,
    replica_url_validate,
    virtual_host_check,
)
from apps.common.url_guard import url_address_validate
from apps.configuration.budgets import budgets_check, tool_costs_check
from apps.configuration.credentials import credential_check, tenant_secrets_check
from apps.configuration.curation import curation_check
from apps.configuration.document import (
    AliasSpec,
    BackendSpec,
    ConfigDocument,
    ConfigInvalid,
    CredentialSpec,
    IdentityProviderSpec,
    KeySpec,
    MountSpec,
    PlanSpec,
    Problem,
    SignInSpec,
    TenantSpec,
    VirtualHostSpec,
)
from apps.configuration.fields import FieldChecks, private_networks_allowed
from apps.configuration.interceptors import interceptors_section_check
from apps.configuration.issuers import token_issuers_check
from apps.configuration.limits import rate_limits_check
from apps.configuration.plans import plans_check, tenant_plan_check
from apps.configuration.policies import policies_check
from apps.oauth.services import identity_provider_problems
from apps.tenants.models import slug_validator
from apps.tenants.validators import ApiKeyFields, TenantFields, api_key_check, team_check, tenant_check

TOP_LEVEL_KEYS = (
    "plans", "tenants", "backends", "virtual_hosts", "policies", "rate_limits", "budgets", "tool_costs",
    "token_issuers",
)
_TENANT_FIELDS = ("slug", "name", "teams", "keys", "plan", "secrets", "allow_private_networks", "sign_in",
                  "identity_provider")
_PROVIDER_FIELDS = ("issuer", "client_id", "client_secret", "client_secret_env", "scope", "label", "role")
_KEY_FIELDS = ("name", "team", "secret", "expires_at", "revoked", "scopes")
_BACKEND_FIELDS = (
    "tenant", "name", "kind", "transport", "urls", "timeout_seconds",
    "base_url", "spec", "credential", "tool_name_max_length", "include_deprecated", "max_concurrency",
    "allow_removals",
)
_OPENAPI_ONLY = ("base_url", "spec", "tool_name_max_length", "include_deprecated", "allow_removals")
_VHOST_FIELDS = (
    "tenant", "slug", "backends", "tool_aliases", "allow_anonymous", "anonymous_key", "tool_search", "tool_search_name",
    "tools", "interceptors",
)
_UPSTREAM_NAME_MAX_LENGTH = 128


def config_parse(text: str) -> ConfigDocument:
    """Parse and validate a YAML configuration document.

    Returns the typed document, or raises `ConfigInvalid` with every problem found (a YAML syntax
    error stops at that error, since nothing after it can be read reliably)."""
    try:
        raw = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(yaml)"
        raise ConfigInvalid([Problem(where, str(error.problem or error.context))]) from error
    except yaml.YAMLError as error:
        raise ConfigInvalid([Problem("(yaml)", str(error))]) from error
    return config_validate(raw)


def config_validate(raw: Any) -> ConfigDocument:
    """Validate an already-loaded document (plain dicts/lists/scalars); see `config_parse`."""
    checker = _Checker()
    document = checker.document(raw)
    if checker.problems:
        raise ConfigInvalid(checker.problems)
    return document


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys, which plain YAML silently overwrites."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
            seen.add(key)
        except TypeError:
            continue  # unhashable: construct_mapping reports it
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class _Checker(FieldChecks):
    """Walks the raw document once, collecting problems and building specs as it goes."""

    # --- the document ------------------------------------------------------------------------
    def document(self, raw: Any) -> ConfigDocument:
        if raw is None:
            return ConfigDocument()
        if not isinstance(raw, dict):
            self.add("(document)", f"must be a mapping with the keys {', '.join(TOP_LEVEL_KEYS)}")
            return ConfigDocument()
        for key in raw:
            if key not in TOP_LEVEL_KEYS:
                self.add(str(key), f"unknown top-level key (expected: {', '.join(TOP_LEVEL_KEYS)})")
        plans = plans_check(self, raw.get("plans"))
        tenants = self.tenants(raw.get("tenants"), plans)
        backends = self.backends(raw.get("backends"), tenants)
        virtual_hosts = self.virtual_hosts(raw.get("virtual_hosts"), tenants, backends)
        policies = policies_check(self, raw.get("policies"), tenants=tenants, virtual_hosts=virtual_hosts)
        rate_limits = rate_limits_check(self, raw.get("rate_limits"), tenants=tenants)
        token_issuers = token_issuers_check(self, raw.get("token_issuers"), tenants=tenants)
        budgets = budgets_check(self, raw.get("budgets"), tenants=tenants)
        tool_costs = tool_costs_check(self, raw.get("tool_costs"), tenants=tenants, virtual_hosts=virtual_hosts)
        return ConfigDocument(
            tenants=tuple(tenants.values()), backends=backends, virtual_hosts=virtual_hosts, policies=policies,
            rate_limits=rate_limits, token_issuers=token_issuers, plans=tuple(plans.values()), budgets=budgets,
            tool_costs=tool_costs,
        )

    def tenants(self, raw: Any, plans: dict[str, PlanSpec]) -> dict[str, TenantSpec]:
        tenants: dict[str, TenantSpec] = {}
        secrets: dict[str, str] = {}  # secret -> path of the key that first used it
        for i, item in enumerate(self.items(raw, "tenants")):
            path = f"tenants[{i}]"
            fields = self.mapping(item, path, fields=_TENANT_FIELDS, required=("slug", "name"))
            if fields is None:
                continue
            slug, name, private = fields.get("slug"), fields.get("name"), fields.get("allow_private_networks")
            wrong = self.refuse(path, tenant_check(TenantFields(
                slug=slug, name=name, allow_private_networks=private)), given=fields)
            slug = slug if isinstance(slug, str) else ""
            name = name if isinstance(name, str) else ""
            private = None if "allow_private_networks" in wrong else private
            teams: list[str] = []
            for j, team in enumerate(self.items(fields.get("teams"), f"{path}.teams")):
                team_path = f"{path}.teams[{j}]"
                if problems := team_check(slug=team):
                    self.add(team_path, problems[0].message)
                elif team in teams:
                    self.add(team_path, f"duplicate team {team!r}")
                else:
                    teams.append(team)
            keys = self.keys(fields.get("keys"), f"{path}.keys", teams, secrets)
            plan = tenant_plan_check(self, fields.get("plan"), f"{path}.plan", plans)
            shared = tenant_secrets_check(self, fields["secrets"], f"{path}.secrets") if "secrets" in fields else None
            sign_in = self.sign_in(fields["sign_in"], f"{path}.sign_in") if "sign_in" in fields else None
            provider = (self.identity_provider(fields["identity_provider"], f"{path}.identity_provider")
                        if "identity_provider" in fields else None)
            if slug in tenants:
                self.add(f"{path}.slug", f"duplicate tenant {slug!r}")
            elif slug:
                tenants[slug] = TenantSpec(
                    slug=slug, name=name, teams=tuple(teams), keys=tuple(keys), plan=plan, secrets=shared,
                    allow_private_networks=private, sign_in=sign_in, identity_provider=provider,
                )
        return tenants

    def sign_in(self, raw: Any, path: str) -> SignInSpec | None:
        """`true`/`false`, or a mapping of `registration` and `metadata_documents` (booleans): on."""
        if isinstance(raw, bool):
            return SignInSpec(enabled=raw)
        if not isinstance(raw, dict):
            self.add(path, "sign_in must be true, false, or a mapping of registration and metadata_documents")
            return None
        fields = self.mapping(raw, path, fields=("registration", "metadata_documents"), required=())
        if fields is None:
            return None
        flags = {}
        for name in ("registration", "metadata_documents"):
            value = fields.get(name, True)
            if not isinstance(value, bool):
                self.add(f"{path}.{name}", f"{name} must be true or false")
                return None
            flags[name] = value
        return SignInSpec(enabled=True, **flags)

    def identity_provider(self, raw: Any, path: str) -> IdentityProviderSpec | None:
        """`null` (remove it), or `{issuer, client_id, client_secret | client_secret_env, scope, label,
        role}`; whether the provider answers is the service's to say when the file is applied."""
        if raw is None:
            return IdentityProviderSpec(remove=True)
        before = len(self.problems)
        fields = self.mapping(raw, path, fields=_PROVIDER_FIELDS, required=("issuer", "client_id"))
        if fields is None:
            return None
        for name in _PROVIDER_FIELDS:
            if name in fields and not isinstance(fields[name], str):
                self.add(f"{path}.{name}", "must be a string")
        if "client_secret" in fields and "client_secret_env" in fields:
            self.add(path, "give at most one of 'client_secret' and 'client_secret_env'")
        if len(self.problems) > before:
            return None
        spec = IdentityProviderSpec(**fields)
        for name, problem in identity_provider_problems(issuer=spec.issuer, client_id=spec.client_id, scope=spec.scope,
                                                        label=spec.label, role=spec.role).items():
            self.add(f"{path}.{name}", problem)
        return spec if len(self.problems) == before else None

    def keys(self, raw: Any, path: str, teams: list[str], secrets: dict[str, str]) -> list[KeySpec]:
        keys: list[KeySpec] = []
        names: set[str] = set()
        for i, item in enumerate(self.items(raw, path)):
            key_path = f"{path}[{i}]"
            fields = self.mapping(item, key_path, fields=_KEY_FIELDS, required=("name",))
            if fields is None:
                continue
            name, secret, scopes = fields.get("name"), fields.get("secret"), fields.get("scopes")
            expires_at = fields.get("expires_at")
            if expires_at is not None:
                expires_at = self.timestamp(expires_at, f"{key_path}.expires_at")
            if scopes is not None and not isinstance(scopes, list):
                self.add(f"{key_path}.scopes", "scopes must be a list of scopes")
                scopes = None
            wrong = self.refuse(key_path, api_key_check(ApiKeyFields(
                name=name, scopes=scopes or (), secret=secret, expires_at=expires_at)), given=fields)
            name = name if isinstance(name, str) else ""
            if name in names:
                self.add(f"{key_path}.name", f"duplicate key {name!r}")
            names.add(name)
            team = fields.get("team")
            if team is not None:
                team = self.text(team, f"{key_path}.team", max_length=64)
                if team and team not in teams:
                    self.add(f"{key_path}.team", f"unknown team {team!r} (add it to the tenant's teams)")
            if "secret" in wrong:
                secret = None
            elif secret is not None and secret in secrets:
                self.add(f"{key_path}.secret", f"same secret as {secrets[secret]}")
            elif secret is not None:
                secrets[secret] = key_path
            revoked = self.flag(fields["revoked"], f"{key_path}.revoked") if "revoked" in fields else False
            if "scopes" in wrong:
                scopes = None
            keys.append(KeySpec(
                name=name, team=team, secret=secret, expires_at=expires_at, revoked=revoked,
                scopes=None if scopes is None else tuple(sorted(set(scopes))),
            ))
        return keys

    def backends(self, raw: Any, tenants: dict[str, TenantSpec]) -> tuple[BackendSpec, ...]:
        backends: dict[tuple[str, str], BackendSpec] = {}
        for i, item in enumerate(self.items(raw, "backends")):
            path = f"backends[{i}]"
            fields = self.mapping(item, path, fields=_BACKEND_FIELDS, required=("tenant", "name"))
            if fields is None:
                continue
            tenant = self.tenant_ref(fields.get("tenant"), f"{path}.tenant", tenants)
            name = self.text(
                fields.get("name"), f"{path}.name", max_length=64, validator=name_validator, what="backend name"
            )
            kind = self.choice(fields.get("kind", Backend.Kind.MCP.value), f"{path}.kind", Backend.Kind.values)
            transport = self.choice(
                fields.get("transport", Backend.Transport.STREAMABLE_HTTP.value),
                f"{path}.transport",
                Backend.Transport.values,
            )
            base_url, spec_file, credential = "", None, None
            name_length, deprecated, removals = DEFAULT_TOOL_NAME_MAX_LENGTH, False, False
            private = private_networks_allowed(tenants.get(tenant))
            if kind == Backend.Kind.OPENAPI:
                urls: tuple[str, ...] = ()
                if "urls" in fields:
                    self.add(f"{path}.urls", "an OpenAPI backend has no replica URLs; use base_url")
                base_url, spec_file, credential = self.openapi_fields(fields, path, private=private)
                name_length = fields.get("tool_name_max_length", DEFAULT_TOOL_NAME_MAX_LENGTH)
                if "include_deprecated" in fields:
                    deprecated = self.flag(fields["include_deprecated"], f"{path}.include_deprecated")
                if "allow_removals" in fields:
                    removals = self.flag(fields["allow_removals"], f"{path}.allow_removals")
            else:
                urls = self.urls(fields.get("urls"), f"{path}.urls", private=private) if "urls" in fields else ()
                if "urls" not in fields:
                    self.add(path, "missing required field 'urls'")
                for field in _OPENAPI_ONLY:
                    if field in fields:
                        self.add(f"{path}.{field}", f"only OpenAPI backends (kind: openapi) have {field!r}")
                if "credential" in fields:
                    credential = credential_check(self, fields["credential"], f"{path}.credential",
                                                  backend_kind=Backend.Kind.MCP, allow_private=private)
            timeout = fields.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)
            concurrency = fields.get("max_concurrency")
            # The backend's own value rules, as every face applies them (kind, transport and the URLs
            # are read above, each URL at its own index).
            wrong = set()
            for problem in backend_check(
                BackendFields(kind, transport, urls, timeout, base_url, name_length, concurrency),
                allow_private=private, resolve=False,
            ):
                if problem.field in ("timeout_seconds", "max_concurrency", "tool_name_max_length"):
                    self.add(f"{path}.{problem.field}", problem.message)
                    wrong.add(problem.field)
            timeout = DEFAULT_TIMEOUT_SECONDS if "timeout_seconds" in wrong else timeout
            concurrency = None if "max_concurrency" in wrong else concurrency
            name_length = DEFAULT_TOOL_NAME_MAX_LENGTH if "tool_name_max_length" in wrong else name_length
            if (tenant, name) in backends:
                self.add(f"{path}.name", f"duplicate backend {name!r} in tenant {tenant!r}")
            elif tenant and name:
                backends[(tenant, name)] = BackendSpec(
                    tenant=tenant, name=name, kind=kind, transport=transport, urls=urls,
                    timeout_seconds=float(timeout), base_url=base_url, spec=spec_file, credential=credential,
                    tool_name_max_length=name_length, include_deprecated=deprecated, max_concurrency=concurrency,
                    allow_removals=removals,
                )
        return tuple(backends.values())

    def openapi_fields(
        self, fields: dict[str, Any], path: str, *, private: bool
    ) -> tuple[str, str | None, CredentialSpec | None]:
        base_url = ""
        if "base_url" in fields:
            base_url = self.text(fields["base_url"], f"{path}.base_url", max_length=500)
            if base_url:
                try:
                    replica_url_validate(base_url)
                    # Literal addresses only: names are resolved when the document is applied.
                    url_address_validate(base_url, allow_private=private, resolve=False)
                except ValidationError as error:
                    self.add(f"{path}.base_url", error.messages[0])
        spec_file = None
        if "spec" in fields:
            spec_file = self.text(fields["spec"], f"{path}.spec", max_length=1000) or None
        credential = None
        if "credential" in fields:
            credential = credential_check(self, fields["credential"], f"{path}.credential",
                                          backend_kind=Backend.Kind.OPENAPI, allow_private=private)
        return base_url, spec_file, credential

    def urls(self, raw: Any, path: str, *, private: bool) -> tuple[str, ...]:
        if not isinstance(raw, list):
            self.add(path, "must be a list of replica URLs")
            return ()
        if not raw:
            self.add(path, "a backend needs at least one replica URL")  # backend_check's words
            return ()
        urls: list[str] = []
        for i, url in enumerate(raw):
            url_path = f"{path}[{i}]"
            try:
                replica_url_validate(url)
                url_address_validate(url, allow_private=private, resolve=False)
            except ValidationError as error:
                self.add(url_path, error.messages[0])
                continue
            if url in urls:
                self.add(url_path, f"replica URLs must be distinct: {url!r} is given twice")
            urls.append(url)
        return tuple(urls)

    def tenant_ref(self, raw: Any, path: str, tenants: dict[str, TenantSpec]) -> str:
        """The referenced tenant slug, or "" (after reporting) when the document does not name it."""
        slug = self.text(raw, path, max_length=64)
        if slug and slug not in tenants:
            self.add(path, f"unknown tenant {slug!r} (add it under tenants)")
            return ""
        return slug

    def virtual_hosts(
        self, raw: Any, tenants: dict[str, TenantSpec], backends: tuple[BackendSpec, ...]
    ) -> tuple[VirtualHostSpec, ...]:
        hosts: dict[tuple[str, str], VirtualHostSpec] = {}
        backend_names = {(b.tenant, b.name) for b in backends}
        for i, item in enumerate(self.items(raw, "virtual_hosts")):
            path = f"virtual_hosts[{i}]"
            fields = self.mapping(item, path, fields=_VHOST_FIELDS, required=("tenant", "slug"))
            if fields is None:
                continue
            tenant = self.tenant_ref(fields.get("tenant"), f"{path}.tenant", tenants)
            slug = self.text(fields.get("slug"), f"{path}.slug", max_length=64, validator=slug_validator, what="slug")
            mounts = []
            for map_key, backend in self.pairs(fields.get("backends"), f"{path}.backends"):
                mount_path = f"{path}.backends.{map_key}"
                self.text(map_key, mount_path, max_length=32, validator=map_key_validator, what="map key")
                backend = self.text(backend, mount_path, max_length=64)
                if tenant and backend and (tenant, backend) not in backend_names:
                    self.add(mount_path, f"unknown backend {backend!r} (add it under backends for tenant {tenant!r})")
                mounts.append(MountSpec(map_key=map_key, backend=backend))
            aliases = self.aliases(fields.get("tool_aliases"), f"{path}.tool_aliases")
            tool_rules, tool_descriptions = curation_check(self, fields.get("tools"), f"{path}.tools",
                                                           map_keys={m.map_key for m in mounts})
            interceptors = interceptors_section_check(self, fields.get("interceptors"), f"{path}.interceptors")
            allow_anonymous = (
                self.flag(fields["allow_anonymous"], f"{path}.allow_anonymous") if "allow_anonymous" in fields else False
            )
            anonymous_key = self.anonymous_key(fields.get("anonymous_key"), f"{path}.anonymous_key", tenants.get(tenant))
            mode = fields.get("tool_search")
            mode = {True: "listed", False: "off"}.get(mode, mode) if isinstance(mode, bool) else mode  # YAML reads `off` as false
            search_name = fields.get("tool_search_name")
            # The virtual host's own rules, as every face applies them. A host that leaves tool_search
            # out keeps the mode it has, which this document does not know: no alias clashes with it.
            wrong = set()
            for problem in virtual_host_check(VirtualHostFields(
                map_keys={m.map_key for m in mounts}, aliases=[(a.alias, a.map_key) for a in aliases],
                allow_anonymous=allow_anonymous, anonymous_key=fields.get("anonymous_key") is not None,
                tool_search=mode if "tool_search" in fields else VirtualHost.ToolSearch.OFF,
                tool_search_name=search_name if "tool_search_name" in fields else "tool_search",
            )):
                self.add(f"{path}.{problem.field}", problem.message)
                wrong.add(problem.field)
            tool_search = mode if "tool_search" in fields and "tool_search" not in wrong else None
            if "tool_search_name" not in fields or "tool_search_name" in wrong:
                search_name = None
            if (tenant, slug) in hosts:
                self.add(f"{path}.slug", f"duplicate virtual host {slug!r} in tenant {tenant!r}")
            elif tenant and slug:
                hosts[(tenant, slug)] = VirtualHostSpec(
                    tenant=tenant, slug=slug, mounts=tuple(mounts), tool_aliases=tuple(aliases),
                    allow_anonymous=allow_anonymous, anonymous_key=anonymous_key, tool_search=tool_search,
                    tool_search_name=search_name, tool_rules=tool_rules, tool_descriptions=tool_descriptions,
                    interceptors=interceptors,
                )
        return tuple(hosts.values())

    def aliases(self, raw: Any, path: str) -> list[AliasSpec]:
        aliases = []
        for alias, target in self.pairs(raw, path):
            alias_path = f"{path}.{alias}"
            self.text(alias, alias_path, max_length=128, validator=tool_name_validator, what="alias")
            if not isinstance(target, str) or ":" not in target:
                self.add(alias_path, "must be 'map-key:upstream-name'")
                continue
            map_key, upstream_name = target.split(":", 1)
            if not upstream_name or len(upstream_name) > _UPSTREAM_NAME_MAX_LENGTH:
                self.add(alias_path, f"upstream name must be 1-{_UPSTREAM_NAME_MAX_LENGTH} characters")
            aliases.append(AliasSpec(alias=alias, map_key=map_key, upstream_name=upstream_name))
        return aliases

    def anonymous_key(self, raw: Any, path: str, tenant: TenantSpec | None) -> str | None:
        if raw is None:
            return None
        name = self.text(raw, path, max_length=100)
        if tenant is None or not name:
            return name or None
        key = next((k for k in tenant.keys if k.name == name), None)
        if key is None:
            self.add(path, f"unknown key {name!r} (add it to tenant {tenant.slug!r}'s keys)")
        elif key.revoked:
            self.add(path, f"key {name!r} is revoked")
        return name

