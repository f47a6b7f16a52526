"""The `rate_limits` section: applied as written, idempotent, refused with a path, pruned, exported."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from apps.configuration.document import ConfigInvalid
from apps.configuration.reports import Action, ApplyReport
from apps.configuration.services import config_apply, config_export
from apps.policies.models import RateLimit
from apps.tenants.models import ApiKey
from apps.tenants.services import api_key_delete
from tests.configuration.documents import README_EXAMPLE, assert_refused_and_nothing_written

pytestmark = pytest.mark.django_db

# Exactly the shape users are told to write; must apply as written.
RATE_LIMITS = """\
rate_limits:
  - {tenant: acme, scope: key, name: agent, limit: 100, window_seconds: 60}
  - {tenant: acme, scope: team, name: platform, limit: 1000, window_seconds: 60}
"""
DOCUMENT = README_EXAMPLE + RATE_LIMITS

# A second tenant whose key and team have the same names as acme's, so that a limit is only ever
# matched within its own tenant. Entries are in an order no sorting would produce.
GLOBEX = """\
  - slug: globex
    name: Globex
    teams: [platform]
    keys:
      - {name: agent, team: platform}
"""
TWO_TENANTS = README_EXAMPLE.replace("backends:\n", GLOBEX + "backends:\n", 1) + """\
rate_limits:
  - {tenant: globex, scope: team, name: platform, limit: 50, window_seconds: 10}
  - {tenant: acme, scope: team, name: platform, limit: 1000, window_seconds: 60}
  - {tenant: globex, scope: key, name: agent, limit: 5, window_seconds: 1}
  - {tenant: acme, scope: key, name: agent, limit: 100, window_seconds: 60}
"""


def _stored() -> list[tuple[str, str, str, int, int]]:
    return list(
        RateLimit.objects.order_by("tenant__slug", "scope", "name").values_list(
            "tenant__slug", "scope", "name", "limit", "window_seconds"
        )
    )


def _actions(report: ApplyReport) -> dict[tuple[str, str], Action]:
    return {(c.kind, c.name): c.action for c in report.changes}


def test_the_documented_shape_applies_as_written() -> None:
    report = config_apply(document=DOCUMENT, prune=False)
    assert _stored() == [("acme", "key", "agent", 100, 60), ("acme", "team", "platform", 1000, 60)]
    actions = _actions(report)
    assert actions[("rate_limit", "acme/key:agent")] is Action.CREATED
    assert actions[("rate_limit", "acme/team:platform")] is Action.CREATED


def test_applying_again_changes_nothing(django_capture_on_commit_callbacks: Callable[..., Any]) -> None:
    config_apply(document=DOCUMENT, prune=False)
    with django_capture_on_commit_callbacks() as callbacks:
        report = config_apply(document=DOCUMENT, prune=True)
    assert not report.changed
    assert _actions(report)[("rate_limit", "acme/key:agent")] is Action.UNCHANGED
    assert _actions(report)[("rate_limit", "acme/team:platform")] is Action.UNCHANGED
    assert callbacks == []  # no configuration version moves


@pytest.mark.parametrize(
    ("old", "new", "detail", "stored"),
    [
        ("limit: 100,", "limit: 200,", "limit", ("acme", "key", "agent", 200, 60)),
        ("limit: 100, window_seconds: 60", "limit: 100, window_seconds: 1", "window_seconds",
         ("acme", "key", "agent", 100, 1)),
        ("limit: 100, window_seconds: 60", "limit: 7, window_seconds: 3", "limit, window_seconds",
         ("acme", "key", "agent", 7, 3)),
    ],
)
def test_a_changed_limit_is_an_update(
    old: str, new: str, detail: str, stored: tuple[str, str, str, int, int],
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    config_apply(document=DOCUMENT, prune=False)
    changed = DOCUMENT.replace(old, new)
    assert changed != DOCUMENT
    with django_capture_on_commit_callbacks() as callbacks:
        report = config_apply(document=changed, prune=False)
    updated = [(c.name, c.detail) for c in report.changes if c.action is Action.UPDATED]
    assert updated == [("acme/key:agent", detail)]
    assert len(callbacks) == 1  # one configuration version bump, for the limit
    assert _stored() == [stored, ("acme", "team", "platform", 1000, 60)]
    assert not config_apply(document=changed, prune=False).changed


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("{tenant: acme, scope: key", "{tenant: globex, scope: key",
         "rate_limits[0].tenant: unknown tenant 'globex' (add it under tenants)"),
        ("name: platform, limit", "name: ops, limit",
         "rate_limits[1].name: unknown team 'ops' (add it to tenant 'acme''s teams)"),
        ("name: agent, limit", "name: robot, limit",
         "rate_limits[0].name: unknown key 'robot' (add it to tenant 'acme''s keys)"),
        ("scope: key, name: agent", "scope: team, name: agent",
         "rate_limits[0].name: unknown team 'agent' (add it to tenant 'acme''s teams)"),
        ("scope: team", "scope: group", "rate_limits[1].scope: must be one of: key, team"),
        ("limit: 100,", "limit: 0,", "rate_limits[0].limit: limit must be a whole number from 1 to 2147483647"),
        ("limit: 100,", 'limit: "10",', "rate_limits[0].limit: limit must be a whole number from 1"),
        ("limit: 100,", "limit: true,", "rate_limits[0].limit: limit must be a whole number from 1"),
        ("limit: 100,", "limit: 1.5,", "rate_limits[0].limit: limit must be a whole number from 1"),
        ("limit: 100,", "limit: 2147483648,", "rate_limits[0].limit: limit must be a whole number from 1"),
        ("window_seconds: 60}", "window_seconds: 0}", "rate_limits[0].window_seconds: window_seconds must be a whole number from 1"),
        ("window_seconds: 60}", "window_seconds: 60, burst: 5}",
         "rate_limits[0].burst: unknown field (expected one of: tenant, scope, name, limit, window_seconds)"),
        (", window_seconds: 60}", "}", "rate_limits[0].window_seconds: is required"),
    ],
)
def test_a_bad_limit_is_refused_at_its_path_and_writes_nothing(old: str, new: str, expected: str) -> None:
    # Stored limits differ from the file's, so a partial write of the file would show.
    stored_first = DOCUMENT.replace("window_seconds: 60", "window_seconds: 30")
    broken = DOCUMENT.replace(old, new, 1)
    assert broken != DOCUMENT
    assert_refused_and_nothing_written(stored_first=stored_first, broken=broken, expected=expected, stored=_stored)


def test_a_second_entry_for_the_same_subject_is_refused() -> None:
    duplicate = "  - {tenant: acme, scope: key, name: agent, limit: 5, window_seconds: 1}\n"
    with pytest.raises(ConfigInvalid) as excinfo:
        config_apply(document=DOCUMENT + duplicate, prune=False)
    assert [str(p) for p in excinfo.value.problems] == [
        "rate_limits[2].name: duplicate rate limit for key 'agent' in tenant 'acme'"
    ]
    assert _stored() == []


def test_without_prune_a_limit_left_out_of_the_file_stays() -> None:
    config_apply(document=DOCUMENT, prune=False)
    key_only = DOCUMENT.split("  - {tenant: acme, scope: team")[0]
    assert key_only != DOCUMENT
    report = config_apply(document=key_only, prune=False)
    assert report.count(Action.DELETED) == 0
    assert _stored() == [("acme", "key", "agent", 100, 60), ("acme", "team", "platform", 1000, 60)]


def test_prune_removes_a_limit_not_in_the_file_and_leaves_other_tenants_alone() -> None:
    config_apply(document=TWO_TENANTS, prune=False)
    without_acme_team = TWO_TENANTS.replace(
        "  - {tenant: acme, scope: team, name: platform, limit: 1000, window_seconds: 60}\n", ""
    )
    assert without_acme_team != TWO_TENANTS
    report = config_apply(document=without_acme_team, prune=True)
    deleted = {(c.kind, c.name) for c in report.changes if c.action is Action.DELETED}
    assert deleted == {("rate_limit", "acme/team:platform")}
    assert _stored() == [
        ("acme", "key", "agent", 100, 60),
        ("globex", "key", "agent", 5, 1),
        ("globex", "team", "platform", 50, 10),
    ]
    assert not config_apply(document=without_acme_team, prune=True).changed


def test_export_then_apply_changes_nothing() -> None:
    config_apply(document=TWO_TENANTS, prune=False)
    exported = config_export()
    assert yaml.safe_load(exported)["rate_limits"] == [  # by tenant, scope, name
        {"tenant": "acme", "scope": "key", "name": "agent", "limit": 100, "window_seconds": 60},
        {"tenant": "acme", "scope": "team", "name": "platform", "limit": 1000, "window_seconds": 60},
        {"tenant": "globex", "scope": "key", "name": "agent", "limit": 5, "window_seconds": 1},
        {"tenant": "globex", "scope": "team", "name": "platform", "limit": 50, "window_seconds": 10},
    ]
    report = config_apply(document=exported, prune=True)
    assert not report.changed
    assert _actions(report)[("rate_limit", "globex/team:platform")] is Action.UNCHANGED
    assert config_export() == exported


def test_a_limit_whose_key_is_gone_is_not_exported() -> None:
    # Deleting a key leaves its limit behind; an export naming the key would not apply.
    config_apply(document=DOCUMENT, prune=False)
    api_key_delete(api_key=ApiKey.objects.get(tenant__slug="acme", name="agent"))
    exported = config_export()
    assert yaml.safe_load(exported)["rate_limits"] == [
        {"tenant": "acme", "scope": "team", "name": "platform", "limit": 1000, "window_seconds": 60},
    ]
    assert not config_apply(document=exported, prune=False).changed


def test_a_tenant_without_limits_exports_an_empty_section() -> None:
    config_apply(document=README_EXAMPLE, prune=False)
    assert yaml.safe_load(config_export())["rate_limits"] == []
