"""config_apply against the real database: as written, idempotent, all or nothing, prune, secrets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from apps.catalog.models import Backend, ToolAlias, VirtualHost, VirtualHostBackend
from apps.common.config_version import config_version_get
from apps.configuration.document import ConfigInvalid
from apps.configuration.reports import Action, ApplyReport
from apps.configuration.services import config_apply, config_export
from apps.tenants.keys import key_hash
from apps.tenants.models import ApiKey, Team, Tenant
from apps.tenants.services import api_key_revoke
from tests.configuration.documents import DOCS, README_EXAMPLE, docs_examples, full_example
from tests.factories import api_key_factory

pytestmark = pytest.mark.django_db


def _actions(report: ApplyReport) -> dict[tuple[str, str], Action]:
    return {(c.kind, c.name): c.action for c in report.changes}


def _counts() -> tuple[int, ...]:
    models: list[Any] = [Tenant, Team, ApiKey, Backend, VirtualHost, VirtualHostBackend, ToolAlias]
    return tuple(m.objects.count() for m in models)


def test_readme_example_applies_as_written() -> None:
    report = config_apply(document=README_EXAMPLE, prune=False)
    tenant = Tenant.objects.get(slug="acme")
    assert tenant.name == "Acme Corp"
    key = ApiKey.objects.get(tenant=tenant, name="agent")
    assert key.team == Team.objects.get(tenant=tenant, slug="platform")
    assert key.secret_hash == key_hash("acme-agent-0123456789abcdef")
    backend = Backend.objects.get(tenant=tenant, name="demo")
    assert (backend.kind, backend.transport) == ("mcp", "streamable-http")
    assert [r.url for r in backend.replicas.all()] == ["http://127.0.0.1:9001/mcp"]
    host = VirtualHost.objects.get(tenant=tenant, slug="main")
    assert {m.map_key: m.backend for m in host.mounts.all()} == {"demo": backend}
    assert report.generated_secrets == ()
    assert all(c.action is Action.CREATED for c in report.changes)


@pytest.mark.parametrize("index", range(len(docs_examples())))
def test_every_example_in_the_docs_applies(index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PETSTORE_KEY", "example-key")  # the OpenAPI example's credential
    assert config_apply(document=docs_examples()[index], prune=False, base_dir=DOCS.parent).changed


def test_full_example_lands_in_the_database() -> None:
    config_apply(document=full_example(), prune=False)
    github = Backend.objects.get(tenant__slug="acme", name="github")
    assert [r.url for r in github.replicas.order_by("position")] == [
        "http://github-mcp-1:8000/mcp", "http://github-mcp-2:8000/mcp",
    ]
    assert github.timeout_seconds == 30
    dev = VirtualHost.objects.get(tenant__slug="acme", slug="dev")
    assert {a.alias: (a.map_key, a.upstream_name) for a in dev.tool_aliases.all()} == {
        "create_issue": ("jira", "create_issue"), "open_pr": ("gh", "create_pull_request"),
    }
    public = VirtualHost.objects.get(tenant__slug="acme", slug="public")
    assert public.allow_anonymous and public.anonymous_key.name == "public"
    assert ApiKey.objects.get(tenant__slug="acme", name="old-laptop").revoked_at is not None


def test_applying_twice_changes_nothing_the_second_time(
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    first = config_apply(document=full_example(), prune=False)
    hashes = dict(ApiKey.objects.values_list("pk", "secret_hash"))
    with django_capture_on_commit_callbacks() as callbacks:
        second = config_apply(document=full_example(), prune=True)
    assert first.changed and not second.changed
    assert {c.action for c in second.changes} == {Action.UNCHANGED}
    assert len(second.changes) == len(first.changes)
    assert second.generated_secrets == ()
    assert dict(ApiKey.objects.values_list("pk", "secret_hash")) == hashes
    assert callbacks == []  # no configuration version moves


def test_generated_secrets_are_reported_once_and_verify() -> None:
    first = config_apply(document=full_example(), prune=False)
    generated = {(s.tenant, s.key): s.secret for s in first.generated_secrets}
    # Keys without a secret, except the revoked one (its secret could never be used).
    assert set(generated) == {("acme", "notebook"), ("acme", "public"), ("globex", "agent")}
    for (tenant, name), secret in generated.items():
        assert ApiKey.objects.get(tenant__slug=tenant, name=name).secret_hash == key_hash(secret)
    assert config_apply(document=full_example(), prune=False).generated_secrets == ()


def test_a_changed_secret_in_the_file_reissues_the_key() -> None:
    config_apply(document=README_EXAMPLE, prune=False)
    key_id = ApiKey.objects.get(name="agent").pk
    report = config_apply(document=README_EXAMPLE.replace("0123456789abcdef", "fedcba9876543210"), prune=False)
    assert _actions(report)[("key", "acme/agent")] is Action.UPDATED
    key = ApiKey.objects.get(name="agent")
    assert key.pk == key_id and key.secret_hash == key_hash("acme-agent-fedcba9876543210")
    assert report.generated_secrets == ()


def test_export_round_trips_and_keeps_keys_untouched() -> None:
    config_apply(document=full_example(), prune=False)
    exported = config_export()
    assert "secret" not in exported.split("\n", 2)[2]  # past the header comment
    hashes = dict(ApiKey.objects.values_list("pk", "secret_hash"))
    report = config_apply(document=exported, prune=True)
    assert not report.changed
    assert dict(ApiKey.objects.values_list("pk", "secret_hash")) == hashes
    assert config_export() == exported


def test_updates_are_detected_and_applied() -> None:
    config_apply(document=full_example(), prune=False)
    changed = (
        full_example()
        .replace("timeout_seconds: 30", "timeout_seconds: 5")
        .replace('"jira:create_issue"', '"jira:new_issue"')
        .replace("{gh: github}", "{gh: jira}")
        .replace("name: Globex", "name: Globex Inc")
    )
    actions = _actions(config_apply(document=changed, prune=False))
    assert actions[("backend", "acme/github")] is Action.UPDATED
    assert actions[("alias", "acme/dev create_issue")] is Action.UPDATED
    assert actions[("mount", "acme/public:gh")] is Action.UPDATED
    assert actions[("tenant", "globex")] is Action.UPDATED
    assert actions[("backend", "acme/jira")] is Action.UNCHANGED
    assert ToolAlias.objects.get(alias="create_issue").upstream_name == "new_issue"


REDUCED = """\
tenants:
  - slug: acme
    name: Acme Corp
    teams: [platform]
    keys:
      - {name: ci, team: platform, secret: "acme-ci-secret-0123456789"}
backends:
  - {tenant: acme, name: github, urls: ["http://github-mcp-1:8000/mcp", "http://github-mcp-2:8000/mcp"],
     timeout_seconds: 30}
virtual_hosts:
  - tenant: acme
    slug: dev
    backends: {gh: github}
"""


def test_without_prune_nothing_is_deleted() -> None:
    config_apply(document=full_example(), prune=False)
    before = _counts()
    report = config_apply(document=REDUCED, prune=False)
    assert _counts() == before
    assert report.count(Action.DELETED) == 0


def test_prune_deletes_what_the_file_no_longer_names() -> None:
    config_apply(document=full_example(), prune=False)
    report = config_apply(document=REDUCED, prune=True)
    deleted = {(c.kind, c.name) for c in report.changes if c.action is Action.DELETED}
    assert deleted == {
        ("alias", "acme/dev create_issue"), ("alias", "acme/dev open_pr"), ("mount", "acme/dev:jira"),
        ("virtual_host", "acme/public"), ("backend", "acme/jira"), ("key", "acme/notebook"),
        ("key", "acme/public"), ("key", "acme/old-laptop"), ("team", "acme/research"), ("tenant", "globex"),
    }
    assert list(Tenant.objects.values_list("slug", flat=True)) == ["acme"]
    assert list(ApiKey.objects.values_list("name", flat=True)) == ["ci"]
    assert not config_apply(document=REDUCED, prune=True).changed


def test_invalid_document_changes_nothing() -> None:
    config_apply(document=full_example(), prune=False)
    exported, counts = config_export(), _counts()
    broken = full_example().replace("{gh: github, jira: jira}", "{gh: github, x: nope}").replace(
        "name: Globex", "name: Renamed"
    )
    with pytest.raises(ConfigInvalid) as excinfo:
        config_apply(document=broken, prune=True)
    assert "virtual_hosts[0].tool_aliases.create_issue" in {p.path for p in excinfo.value.problems}
    assert "virtual_hosts[0].backends.x" in {p.path for p in excinfo.value.problems}
    assert (config_export(), _counts()) == (exported, counts)


def test_database_conflicts_roll_back_everything() -> None:
    api_key_factory(secret="acme-agent-0123456789abcdef")  # another tenant already uses the secret
    counts = _counts()
    with pytest.raises(ConfigInvalid) as excinfo:
        config_apply(document=README_EXAMPLE, prune=False)
    assert [str(p) for p in excinfo.value.problems] == [
        "tenants[0].keys[0]: another key already uses this secret"
    ]
    assert _counts() == counts  # the tenant, team, backend and vhost created before were rolled back


def test_a_revoked_key_is_not_silently_reactivated() -> None:
    config_apply(document=README_EXAMPLE, prune=False)
    api_key_revoke(api_key=ApiKey.objects.get(name="agent"))
    with pytest.raises(ConfigInvalid, match="revoked"):
        config_apply(document=README_EXAMPLE, prune=False)
    marked = README_EXAMPLE.replace("        team: platform\n", "        team: platform\n        revoked: true\n")
    assert not config_apply(document=marked, prune=False).changed


def test_dry_run_writes_nothing_and_withholds_secrets() -> None:
    report = config_apply(document=full_example(), prune=False, dry_run=True)
    assert report.changed and report.dry_run
    assert report.generated_secrets == ()
    assert _counts() == (0,) * 7


@pytest.mark.django_db(transaction=True)
def test_apply_moves_the_config_version_of_a_changed_tenant() -> None:
    config_apply(document=full_example(), prune=False)
    acme = Tenant.objects.get(slug="acme")

    def version() -> int:
        return config_version_get(tenant_id=acme.pk)

    before = version()
    assert before > 0
    config_apply(document=full_example().replace("timeout_seconds: 30", "timeout_seconds: 31"), prune=False)
    # At least: Redis DB 15 is shared with concurrent test runs whose tenant ids may coincide.
    assert version() > before


def test_only_the_changed_tenant_is_told_to_reload(django_capture_on_commit_callbacks: Callable[..., Any]) -> None:
    config_apply(document=full_example(), prune=False)
    with django_capture_on_commit_callbacks() as callbacks:
        config_apply(document=full_example().replace("timeout_seconds: 30", "timeout_seconds: 31"), prune=False)
    assert len(callbacks) == 1  # one bump, for acme's backend; globex is untouched
