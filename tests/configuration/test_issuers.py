"""The `token_issuers` section: applied as written, idempotent, refused with a path, pruned, exported."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from apps.configuration.document import ConfigInvalid
from apps.configuration.reports import Action, ApplyReport
from apps.configuration.services import config_apply, config_export
from apps.tenants.models import TokenIssuer
from tests.configuration.documents import DOCS, README_EXAMPLE, assert_refused_and_nothing_written

pytestmark = pytest.mark.django_db

_PRIVATE_KEY = ec.generate_private_key(ec.SECP256R1())
PUBLIC_PEM = (
    _PRIVATE_KEY.public_key()
    .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    .decode()
)
PRIVATE_PEM = _PRIVATE_KEY.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
).decode()
ALL_ALGORITHMS = ["RS256", "ES256", "EdDSA"]


def _pem_block(pem: str) -> str:
    """`pem` as a YAML literal block under `public_key:` in a list entry."""
    return "|\n" + textwrap.indent(pem, " " * 6)


# Exactly the shape users are told to write: a JWKS issuer with every field, and a PEM one with
# only what is required.
JWKS_ISSUER = """\
  - tenant: acme
    issuer: "https://login.acme.example/"      # the tokens' `iss`, exactly
    audience: "https://gateway.acme.example/mcp"
    jwks_url: "https://login.acme.example/.well-known/jwks.json"
    algorithms: [RS256, ES256]                  # optional; default all of RS256, ES256, EdDSA
    team_claim: team                            # optional, default "team"
    subject_claim: sub                          # optional, default "sub"
"""
PEM_ISSUER = """\
  - tenant: acme
    issuer: "https://idp.acme.example"
    audience: "https://gateway.acme.example/mcp"
    public_key: """ + _pem_block(PUBLIC_PEM)
DOCUMENT = README_EXAMPLE + "token_issuers:\n" + JWKS_ISSUER + PEM_ISSUER

JWKS_STORED = (
    "acme", "https://login.acme.example/", "https://gateway.acme.example/mcp",
    "https://login.acme.example/.well-known/jwks.json", "", ["RS256", "ES256"], "team", "sub",
)
PEM_STORED = (
    "acme", "https://idp.acme.example", "https://gateway.acme.example/mcp", "", PUBLIC_PEM, ALL_ALGORITHMS,
    "team", "sub",
)

# A second tenant trusting an issuer of the same name as acme's, so that an issuer is only ever
# matched within its own tenant. Entries are in an order no sorting would produce.
GLOBEX = """\
  - slug: globex
    name: Globex
"""
TWO_TENANTS = README_EXAMPLE.replace("backends:\n", GLOBEX + "backends:\n", 1) + """\
token_issuers:
  - tenant: globex
    issuer: "https://login.acme.example/"
    audience: globex-gateway
    jwks_url: "http://127.0.0.1:9100/jwks.json"
    subject_claim: email
  - tenant: acme
    issuer: "https://login.acme.example/"
    audience: "https://gateway.acme.example/mcp"
    jwks_url: "https://login.acme.example/.well-known/jwks.json"
  - tenant: globex
    issuer: "https://auth.globex.example"
    audience: globex-gateway
    public_key: """ + _pem_block(PUBLIC_PEM) + """\
    algorithms: [ES256]
    team_claim: groups
""" + PEM_ISSUER


def _stored() -> list[tuple[Any, ...]]:
    return list(
        TokenIssuer.objects.order_by("tenant__slug", "issuer").values_list(
            "tenant__slug", "issuer", "audience", "jwks_url", "public_key", "algorithms", "team_claim",
            "subject_claim",
        )
    )


def _actions(report: ApplyReport) -> dict[tuple[str, str], Action]:
    return {(c.kind, c.name): c.action for c in report.changes}


def test_the_documented_shape_applies_as_written() -> None:
    report = config_apply(document=DOCUMENT, prune=False)
    assert _stored() == [PEM_STORED, JWKS_STORED]
    actions = _actions(report)
    assert actions[("token_issuer", "acme/https://login.acme.example/")] is Action.CREATED
    assert actions[("token_issuer", "acme/https://idp.acme.example")] is Action.CREATED


def test_the_example_in_the_docs_applies() -> None:
    blocks = re.findall(r"```yaml\n(token_issuers:\n.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1
    config_apply(document=README_EXAMPLE + blocks[0], prune=False)
    assert _stored() == [JWKS_STORED]


def test_applying_again_changes_nothing(django_capture_on_commit_callbacks: Callable[..., Any]) -> None:
    config_apply(document=DOCUMENT, prune=False)
    with django_capture_on_commit_callbacks() as callbacks:
        report = config_apply(document=DOCUMENT, prune=True)
    assert not report.changed
    assert _actions(report)[("token_issuer", "acme/https://login.acme.example/")] is Action.UNCHANGED
    assert _actions(report)[("token_issuer", "acme/https://idp.acme.example")] is Action.UNCHANGED
    assert callbacks == []  # no configuration version moves


@pytest.mark.parametrize(
    ("old", "new", "detail", "changed"),
    [
        ('audience: "https://gateway.acme.example/mcp"\n    jwks_url', 'audience: other\n    jwks_url', "audience",
         {"audience": "other"}),
        ("algorithms: [RS256, ES256]", "algorithms: [ES256]", "algorithms", {"algorithms": ["ES256"]}),
        ("algorithms: [RS256, ES256]                  #", "#", "algorithms", {"algorithms": ALL_ALGORITHMS}),
        ("team_claim: team ", "team_claim: groups ", "team_claim", {"team_claim": "groups"}),
        ("subject_claim: sub ", "subject_claim: email ", "subject_claim", {"subject_claim": "email"}),
        ('jwks_url: "https://login.acme.example/.well-known/jwks.json"', "public_key: " + _pem_block(PUBLIC_PEM),
         "jwks_url, public_key", {"jwks_url": "", "public_key": PUBLIC_PEM}),
    ],
)
def test_a_changed_issuer_is_an_update(
    old: str, new: str, detail: str, changed: dict[str, Any],
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    config_apply(document=DOCUMENT, prune=False)
    changed_document = DOCUMENT.replace(old, new, 1)
    assert changed_document != DOCUMENT
    with django_capture_on_commit_callbacks() as callbacks:
        report = config_apply(document=changed_document, prune=False)
    updated = [(c.name, c.detail) for c in report.changes if c.action is Action.UPDATED]
    assert updated == [("acme/https://login.acme.example/", detail)]
    assert len(callbacks) == 1  # one configuration version bump, for the issuer
    fields = ("tenant", "issuer", "audience", "jwks_url", "public_key", "algorithms", "team_claim", "subject_claim")
    expected = tuple(changed.get(field, value) for field, value in zip(fields, JWKS_STORED, strict=True))
    assert _stored() == [PEM_STORED, expected]
    assert not config_apply(document=changed_document, prune=False).changed


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("  - tenant: acme\n    issuer: \"https://login", "  - tenant: globex\n    issuer: \"https://login",
         "token_issuers[0].tenant: unknown tenant 'globex' (add it under tenants)"),
        ('issuer: "https://login.acme.example/"', 'issuer: ""', "token_issuers[0].issuer: issuer must be 1-500 characters"),
        ('    audience: "https://gateway.acme.example/mcp"\n    jwks_url', "    jwks_url",
         "token_issuers[0].audience: is required"),
        ('    jwks_url: "https://login.acme.example/.well-known/jwks.json"\n', "",
         "token_issuers[0].jwks_url: give exactly one of jwks_url and public_key"),
        ("    public_key: ", '    jwks_url: "https://idp.acme.example/jwks"\n    public_key: ',
         "token_issuers[1].jwks_url: give exactly one of jwks_url and public_key"),
        ('jwks_url: "https://login', 'jwks_url: "ftp://login', "token_issuers[0].jwks_url: jwks_url must be an http:// or https:// URL"),
        ('jwks_url: "https://login.acme.example/.well-known/jwks.json"', 'jwks_url: "login.acme.example/jwks.json"',
         "token_issuers[0].jwks_url: jwks_url must be an http:// or https:// URL"),
        (_pem_block(PUBLIC_PEM), "not a key\n",
         "token_issuers[1].public_key: public_key is not a PEM public key ('-----BEGIN PUBLIC KEY----- ...')"),
        (_pem_block(PUBLIC_PEM), _pem_block(PUBLIC_PEM.replace("A", "B", 3)), "token_issuers[1].public_key: public_key is not a PEM"),
        ("    public_key: ", "    algorithms: [RS256]\n    public_key: ",
         "token_issuers[1].public_key: the public key verifies ES256 tokens, but algorithms lists only RS256"),
        ("algorithms: [RS256, ES256]", "algorithms: [RS256, HS256]",
         "token_issuers[0].algorithms: algorithms must be a list of one or more of RS256, ES256, EdDSA, each once"),
        ("algorithms: [RS256, ES256]", "algorithms: [none]",
         "token_issuers[0].algorithms: algorithms must be a list of one or more of RS256, ES256, EdDSA, each once"),
        ("algorithms: [RS256, ES256]", "algorithms: []",
         "token_issuers[0].algorithms: algorithms must be a list of one or more of RS256, ES256, EdDSA, each once"),
        ("algorithms: [RS256, ES256]", "algorithms: RS256",
         "token_issuers[0].algorithms: algorithms must be a list of one or more of RS256, ES256, EdDSA, each once"),
        ("algorithms: [RS256, ES256]", "algorithms: [ES256, ES256]",
         "token_issuers[0].algorithms: algorithms must be a list of one or more of RS256, ES256, EdDSA, each once"),
        ("team_claim: team ", 'team_claim: "" ', "token_issuers[0].team_claim: team_claim must be 1-100 characters"),
        ("subject_claim: sub ", f"subject_claim: {'s' * 101} ", "token_issuers[0].subject_claim: subject_claim must be 1-100 characters"),
        ("subject_claim: sub ", "subject_claim: sub\n    leeway: 30 ",
         "token_issuers[0].leeway: unknown field (expected one of: tenant, issuer, audience, jwks_url, public_key, "
         "algorithms, team_claim, subject_claim)"),
    ],
)
def test_a_bad_issuer_is_refused_at_its_path_and_writes_nothing(old: str, new: str, expected: str) -> None:
    # Stored issuers differ from the file's, so a partial write of the file would show.
    stored_first = DOCUMENT.replace("https://gateway.acme.example/mcp", "stored-audience")
    broken = DOCUMENT.replace(old, new, 1)
    assert broken != DOCUMENT
    assert_refused_and_nothing_written(stored_first=stored_first, broken=broken, expected=expected, stored=_stored)


def test_a_private_key_is_refused_without_being_quoted() -> None:
    # Pasting the private key instead of the public one is the likely mistake, and problems are
    # printed: none of the key may appear in them.
    broken = DOCUMENT.replace(_pem_block(PUBLIC_PEM), _pem_block(PRIVATE_PEM))
    assert broken != DOCUMENT
    with pytest.raises(ConfigInvalid) as excinfo:
        config_apply(document=broken, prune=False)
    assert [p.path for p in excinfo.value.problems] == ["token_issuers[1].public_key"]
    body = [line for line in PRIVATE_PEM.splitlines() if not line.startswith("-----")]
    assert not any(line in str(excinfo.value) for line in body)
    assert _stored() == []


def test_a_second_entry_for_the_same_issuer_is_refused() -> None:
    duplicate = PEM_ISSUER.replace("https://idp.acme.example", "https://login.acme.example/")
    with pytest.raises(ConfigInvalid) as excinfo:
        config_apply(document=DOCUMENT + duplicate, prune=False)
    assert [str(p) for p in excinfo.value.problems] == [
        "token_issuers[2].issuer: duplicate token issuer 'https://login.acme.example/' in tenant 'acme'"
    ]
    assert _stored() == []


def test_without_prune_an_issuer_left_out_of_the_file_stays() -> None:
    config_apply(document=DOCUMENT, prune=False)
    jwks_only = DOCUMENT.replace(PEM_ISSUER, "")
    assert jwks_only != DOCUMENT
    report = config_apply(document=jwks_only, prune=False)
    assert report.count(Action.DELETED) == 0
    assert _stored() == [PEM_STORED, JWKS_STORED]


def test_prune_removes_an_issuer_not_in_the_file_and_leaves_other_tenants_alone(
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    config_apply(document=TWO_TENANTS, prune=False)
    before = _stored()
    # globex keeps an issuer of the same name: only acme's goes.
    acme_jwks = """\
  - tenant: acme
    issuer: "https://login.acme.example/"
    audience: "https://gateway.acme.example/mcp"
    jwks_url: "https://login.acme.example/.well-known/jwks.json"
"""
    without_acme_jwks = TWO_TENANTS.replace(acme_jwks, "")
    assert without_acme_jwks != TWO_TENANTS
    with django_capture_on_commit_callbacks() as callbacks:
        report = config_apply(document=without_acme_jwks, prune=True)
    deleted = {(c.kind, c.name) for c in report.changes if c.action is Action.DELETED}
    assert deleted == {("token_issuer", "acme/https://login.acme.example/")}
    assert len(callbacks) == 1  # the one deletion
    assert _stored() == [row for row in before if row[:2] != ("acme", "https://login.acme.example/")]
    assert [row[:2] for row in _stored()] == [
        ("acme", "https://idp.acme.example"),
        ("globex", "https://auth.globex.example"),
        ("globex", "https://login.acme.example/"),
    ]
    assert not config_apply(document=without_acme_jwks, prune=True).changed


def test_export_then_apply_changes_nothing() -> None:
    config_apply(document=TWO_TENANTS, prune=False)
    exported = config_export()
    assert yaml.safe_load(exported)["token_issuers"] == [  # by tenant, issuer; defaults left out
        {"tenant": "acme", "issuer": "https://idp.acme.example", "audience": "https://gateway.acme.example/mcp",
         "public_key": PUBLIC_PEM},
        {"tenant": "acme", "issuer": "https://login.acme.example/", "audience": "https://gateway.acme.example/mcp",
         "jwks_url": "https://login.acme.example/.well-known/jwks.json"},
        {"tenant": "globex", "issuer": "https://auth.globex.example", "audience": "globex-gateway",
         "public_key": PUBLIC_PEM, "algorithms": ["ES256"], "team_claim": "groups"},
        {"tenant": "globex", "issuer": "https://login.acme.example/", "audience": "globex-gateway",
         "jwks_url": "http://127.0.0.1:9100/jwks.json", "subject_claim": "email"},
    ]
    report = config_apply(document=exported, prune=True)
    assert not report.changed
    assert _actions(report)[("token_issuer", "globex/https://auth.globex.example")] is Action.UNCHANGED
    assert config_export() == exported


def test_a_tenant_without_issuers_exports_an_empty_section() -> None:
    config_apply(document=README_EXAMPLE, prune=False)
    assert yaml.safe_load(config_export())["token_issuers"] == []
