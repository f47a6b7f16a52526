"""Backends' `credential` in `gateway apply`: every source applies as written (secrets from the file
or the environment), unchanged credentials are not rewritten, bad ones are refused at their path
with nothing written, and exports carry none."""

from __future__ import annotations

import pytest
import yaml

from apps.catalog.credentials import tenant_secret_set
from apps.catalog.models import EgressCredential
from apps.common.secrets import secret_decrypt
from apps.configuration.document import ConfigInvalid
from apps.configuration.reports import Action
from apps.configuration.services import config_apply, config_export
from apps.tenants.models import Tenant
from tests.configuration.documents import README_EXAMPLE, assert_refused_and_nothing_written

pytestmark = pytest.mark.django_db

PER_CALLER = README_EXAMPLE.replace('    urls: ["http://127.0.0.1:9001/mcp"]          # one or more replicas\n', '''\
    urls: ["http://127.0.0.1:9001/mcp"]
    credential:
      source: per_identity
      secret_env: DEMO_DEFAULT_TOKEN        # the default: unmapped callers, the gateway's own requests
      identities:
        - {key: agent, secret_env: DEMO_AGENT_TOKEN}
        - {team: platform, secret: "platform-token"}
        - {subject: "alice@example.com", secret: "alice-token"}
        - {subject: "alice@example.com", issuer: "https://login.partner.example", secret: "partner-alice"}
''')
OAUTH = PER_CALLER.replace('''    credential:
      source: per_identity''', '''    credential:
      source: oauth_client_credentials
      token_url: https://idp.example.com/oauth/token
      client_id: gateway
      secret_env: DEMO_CLIENT_SECRET
      scope: tools.read
    unused:
      source: per_identity''')


def stored() -> dict[str, object]:
    credential = EgressCredential.objects.select_related("tenant_secret").get(backend__name="demo")
    return {
        "source": credential.source, "kind": credential.kind,
        "secret": secret_decrypt(credential.secret) if credential.secret else "",
        "identities": sorted(
            (i.subject_kind, i.issuer, i.subject_name, secret_decrypt(i.secret)) for i in credential.identities.all()
        ),
        "tenant_secret": credential.tenant_secret.name if credential.tenant_secret else "",
        "oauth": (credential.token_url, credential.client_id, credential.scope),
    }


def backend_action(document: str) -> tuple[Action, str]:
    change = next(c for c in config_apply(document=document, prune=False).changes if c.kind == "backend")
    return change.action, change.detail


def test_a_per_identity_credential_applies_as_written_and_is_not_rewritten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_DEFAULT_TOKEN", "default-token")
    monkeypatch.setenv("DEMO_AGENT_TOKEN", "agent-token")
    assert backend_action(PER_CALLER) == (Action.CREATED, "credential")
    assert stored()["identities"] == [
        ("key", "", "agent", "agent-token"), ("subject", "", "alice@example.com", "alice-token"),
        ("subject", "https://login.partner.example", "alice@example.com", "partner-alice"),
        ("team", "", "platform", "platform-token"),
    ]
    assert stored()["secret"] == "default-token"
    assert backend_action(PER_CALLER) == (Action.UNCHANGED, "")
    monkeypatch.setenv("DEMO_AGENT_TOKEN", "rotated")  # a rotated secret in the environment is applied
    assert backend_action(PER_CALLER) == (Action.UPDATED, "credential")
    assert ("key", "", "agent", "rotated") in stored()["identities"]
    assert "credential" not in config_export()  # exports hold no secrets


def test_oauth_and_tenant_secret_credentials_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_CLIENT_SECRET", "client-secret")
    document = OAUTH.replace("    unused:\n      source: per_identity\n", "").split("      secret_env: DEMO_DEFAULT_TOKEN")[0]
    document += "virtual_hosts: []\n"
    config_apply(document=document, prune=False)
    assert stored()["oauth"] == ("https://idp.example.com/oauth/token", "gateway", "tools.read")
    assert stored()["secret"] == "client-secret"
    tenant_secret_set(tenant=Tenant.objects.get(slug="acme"), name="github", value="ghp_123")
    document = document.split("    credential:")[0] + "    credential: {source: tenant_secret, tenant_secret: github}\n"
    document += "virtual_hosts: []\n"
    assert backend_action(document) == (Action.UPDATED, "credential")
    assert (stored()["source"], stored()["tenant_secret"], stored()["secret"]) == ("tenant_secret", "github", "")
    assert backend_action(document.replace("{source: tenant_secret, tenant_secret: github}", "null")) == (
        Action.UPDATED, "credential removed")
    assert not EgressCredential.objects.exists()


@pytest.mark.parametrize(
    ("replace", "by", "expected"),
    [
        ("        - {key: agent, secret_env: DEMO_AGENT_TOKEN}\n", "        - {key: agent, team: platform, secret: x}\n",
         "backends[0].credential.identities[0]: name exactly one of 'key', 'subject' and 'team'"),
        ("        - {team: platform, secret: \"platform-token\"}\n", "        - {key: agent, secret: y}\n",
         "backends[0].credential.identities: key:agent is listed twice"),
        ("      source: per_identity\n", "      source: vault\n", "backends[0].credential.source: unknown credential source 'vault'; use one of"),
        ("        - {key: agent, secret_env: DEMO_AGENT_TOKEN}\n",
         "        - {key: agent, issuer: \"https://idp\", secret_env: DEMO_AGENT_TOKEN}\n",
         "backends[0].credential.identities: key:agent of https://idp: only token subject entries name an issuer"),
        ("      source: per_identity\n", "      source: static\n",
         "backends[0].credential.identities: identities are only for source per_identity"),
        ("      source: per_identity\n", "      source: per_identity\n      token_url: https://x.example/token\n",
         "backends[0].credential.token_url: token_url is only for source oauth_client_credentials or token_exchange"),
    ],
)
def test_a_bad_credential_is_refused_at_its_path_and_nothing_is_written(
    monkeypatch: pytest.MonkeyPatch, replace: str, by: str, expected: str
) -> None:
    monkeypatch.setenv("DEMO_DEFAULT_TOKEN", "default-token")
    monkeypatch.setenv("DEMO_AGENT_TOKEN", "agent-token")
    assert replace in PER_CALLER
    assert_refused_and_nothing_written(stored_first=PER_CALLER, broken=PER_CALLER.replace(replace, by),
                                       expected=expected, stored=stored)


def test_key_scopes_apply_are_exported_and_refused_when_malformed() -> None:
    from apps.tenants.models import ApiKey

    scoped = README_EXAMPLE.replace("        team: platform\n", "        team: platform\n        scopes: [tools:call, read]\n", 1)
    config_apply(document=scoped, prune=False)
    assert ApiKey.objects.get(name="agent").scopes == ["read", "tools:call"]
    change = next(c for c in config_apply(document=scoped, prune=False).changes if c.kind == "key")
    assert change.action == Action.UNCHANGED
    exported = yaml.safe_load(config_export())
    assert exported["tenants"][0]["keys"][0]["scopes"] == ["read", "tools:call"]
    # A file that names no scopes leaves them; an empty list clears them.
    config_apply(document=README_EXAMPLE, prune=False)
    assert ApiKey.objects.get(name="agent").scopes == ["read", "tools:call"]
    change = next(c for c in config_apply(document=scoped.replace("[tools:call, read]", "[]"), prune=False).changes
                  if c.kind == "key")
    assert (change.action, change.detail, ApiKey.objects.get(name="agent").scopes) == (Action.UPDATED, "scopes", [])
    assert_refused_and_nothing_written(
        stored_first=scoped, broken=scoped.replace("[tools:call, read]", '["tools call"]'),
        expected="tenants[0].keys[0].scopes: a scope is 1-64", stored=lambda: ApiKey.objects.get(name="agent").scopes,
    )


WITH_SECRETS = README_EXAMPLE.replace("    teams: [platform]\n", """\
    teams: [platform]
    secrets:
      - {name: github, secret_env: DEMO_GITHUB_TOKEN}
      - {name: spare, secret: "spare-value"}
""", 1).replace('    urls: ["http://127.0.0.1:9001/mcp"]          # one or more replicas\n', """\
    urls: ["http://127.0.0.1:9001/mcp"]
    credential: {source: tenant_secret, tenant_secret: github}
""")


def test_tenant_secrets_apply_rotate_and_are_pruned_unless_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from apps.catalog.models import TenantSecret

    def values() -> dict[str, str]:
        return {s.name: secret_decrypt(s.value) for s in TenantSecret.objects.filter(tenant__slug="acme")}

    monkeypatch.setenv("DEMO_GITHUB_TOKEN", "ghp_one")
    config_apply(document=WITH_SECRETS, prune=False)
    assert values() == {"github": "ghp_one", "spare": "spare-value"}
    assert (stored()["source"], stored()["tenant_secret"]) == ("tenant_secret", "github")
    actions = {c.name: c.action for c in config_apply(document=WITH_SECRETS, prune=False).changes if c.kind == "secret"}
    assert actions == {"acme/github": Action.UNCHANGED, "acme/spare": Action.UNCHANGED}
    monkeypatch.setenv("DEMO_GITHUB_TOKEN", "ghp_two")
    config_apply(document=WITH_SECRETS.replace('      - {name: spare, secret: "spare-value"}\n', ""), prune=True)
    assert values() == {"github": "ghp_two"}  # rotated, and the unlisted one pruned
    # A secret a credential still uses cannot be pruned: the whole apply is refused.
    with pytest.raises(ConfigInvalid) as refused:
        config_apply(document=WITH_SECRETS.replace("      - {name: github, secret_env: DEMO_GITHUB_TOKEN}\n", ""),
                     prune=True)
    assert "is used by the credential of demo" in str(refused.value.problems)
    assert values() == {"github": "ghp_two"}
    # A file that names no secrets leaves them, also with --prune.
    config_apply(document=README_EXAMPLE, prune=True)
    assert values() == {"github": "ghp_two"}
