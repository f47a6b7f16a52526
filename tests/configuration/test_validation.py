"""The pure validator: no database, every problem reported with its path."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from apps.configuration.document import ConfigInvalid, MountSpec
from apps.configuration.validation import config_parse
from tests.configuration.documents import README_EXAMPLE, full_example

BASE = """\
tenants:
  - slug: acme
    name: Acme
    teams: [platform]
    keys:
      - name: agent
        team: platform
backends:
  - tenant: acme
    name: demo
    urls: ["http://127.0.0.1:9001/mcp"]
virtual_hosts:
  - tenant: acme
    slug: main
    backends: {demo: demo}
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigInvalid) as excinfo:
        config_parse(text)
    return [str(p) for p in excinfo.value.problems]


def test_readme_example_parses_into_typed_values() -> None:
    document = config_parse(README_EXAMPLE)
    (tenant,) = document.tenants
    assert (tenant.slug, tenant.name, tenant.teams) == ("acme", "Acme Corp", ("platform",))
    assert tenant.keys[0].secret == "acme-agent-0123456789abcdef"
    assert document.backends[0].urls == ("http://127.0.0.1:9001/mcp",)
    assert document.backends[0].timeout_seconds == 60.0
    assert document.virtual_hosts[0].mounts == (MountSpec(map_key="demo", backend="demo"),)


def test_full_example_parses() -> None:
    document = config_parse(full_example())
    assert [t.slug for t in document.tenants] == ["acme", "globex"]
    notebook = document.tenants[0].keys[1]
    assert notebook.expires_at == datetime(2030, 1, 31, tzinfo=UTC)


def test_empty_document_is_an_empty_configuration() -> None:
    assert config_parse("").tenants == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("colour: blue\n", "colour: unknown top-level key"),
        ("- a\n", "(document): must be a mapping"),
        ("tenants: {}\n", "tenants: must be a list"),
        ("tenants:\n  - slug: acme\n", "tenants[0].name: is required"),
        ("tenants:\n  - {slug: Acme, name: A}\n", "tenants[0].slug: a tenant's slug is 1-64 lowercase letters, digits and inner hyphens, not 'Acme'"),
        ("tenants:\n  - {slug: a, name: A}\n  - {slug: a, name: B}\n", "tenants[1].slug: duplicate tenant 'a'"),
        ("tenants:\n  - {slug: a, name: A, owner: me}\n", "tenants[0].owner: unknown field"),
        ("tenants:\n  - {slug: a, name: A, teams: [x, x]}\n", "tenants[0].teams[1]: duplicate team 'x'"),
        ("tenants:\n  - {slug: a, name: A, keys: [{name: k, team: t}]}\n", "tenants[0].keys[0].team: unknown team 't'"),
        ("tenants:\n  - {slug: a, name: A, keys: [{name: k}, {name: k}]}\n", "tenants[0].keys[1].name: duplicate key 'k'"),
        ("tenants:\n  - {slug: a, name: A}\n  - {slug: b, name: B, keys: [{name: k, secret: short}]}\n",
         "tenants[1].keys[0].secret: the secret is too weak: it uses fewer than 10 different characters"),
        ("tenants:\n  - {slug: a, name: A, keys: [{name: k, secret: '0123456789abcdefg'}]}\n",
         "tenants[0].keys[0].secret: the secret is too weak: it carries at most 87 bits, and a key needs 128"),
        ("tenants:\n  - {slug: a, name: A, keys: [{name: k, secret: 1234567890123456789}]}\n",
         "tenants[0].keys[0].secret: the secret must be a string"),
        ("tenants:\n  - {slug: a, name: A, keys: [{name: k, secret: 'has a space 0123456789'}]}\n",
         "tenants[0].keys[0].secret: the secret must not contain whitespace"),
        ("tenants:\n  - {slug: a, name: A, keys: [{name: k, secret: 'Xq3-vT9_pL2mZ8rW4kN7bY6'}]}\n"
         "  - {slug: b, name: B, keys: [{name: k, secret: 'Xq3-vT9_pL2mZ8rW4kN7bY6'}]}\n",
         "tenants[1].keys[0].secret: same secret as tenants[0].keys[0]"),
        ("tenants:\n  - {slug: a, name: A, keys: [{name: k, expires_at: 2030-01-01}]}\n",
         "tenants[0].keys[0].expires_at: must be an ISO 8601 timestamp"),
        ("tenants:\n  - {slug: a, name: A, keys: [{name: k, expires_at: '2030-01-01T00:00:00'}]}\n",
         "tenants[0].keys[0].expires_at: must include a timezone"),
        ("tenants:\n  - {slug: a, name: A, keys: [{name: k, revoked: 'yes'}]}\n",
         "tenants[0].keys[0].revoked: must be true or false"),
        ("backends:\n  - {tenant: ghost, name: b, urls: ['http://x:1/']}\n", "backends[0].tenant: unknown tenant 'ghost'"),
        ("tenants: [{slug: a, name: A}]\nbackends:\n  - {tenant: a, name: b, urls: ['ftp://x/']}\n",
         "backends[0].urls[0]: invalid URL 'ftp://x/'"),
        ("tenants: [{slug: a, name: A}]\nbackends:\n  - {tenant: a, name: b, urls: []}\n",
         "backends[0].urls: a backend needs at least one replica URL"),
        ("tenants: [{slug: a, name: A}]\nbackends:\n  - {tenant: a, name: b, urls: ['http://x:1/', 'http://x:1/']}\n",
         "backends[0].urls[1]: replica URLs must be distinct"),
        ("tenants: [{slug: a, name: A}]\nbackends:\n  - {tenant: a, name: '-b', urls: ['http://x:1/']}\n",
         "backends[0].name: invalid backend name '-b'"),
        ("tenants: [{slug: a, name: A}]\nbackends:\n  - {tenant: a, name: b, kind: rest, urls: ['http://x:1/']}\n",
         "backends[0].kind: must be one of: mcp"),
        ("tenants: [{slug: a, name: A}]\nbackends:\n  - {tenant: a, name: b, transport: ws, urls: ['http://x:1/']}\n",
         "backends[0].transport: must be one of: streamable-http, sse"),
        ("tenants: [{slug: a, name: A}]\nbackends:\n  - {tenant: a, name: b, timeout_seconds: 0, urls: ['http://x:1/']}\n",
         "backends[0].timeout_seconds: timeout_seconds must be a positive number"),
        ("tenants: [{slug: a, name: A}]\nbackends:\n  - {tenant: a, name: b, urls: ['http://x:1/']}\n"
         "  - {tenant: a, name: b, urls: ['http://y:1/']}\n", "backends[1].name: duplicate backend 'b'"),
        (BASE.replace("{demo: demo}", "{x: nope}"), "virtual_hosts[0].backends.x: unknown backend 'nope'"),
        (BASE.replace("{demo: demo}", "{'-x': demo}"), "virtual_hosts[0].backends.-x: invalid map key '-x'"),
        (BASE + "    tool_aliases: {find: 'docs:search'}\n",
         "virtual_hosts[0].tool_aliases.find: map key 'docs' is not mounted"),
        (BASE + "    tool_aliases: {find: search}\n", "virtual_hosts[0].tool_aliases.find: must be 'map-key:upstream-name'"),
        (BASE + "    tool_aliases: {'bad alias': 'demo:x'}\n", "virtual_hosts[0].tool_aliases.bad alias: invalid alias"),
        (BASE + "    allow_anonymous: true\n", "virtual_hosts[0].anonymous_key: allowing anonymous callers needs an anonymous key"),
        (BASE + "    anonymous_key: nobody\n", "virtual_hosts[0].anonymous_key: unknown key 'nobody'"),
        (BASE + "  - {tenant: acme, slug: main}\n", "virtual_hosts[1].slug: duplicate virtual host 'main'"),
        (BASE + "  - {tenant: nobody, slug: x}\n", "virtual_hosts[1].tenant: unknown tenant 'nobody'"),
        ("tenants:\n  - {slug: a, name: A}\n  - {slug: a, name: A}\n", "tenants[1].slug: duplicate tenant 'a'"),
        ("tenants: [{slug: a, name: A}]\ntenants: []\n", "line 2, column 1: duplicate key 'tenants'"),
        ("tenants: [\n", "line 2, column 1:"),
    ],
)
def test_each_problem_is_reported_with_its_path(text: str, expected: str) -> None:
    assert any(problem.startswith(expected) for problem in _problems(text)), _problems(text)


def test_every_problem_is_reported_together() -> None:
    text = BASE.replace("name: Acme\n", "name: Acme\n    plan: gold\n").replace(
        "team: platform", "team: nope\n        secret: short"
    ).replace("{demo: demo}", "{x: nope}") + "    tool_aliases: {find: 'y:z'}\nextra: 1\n"
    problems = _problems(text)
    for expected in (
        "extra: unknown top-level key",
        "tenants[0].plan: unknown plan 'gold' (add it under plans)",
        "tenants[0].keys[0].team: unknown team 'nope'",
        "tenants[0].keys[0].secret: the secret is too weak",
        "virtual_hosts[0].backends.x: unknown backend 'nope'",
        "virtual_hosts[0].tool_aliases.find: map key 'y' is not mounted",
    ):
        assert any(p.startswith(expected) for p in problems), (expected, problems)


def test_single_label_hosts_are_valid_backend_urls() -> None:
    config_parse(BASE.replace("http://127.0.0.1:9001/mcp", "http://mcp-server:8000/mcp"))
