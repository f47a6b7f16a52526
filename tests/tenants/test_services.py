from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from django.core.exceptions import ValidationError

from apps.tenants.keys import KEY_PREFIX, key_hash
from apps.tenants.models import ApiKey, Tenant, TokenIssuer
from apps.tenants.selectors import api_key_get_by_secret
from apps.tenants.services import (
    api_key_delete,
    api_key_issue,
    api_key_reissue,
    api_key_revoke,
    api_key_update,
    team_delete,
    tenant_create,
    tenant_delete,
    token_issuer_set,
)
from tests.factories import (
    api_key_factory,
    backend_factory,
    team_factory,
    tenant_factory,
    virtual_host_factory,
)

pytestmark = pytest.mark.django_db


def test_tenant_create_rejects_bad_and_duplicate_slugs() -> None:
    tenant_create(slug="acme", name="Acme")
    with pytest.raises(ValidationError):
        tenant_create(slug="acme", name="Again")
    with pytest.raises(ValidationError):
        tenant_create(slug="Not A Slug", name="x")
    assert Tenant.objects.count() == 1


def test_generated_key_is_returned_once_and_only_its_hash_is_stored() -> None:
    tenant = tenant_factory()
    issued = api_key_issue(tenant=tenant, name="agent")
    assert issued.secret.startswith(KEY_PREFIX)
    stored = ApiKey.objects.get(pk=issued.api_key.pk)
    assert stored.secret_hash == key_hash(issued.secret)
    assert issued.secret not in repr(issued)
    assert issued.secret.startswith(stored.prefix + "_")  # its public id, before the secret part
    assert api_key_get_by_secret(secret=issued.secret) == stored


def test_supplied_secret_is_used_and_must_be_strong_enough_and_unused() -> None:
    tenant = tenant_factory()
    secret = "Xq3-vT9_pL2mZ8rW4kN7bY6"
    assert api_key_issue(tenant=tenant, name="a", secret=secret).api_key.secret_hash == key_hash(secret)
    with pytest.raises(ValidationError, match="too weak"):
        api_key_issue(tenant=tenant, name="b", secret="Xq3-vT9_pL2mZ8r")
    with pytest.raises(ValidationError, match="already uses"):
        api_key_issue(tenant=tenant_factory(), name="c", secret=secret)
    with pytest.raises(ValidationError, match="whitespace"):
        api_key_issue(tenant=tenant, name="d", secret="with a space in it!")


def test_key_team_must_belong_to_the_tenant() -> None:
    other_team = team_factory()
    with pytest.raises(ValidationError):
        api_key_issue(tenant=tenant_factory(), name="agent", team=other_team)


def test_reissue_replaces_the_secret_in_place() -> None:
    issued = api_key_factory()
    again = api_key_reissue(api_key=issued.api_key)
    assert again.api_key.pk == issued.api_key.pk
    assert api_key_get_by_secret(secret=issued.secret) is None
    assert api_key_get_by_secret(secret=again.secret) == issued.api_key


def test_revoked_key_stays_revoked_and_cannot_be_reissued() -> None:
    key = api_key_factory().api_key
    first = api_key_revoke(api_key=key).revoked_at
    assert first is not None
    assert api_key_revoke(api_key=key).revoked_at == first
    with pytest.raises(ValidationError):
        api_key_reissue(api_key=key)


def test_update_sets_team_and_expiry() -> None:
    team = team_factory()
    key = api_key_factory(tenant=team.tenant).api_key
    api_key_update(api_key=key, team=team, expires_at=None)
    assert ApiKey.objects.get(pk=key.pk).team == team


def test_deleting_a_team_keeps_its_keys() -> None:
    team = team_factory()
    key = api_key_factory(team=team).api_key
    team_delete(team=team)
    assert ApiKey.objects.get(pk=key.pk).team is None


def test_anonymous_key_cannot_be_deleted_while_a_vhost_uses_it() -> None:
    from apps.catalog.services import virtual_host_update

    host = virtual_host_factory()
    key = api_key_factory(tenant=host.tenant).api_key
    virtual_host_update(virtual_host=host, allow_anonymous=True, anonymous_key=key)
    with pytest.raises(ValidationError, match="anonymous"):
        api_key_delete(api_key=key)


def test_tenant_delete_removes_everything_it_owns() -> None:
    tenant = tenant_factory()
    backend = backend_factory(tenant=tenant)
    virtual_host_factory(tenant=tenant, mounts={"a": backend})
    api_key_factory(tenant=tenant)
    tenant_delete(tenant=tenant)
    assert not Tenant.objects.filter(pk=tenant.pk).exists()
    assert not ApiKey.objects.filter(tenant_id=tenant.pk).exists()


def _pem(key: object) -> str:
    return key.public_key().public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


@pytest.mark.parametrize(
    ("key", "algorithms", "problem"),
    [
        (ec.generate_private_key(ec.SECP256R1()), ["RS256"], "verifies ES256 tokens, but algorithms lists only RS256"),
        (rsa.generate_private_key(public_exponent=65537, key_size=2048), ["ES256", "EdDSA"],
         "verifies RS256 tokens, but algorithms lists only ES256, EdDSA"),
        (ec.generate_private_key(ec.SECP384R1()), ["ES256"], "of a type none of RS256, ES256, EdDSA uses"),
        (None, ["ES256"], "not a PEM public key"),
    ],
)
def test_an_issuers_public_key_must_verify_one_of_its_algorithms(key: object, algorithms: list[str], problem: str) -> None:
    tenant = tenant_factory()
    pem = _pem(key) if key is not None else "-----BEGIN PUBLIC KEY-----\nnot base64\n-----END PUBLIC KEY-----\n"
    with pytest.raises(ValidationError, match=problem):
        token_issuer_set(tenant=tenant, issuer="https://idp", audience="gw", public_key=pem, algorithms=algorithms)
    assert not TokenIssuer.objects.filter(tenant=tenant).exists()
    edwards = ed25519.Ed25519PrivateKey.generate()
    token_issuer_set(tenant=tenant, issuer="https://idp", audience="gw", public_key=_pem(edwards), algorithms=["EdDSA"])
    assert TokenIssuer.objects.get(tenant=tenant).algorithms == ["EdDSA"]
