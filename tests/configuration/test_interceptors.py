"""A virtual host's `interceptors` section in `gateway apply` / export (apps/configuration/interceptors.py):
applied as written in order, idempotent, exported, kept when a document leaves it out (removed with
`--prune`), and refused with a path, writing nothing."""

from __future__ import annotations

import pytest
import yaml

from apps.catalog.credentials import tenant_secret_set
from apps.configuration.reports import Action
from apps.configuration.services import config_apply, config_export
from apps.policies.models import Interceptor
from apps.tenants.models import Tenant
from tests.configuration.documents import README_EXAMPLE, assert_refused_and_nothing_written

pytestmark = pytest.mark.django_db

INTERCEPTORS = """\
    interceptors:
      - {name: secrets, kind: secrets}
      - name: cards
        kind: personal_data
        methods: [tools/call]
        settings: {types: {card: refuse}}
      - name: big
        kind: size
        settings: {max_bytes: 20000, action: truncate}
        enabled: false
"""
DOCUMENT = README_EXAMPLE + INTERCEPTORS


def _stored() -> list[tuple[object, ...]]:
    return list(Interceptor.objects.order_by("position").values_list(
        "position", "name", "kind", "phases", "methods", "settings", "enabled"))


def test_the_section_applies_in_order_exports_and_applies_again_unchanged() -> None:
    report = config_apply(document=DOCUMENT, prune=False)
    assert _stored() == [
        (0, "secrets", "secrets", ["request", "result"], ["tools/call", "resources/read", "prompts/get"], {}, True),
        (1, "cards", "personal_data", ["request", "result"], ["tools/call"], {"types": {"card": "refuse"}}, True),
        (2, "big", "size", ["result"], ["tools/call", "resources/read", "prompts/get"],
         {"max_bytes": 20000, "action": "truncate"}, False),
    ]
    assert [(c.kind, c.action, c.detail) for c in report.changes if c.kind == "interceptors"] == [
        ("interceptors", Action.CREATED, "secrets, cards, big")]
    host = next(h for h in yaml.safe_load(config_export())["virtual_hosts"] if h["slug"] == "main")
    assert host["interceptors"] == [
        {"name": "secrets", "kind": "secrets"},
        {"name": "cards", "kind": "personal_data", "methods": ["tools/call"], "settings": {"types": {"card": "refuse"}}},
        {"name": "big", "kind": "size", "settings": {"max_bytes": 20000, "action": "truncate"}, "enabled": False},
    ]
    assert not config_apply(document=DOCUMENT, prune=True).changed
    assert not config_apply(document=config_export(), prune=True).changed  # the export applies as it is
    # Reordered: the chain is the document's.
    swapped = README_EXAMPLE + "    interceptors: [{name: cards, kind: personal_data}, {name: secrets, kind: secrets}]\n"
    config_apply(document=swapped, prune=False)
    assert [row[1] for row in _stored()] == ["cards", "secrets"]
    # Left out: kept without --prune (made in the console, say), removed with it.
    config_apply(document=README_EXAMPLE, prune=False)
    assert len(_stored()) == 2
    config_apply(document=README_EXAMPLE, prune=True)
    assert _stored() == []


def test_a_webhook_names_a_tenant_secret_and_the_export_names_it_back() -> None:
    config_apply(document=README_EXAMPLE, prune=False)
    tenant_secret_set(tenant=Tenant.objects.get(slug="acme"), name="hook-key", value="k" * 32)
    hook = ('    interceptors:\n      - {name: review, kind: webhook, phases: [result], '
            'settings: {url: "https://hooks.example.com/mcp", secret: hook-key, failure: open}}\n')
    config_apply(document=README_EXAMPLE + hook, prune=False)
    row = Interceptor.objects.get()
    assert row.secret.name == "hook-key" and "secret" not in row.settings
    host = next(h for h in yaml.safe_load(config_export())["virtual_hosts"] if h["slug"] == "main")
    assert host["interceptors"][0]["settings"] == {"url": "https://hooks.example.com/mcp", "secret": "hook-key",
                                                   "failure": "open"}
    assert "k" * 32 not in config_export()


@pytest.mark.parametrize(("section", "expected"), [
    ("      - {name: x, kind: antivirus}\n", "virtual_hosts[0].interceptors[0].kind: kind must be one of"),
    ("      - {name: Bad Name, kind: secrets}\n", "virtual_hosts[0].interceptors[0].name: name must be"),
    ("      - {name: x, kind: size, phases: [request]}\n", "virtual_hosts[0].interceptors[0].phases: phases must be"),
    ("      - {name: x, kind: secrets, settings: {action: shred}}\n",
     "virtual_hosts[0].interceptors[0].settings.action"),
    ("      - {name: x, kind: webhook, settings: {url: 'http://hooks.example.com', secret: s}}\n",
     "virtual_hosts[0].interceptors[0].settings.url: url must be https"),
    ("      - {name: x, kind: secrets}\n      - {name: x, kind: injection}\n",
     "virtual_hosts[0].interceptors[1].name: the name 'x' is used by another interceptor"),
    ("      - {name: x, kind: secrets, targets: ['a[']}\n", "virtual_hosts[0].interceptors[0].targets: the glob"),
    ("      - {name: x, kind: webhook, settings: {url: 'https://h.example', secret: missing}}\n",
     "virtual_hosts[0].interceptors: the tenant has no secret named 'missing'"),
])
def test_a_wrong_interceptor_is_refused_at_its_path_and_nothing_is_written(section: str, expected: str) -> None:
    assert_refused_and_nothing_written(stored_first=DOCUMENT, broken=README_EXAMPLE + "    interceptors:\n" + section,
                                       expected=expected, stored=_stored)
