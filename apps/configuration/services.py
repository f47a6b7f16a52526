"""Configuration as code: apply a YAML document to the database, export the database as one, and
seed the demo tenant `make run` serves."""

from __future__ import annotations

import dataclasses
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from apps.catalog.models import Backend, VirtualHost
from apps.catalog.selectors import backend_list, virtual_host_list
from apps.catalog.services import DEFAULT_TIMEOUT_SECONDS, DEFAULT_TOOL_NAME_MAX_LENGTH
from apps.configuration.budgets import budgets_export, tool_costs_export
from apps.configuration.curation import curation_export
from apps.configuration.document import ConfigInvalid
from apps.configuration.interceptors import interceptors_export
from apps.configuration.issuers import token_issuers_export
from apps.configuration.limits import rate_limits_export
from apps.configuration.plans import plans_export
from apps.configuration.policies import policy_export
from apps.configuration.reconcile import Reconciler
from apps.configuration.reports import ApplyReport
from apps.configuration.sign_in import identity_provider_export, sign_in_export
from apps.configuration.validation import config_parse
from apps.retrieval.indexing import tool_index_queue
from apps.tenants.keys import key_generate
from apps.tenants.models import ApiKey
from apps.tenants.selectors import api_key_list, team_list, tenant_list

EXPORT_HEADER = (
    "# Exported by `manage.py gateway export`. Key secrets cannot be exported: applying this file\n"
    "# keeps every existing key's secret as it is.\n"
)
DEMO_TENANT = "demo"
DEMO_TEAM = "default"
DEMO_KEY = "demo-agent"
DEMO_BACKEND = "demo"
DEMO_VIRTUAL_HOST = "main"
DEMO_REST_BACKEND = "petstore"
DEMO_REST_VIRTUAL_HOST = "rest"
DEMO_REST_SPEC = Path(__file__).resolve().parents[2] / "docs" / "examples" / "petstore.yaml"
DEMO_REST_KEY = "demo-petstore-key"  # what scripts/demo_server.py's pet store expects
DEMO_ADMIN_USERNAME = "admin"
# Arbitrary constant naming the advisory lock that serialises applies ('mgwc' in ASCII).
_APPLY_LOCK_ID = 0x6D677763


def config_apply(
    *, document: str, prune: bool, dry_run: bool = False, base_dir: Path | None = None, allow_removals: bool = False
) -> ApplyReport:
    """Make the database match the YAML `document`, all or nothing.

    - Invalid document, or a conflict with the database: raises `ConfigInvalid` with every problem
      and changes nothing.
    - Idempotent: applying the same document again reports everything `unchanged` and writes
      nothing (no configuration version moves).
    - Without `prune` nothing is deleted; with it, every plan, tenant, team, key, backend, virtual
      host, mount, alias, rate limit, budget and token issuer the document does not name is deleted,
      and so are the access policy and the tool costs of every virtual host the document names
      without a `policies` / `tool_costs` entry.
    - A tenant on a plan that does not allow editing limits cannot have its rate limits, budgets
      or tool costs changed (the document's plan for it rules): such a change is a problem.
    - Keys: a `secret` in the document is the key's secret (re-issued in place when it differs);
      without one a secret is generated on creation only and returned once in the report.
    - `dry_run`: everything is worked out and then rolled back; generated secrets are withheld,
      since they would never work.
    - OpenAPI backends: `spec` files are read relative to `base_dir` (the configuration file's
      folder) and uploaded when they differ from the latest upload; compilation is queued after
      commit and `ApplyReport.spec_versions` lists the versions queued. A spec that would remove
      more than half of the backend's tools is held (compiled, not published) unless its backend
      says `allow_removals: true` or `allow_removals` is given (for every backend); applying again
      with it publishes a held version whose file has not changed.
    """
    parsed = config_parse(document)
    if allow_removals:
        parsed = dataclasses.replace(
            parsed, backends=tuple(dataclasses.replace(b, allow_removals=True) for b in parsed.backends))
    with transaction.atomic():
        # One apply at a time (e.g. several containers running seed-demo at start): concurrent
        # applies would otherwise race on the same unique names and fail with IntegrityErrors.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_APPLY_LOCK_ID])
        reconciler = Reconciler(document=parsed, prune=prune, base_dir=base_dir)
        reconciler.run()
        if reconciler.problems:
            raise ConfigInvalid(reconciler.problems)  # leaving the block rolls everything back
        if dry_run:
            transaction.set_rollback(True)
    return ApplyReport(
        changes=tuple(reconciler.changes),
        generated_secrets=() if dry_run else tuple(reconciler.generated),
        dry_run=dry_run,
        pruned=prune,
        spec_versions=() if dry_run else tuple(reconciler.uploaded),
    )


def config_export() -> str:
    """The whole configuration as a YAML document that `config_apply` accepts and for which it
    reports no change. Key secrets are never exported (only their hashes exist); optional fields
    are written only when they differ from their defaults."""
    tenants: list[dict[str, Any]] = []
    backends: list[dict[str, Any]] = []
    virtual_hosts: list[dict[str, Any]] = []
    policies: list[dict[str, Any]] = []
    rate_limits: list[dict[str, Any]] = []
    token_issuers: list[dict[str, Any]] = []
    budgets: list[dict[str, Any]] = []
    tool_costs: list[dict[str, Any]] = []
    for tenant in tenant_list().select_related("plan"):
        tenants.append(
            {
                "slug": tenant.slug,
                "name": tenant.name,
                "teams": [team.slug for team in team_list(tenant=tenant)],
                "keys": [_export_key(key) for key in api_key_list(tenant=tenant)],
                **({"plan": tenant.plan.name} if tenant.plan is not None else {}),
                **({"allow_private_networks": tenant.allow_private_networks}
                   if tenant.allow_private_networks is not None else {}),
                **sign_in_export(tenant),
                **identity_provider_export(tenant),
            }
        )
        for backend in backend_list(tenant=tenant):
            item: dict[str, Any] = {"tenant": tenant.slug, "name": backend.name, "kind": backend.kind}
            if backend.kind == backend.Kind.OPENAPI:
                # The spec and the credential's secret stay as they are (no `spec` / `credential`).
                if backend.base_url:
                    item["base_url"] = backend.base_url
                if backend.tool_name_max_length != DEFAULT_TOOL_NAME_MAX_LENGTH:
                    item["tool_name_max_length"] = backend.tool_name_max_length
                if backend.include_deprecated:
                    item["include_deprecated"] = True
            else:
                item["transport"] = backend.transport
                item["urls"] = [replica.url for replica in backend.replicas.all()]
            if backend.timeout_seconds != DEFAULT_TIMEOUT_SECONDS:
                item["timeout_seconds"] = backend.timeout_seconds
            if backend.max_concurrency is not None:
                item["max_concurrency"] = backend.max_concurrency
            backends.append(item)
        for host in virtual_host_list(tenant=tenant):
            item = {
                "tenant": tenant.slug,
                "slug": host.slug,
                "backends": {mount.map_key: mount.backend.name for mount in host.mounts.all()},
                "tool_aliases": {a.alias: f"{a.map_key}:{a.upstream_name}" for a in host.tool_aliases.all()},
            }
            if host.allow_anonymous:
                item["allow_anonymous"] = True
            if host.anonymous_key is not None:
                item["anonymous_key"] = host.anonymous_key.name
            if host.tool_search != VirtualHost.ToolSearch.AUTO:  # a new host's mode goes unsaid
                item["tool_search"] = host.tool_search
            if host.tool_search_name != "tool_search":
                item["tool_search_name"] = host.tool_search_name
            if tools := curation_export(host=host):
                item["tools"] = tools
            if interceptors := interceptors_export(host=host):
                item["interceptors"] = interceptors
            virtual_hosts.append(item)
            if (policy := policy_export(virtual_host=host)) is not None:
                policies.append(policy)
            tool_costs += tool_costs_export(virtual_host=host)
        rate_limits += rate_limits_export(tenant=tenant)  # tenant_list() is by slug: sorted by tenant
        token_issuers += token_issuers_export(tenant=tenant)
        budgets += budgets_export(tenant=tenant)
    body = {
        "plans": plans_export(), "tenants": tenants, "backends": backends, "virtual_hosts": virtual_hosts,
        "policies": policies, "rate_limits": rate_limits, "budgets": budgets, "tool_costs": tool_costs,
        "token_issuers": token_issuers,
    }
    return EXPORT_HEADER + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, default_flow_style=False)


def _export_key(key: ApiKey) -> dict[str, Any]:
    item: dict[str, Any] = {"name": key.name}
    if key.team is not None:
        item["team"] = key.team.slug
    if key.expires_at is not None:
        item["expires_at"] = key.expires_at.isoformat()
    if key.revoked_at is not None:
        item["revoked"] = True
    if key.scopes:
        item["scopes"] = sorted(key.scopes)
    return item


def demo_seed(*, backend_url: str, key_file: Path, admin_password_file: Path) -> ApplyReport:
    """Idempotently set up the demo: tenant `demo` (team `default`, key `demo-agent`), backend
    `demo` at `backend_url`, virtual host `main` mounting it as `demo` (with the secrets interceptor
    on), the OpenAPI backend
    `petstore` (docs/examples/petstore.yaml, served by the demo server under `/rest`) on virtual
    host `rest`, which lists `tool_search` too, a superuser `admin`, and the tenant's authorization
    server switched on (docs/identity.md, "Signing in people"). The spec compiles, and its
    tools are indexed, in the Celery worker.

    The key secret and the admin password live in the two files (mode 0600): read when the file
    exists, else generated and written there, so every run serves the same working credentials.
    Nothing outside the demo tenant is touched (no prune)."""
    key_secret = _secret_file_read_or_create(key_file, lambda: key_generate()[0])
    admin_password = _secret_file_read_or_create(admin_password_file, lambda: secrets.token_urlsafe(18))
    document = {
        "tenants": [
            {
                "slug": DEMO_TENANT,
                "name": "Demo",
                "teams": [DEMO_TEAM],
                "keys": [{"name": DEMO_KEY, "team": DEMO_TEAM, "secret": key_secret}],
                # Its hosts name the gateway's own authorization server: a client that signs people
                # in (the SDKs' OAuth clients) reaches `main` with the console's admin account.
                "sign_in": True,
            }
        ],
        "backends": [
            {
                "tenant": DEMO_TENANT,
                "name": DEMO_BACKEND,
                "kind": "mcp",
                "transport": "streamable-http",
                "urls": [backend_url],
            },
            {
                "tenant": DEMO_TENANT,
                "name": DEMO_REST_BACKEND,
                "kind": "openapi",
                "spec": str(DEMO_REST_SPEC),
                "base_url": backend_url.rsplit("/mcp", 1)[0] + "/rest",
                "credential": {"secret": DEMO_REST_KEY},
            },
        ],
        "virtual_hosts": [
            # Its secrets interceptor masks credentials in calls and results (docs/interceptors.md):
            # `echo` of a cloud key comes back masked.
            {"tenant": DEMO_TENANT, "slug": DEMO_VIRTUAL_HOST, "backends": {"demo": DEMO_BACKEND}, "tool_aliases": {},
             "interceptors": [{"name": "secrets", "kind": "secrets"}]},
            {"tenant": DEMO_TENANT, "slug": DEMO_REST_VIRTUAL_HOST, "backends": {"pets": DEMO_REST_BACKEND},
             "tool_search": "listed"},
        ],
    }
    with transaction.atomic():
        report = config_apply(document=yaml.safe_dump(document, sort_keys=False), prune=False)
        _superuser_ensure(username=DEMO_ADMIN_USERNAME, password=admin_password)
        # Indexed when its spec is published; queued again (nothing is embedded twice) so that a
        # demo database seeded before tool_search existed, or with indexing off, is searchable too.
        rest = Backend.objects.get(tenant__slug=DEMO_TENANT, name=DEMO_REST_BACKEND)
        tool_index_queue(backend_id=rest.pk)
    return report


def _secret_file_read_or_create(path: Path, generate: Callable[[], str]) -> str:
    """The secret stored in `path`, or a new one from `generate()` written there owner-only."""
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    value = generate()
    # O_EXCL: never clobber a file another process created meanwhile; 0600: it is a credential.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(value + "\n")
    return value


def _superuser_ensure(*, username: str, password: str) -> None:
    user_model = get_user_model()
    user = user_model.objects.filter(username=username).first()
    if user is None:
        user_model.objects.create_superuser(username=username, email="", password=password)
        return
    changed = not (user.is_active and user.is_staff and user.is_superuser)
    user.is_active = user.is_staff = user.is_superuser = True
    # Only re-hash when the password differs, so repeated runs write nothing.
    if not user.check_password(password):
        user.set_password(password)
        changed = True
    if changed:
        user.save()
