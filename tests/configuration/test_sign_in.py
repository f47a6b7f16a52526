"""A tenant's `sign_in` in `gateway apply` / export: the gateway's authorization server for its hosts."""

from __future__ import annotations

import pytest
import yaml

from apps.configuration.services import config_apply, config_export
from apps.oauth.models import AuthorizationServer
from tests.configuration.documents import README_EXAMPLE, assert_refused_and_nothing_written

pytestmark = pytest.mark.django_db


def _with(sign_in: str) -> str:
    return README_EXAMPLE.replace("    teams: [platform]\n", f"    teams: [platform]\n    sign_in: {sign_in}\n", 1)


def _stored() -> tuple[bool, bool, bool] | None:
    server = AuthorizationServer.objects.filter(tenant__slug="acme").first()
    return (server.enabled, server.allow_registration, server.allow_metadata_documents) if server else None


def _exported() -> object:
    return next(t for t in yaml.safe_load(config_export())["tenants"] if t["slug"] == "acme").get("sign_in")


def test_sign_in_applies_exports_and_applies_again_unchanged() -> None:
    config_apply(document=README_EXAMPLE, prune=False)
    assert _stored() is None and _exported() is None
    report = config_apply(document=_with("true"), prune=False)
    assert _stored() == (True, True, True) and _exported() is True
    assert any("sign-in on" in str(c) for c in report.changes), report.changes
    key = AuthorizationServer.objects.get().key_id
    assert all(c.action == "unchanged" for c in config_apply(document=_with("true"), prune=False).changes)
    config_apply(document=_with("{registration: false}"), prune=False)
    assert _stored() == (True, False, True) and _exported() == {"registration": False, "metadata_documents": True}
    config_apply(document=_with("false"), prune=False)
    assert _stored() == (False, False, True) and _exported() is False
    config_apply(document=README_EXAMPLE, prune=True)  # saying nothing leaves it, also with --prune
    assert _stored() == (False, False, True)
    config_apply(document=_with("true"), prune=False)
    assert AuthorizationServer.objects.get().key_id == key  # switched back on: the same key


@pytest.mark.parametrize(("value", "expected"), [
    ('"yes"', "tenants[0].sign_in: sign_in must be true, false, or a mapping"),
    ("{registration: maybe}", "tenants[0].sign_in.registration: registration must be true or false"),
    ("{dcr: true}", "tenants[0].sign_in.dcr: unknown field"),
])
def test_a_bad_sign_in_is_refused_and_nothing_written(value: str, expected: str) -> None:
    assert_refused_and_nothing_written(stored_first=_with("true"), broken=_with(value), expected=expected, stored=_stored)
