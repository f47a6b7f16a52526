"""API keys cannot be recovered from the database: what is stored is a label that is no part of the
secret and a hash keyed by a server key the database does not hold; chosen secrets carry at least
128 bits; keys stored before (plain SHA-256, the secret's first 12 characters as label) keep working
after the migration converts them."""

from __future__ import annotations

import hashlib
import importlib
from types import SimpleNamespace
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.core.exceptions import ValidationError
from django.db import connection

from apps.configuration.document import ConfigInvalid
from apps.configuration.services import config_apply
from apps.tenants.keys import KEY_PREFIX, key_hash
from apps.tenants.models import AdminToken, ApiKey
from apps.tenants.selectors import api_key_get_by_secret
from apps.tenants.services import admin_token_authenticate, admin_token_issue, api_key_issue, api_key_reissue
from tests import factories
from tests.gateway.helpers import message_of, modern

# No lower-case a-f nor digit: no character of it can appear in a label made of hex digits.
CHOSEN = "XQ-VT_PL~MZ!RW@KN#BY$GH%JU^SO&ZX*QR"

# The secret the review recovered from a stored 12-character prefix and unsalted SHA-256.
SIXTEEN = "acme-ci-2024-key"


def _old_format(api_key: ApiKey, secret: str) -> None:
    """Store the key as the previous version did."""
    ApiKey.objects.filter(pk=api_key.pk).update(secret_hash=hashlib.sha256(secret.encode()).hexdigest(),
                                                prefix=secret[:12])


def _migrate() -> None:
    migration = importlib.import_module("apps.tenants.migrations.0008_keyed_key_hashes")
    migration._rehash(django_apps, SimpleNamespace(connection=connection))


@pytest.mark.django_db
def test_a_generated_key_is_labelled_by_a_public_id_apart_from_its_secret() -> None:
    issued = api_key_issue(tenant=factories.tenant_factory(), name="agent")
    stored = ApiKey.objects.get(pk=issued.api_key.pk)
    public, secret = issued.secret[: len(stored.prefix)], issued.secret[len(stored.prefix) + 1:]
    assert stored.prefix == public and public.startswith(KEY_PREFIX) and len(public) == len(KEY_PREFIX) + 8
    assert issued.secret == f"{public}_{secret}" and len(secret) >= 43  # 256 random bits after the label


@pytest.mark.django_db
def test_a_chosen_secret_is_labelled_by_its_keyed_hash_and_never_by_its_characters() -> None:
    issued = api_key_issue(tenant=factories.tenant_factory(), name="ci", secret=CHOSEN)
    stored = ApiKey.objects.get(pk=issued.api_key.pk)
    assert stored.prefix == "#" + stored.secret_hash[:8]
    assert not set(stored.prefix) & set(CHOSEN) - {"#"}


@pytest.mark.django_db
def test_the_stored_hash_is_keyed_by_the_server_key(settings: Any) -> None:
    issued = api_key_issue(tenant=factories.tenant_factory(), name="ci", secret=CHOSEN)
    stored = ApiKey.objects.get(pk=issued.api_key.pk).secret_hash
    assert stored != hashlib.sha256(CHOSEN.encode()).hexdigest()  # no offline oracle for guesses
    assert api_key_get_by_secret(secret=CHOSEN) == issued.api_key
    settings.GATEWAY_KEY_HASH_SECRET = "another-server-key-0123456789abcdef"
    assert key_hash(CHOSEN) != stored
    assert api_key_get_by_secret(secret=CHOSEN) is None


@pytest.mark.django_db
def test_admin_tokens_are_stored_the_same_way(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user(username="ops", password="x")
    issued = admin_token_issue(user=user, name="ci")
    stored = AdminToken.objects.get(pk=issued.admin_token.pk)
    assert issued.secret.startswith(stored.prefix + "_") and stored.prefix.startswith("gwa_")
    assert stored.secret_hash == key_hash(issued.secret) != hashlib.sha256(issued.secret.encode()).hexdigest()
    assert admin_token_authenticate(secret=issued.secret) == stored


@pytest.mark.django_db
@pytest.mark.parametrize("weak", [SIXTEEN, "0123456789abcdefghij", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"])
def test_weak_chosen_secrets_are_refused(weak: str) -> None:
    tenant = factories.tenant_factory()
    with pytest.raises(ValidationError, match="secret is too weak"):
        api_key_issue(tenant=tenant, name="ci", secret=weak)
    strong = api_key_issue(tenant=tenant, name="agent", secret=CHOSEN).api_key
    with pytest.raises(ValidationError, match="secret is too weak"):
        api_key_reissue(api_key=strong, secret=weak)


@pytest.mark.django_db
def test_the_configuration_file_refuses_a_weak_secret_at_its_key() -> None:
    document = f"""
tenants:
  - slug: acme
    name: Acme
    keys:
      - name: ci
        secret: "{SIXTEEN}"
"""
    with pytest.raises(ConfigInvalid) as refused:
        config_apply(document=document, prune=False)
    (problem,) = [str(p) for p in refused.value.problems]
    assert problem.startswith("tenants[0].keys[0].secret: the secret is too weak: it carries at most ")
    assert "a key needs 128" in problem
    assert not ApiKey.objects.exists()
    config_apply(document=document.replace(SIXTEEN, CHOSEN), prune=False)
    assert api_key_get_by_secret(secret=CHOSEN).name == "ci"


@pytest.mark.django_db
def test_the_migration_converts_stored_sha256_hashes_without_the_secrets() -> None:
    tenant = factories.tenant_factory()
    old = api_key_issue(tenant=tenant, name="old", secret=CHOSEN)
    _old_format(old.api_key, CHOSEN)
    assert api_key_get_by_secret(secret=CHOSEN) is None  # the old format no longer matches
    _migrate()
    converted = ApiKey.objects.get(pk=old.api_key.pk)
    assert api_key_get_by_secret(secret=CHOSEN) == converted
    assert converted.secret_hash == key_hash(CHOSEN)
    assert converted.prefix == "#" + converted.secret_hash[:8] and CHOSEN[:4] not in converted.prefix


@pytest.mark.slow
def test_a_key_stored_in_the_old_format_still_opens_the_gateway_after_the_migration(
    transactional_db: None, gateway_url: str, demo_backend_url: str
) -> None:
    tenant = factories.tenant_factory()
    issued = api_key_issue(tenant=tenant, name="old")
    backend = factories.backend_factory(tenant=tenant, urls=[demo_backend_url])
    host = factories.virtual_host_factory(tenant=tenant, mounts={"demo": backend})
    _old_format(issued.api_key, issued.secret)
    _migrate()
    url = f"{gateway_url}/mcp/{tenant.slug}/{host.slug}"
    answer = message_of(modern(url, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 40}}, key=issued.secret))
    assert answer["result"]["content"][0]["text"] == "42.0"
    assert modern(url, "tools/list", key=issued.secret[:-1] + "x").status_code == 401
