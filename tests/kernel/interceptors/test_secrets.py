"""The `secrets` built-in over what tools really return and are sent: a config dump with AWS keys, a
.env file, a git remote with its password, keys in PEM, a JWT in a logged request. Each secret is
masked and nothing else changes; the `refuse` action and the `detectors` choice; what must not be
taken for a secret (ids, hashes, image data, prose); escapes that would hide one.

The credentials are assembled from pieces so that no scanner takes this file for a leak."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
import re
from collections.abc import Mapping
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.ip_public import IPPublicDetector

from apps.kernel.interceptors import secrets
from apps.kernel.interceptors.base import PASS, Decision, Payload, Subject, scannable
from apps.kernel.interceptors.patterns import PatternSet

AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
GITHUB_TOKEN = "ghp_" + "R8q7P6o5N4m3L2k1J0i9H8g7F6e5D4c3B2a1"
SLACK_WEBHOOK = "https://hooks.slack.com/services/" + "T024BE7LD/B05KQ2ZL9RM/x3Lq8vNw2RkT7yHs9DfG4bJc"
STRIPE_KEY = "sk_" + "live_" + "51Hq3kLmN8pQrS7tUvWx2YzA"
DB_PASSWORD = "pg-" + "Q7v9xLw2Tz"
GIT_PASSWORD = "gh-" + "deploy-8f3KqZ"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt(claims: Mapping[str, Any]) -> str:
    signing_input = f"{_b64url(orjson.dumps({'alg': 'HS256', 'typ': 'JWT'}))}.{_b64url(orjson.dumps(claims))}"
    signature = hmac.new(b"not-the-real-key", signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64url(signature)}"


JWT = _jwt({"sub": "user_8231", "scope": "payments:write", "exp": 1767225600})


@pytest.fixture(scope="module")
def rsa_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption()).decode()


def _ec_key(private_format: serialization.PrivateFormat) -> str:
    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, private_format, serialization.NoEncryption()).decode()


ENV_FILE = f"""# payments service, production
APP_ENV=production
AWS_ACCESS_KEY_ID={AWS_KEY_ID}
AWS_SECRET_ACCESS_KEY="{AWS_SECRET}"
STRIPE_SECRET_KEY={STRIPE_KEY}
SLACK_WEBHOOK_URL={SLACK_WEBHOOK}
DATABASE_URL=postgres://payments:{DB_PASSWORD}@db.internal:5432/payments
GITHUB_TOKEN={GITHUB_TOKEN}
LOG_LEVEL=info
"""


def _result(text: str, structured: Any = None, request_id: int = 1) -> dict[str, Any]:
    """A tools/call JSON-RPC response as a backend sends it."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if structured is not None:
        result["structuredContent"] = structured
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _config_dump(rsa_pem: str) -> dict[str, Any]:
    return _result(
        f"Read 9 settings from /srv/payments/.env:\n{ENV_FILE}",
        {
            "path": "/srv/payments/.env",
            "aws": {"aws_access_key_id": AWS_KEY_ID, "aws_secret_access_key": AWS_SECRET, "region": "eu-west-1"},
            "git": {"remote": f"https://deploy-bot:{GIT_PASSWORD}@git.example.com/acme/payments.git",
                    "head": "9fceb02d0ae598e95dc970b74767f19372d61af8"},
            "tls": {"key_file": "/srv/payments/tls.key", "key": rsa_pem},
            "last_request": {"method": "POST", "path": "/v1/charges", "headers": {"Authorization": f"Bearer {JWT}"}},
            "size_bytes": 612,
            "modified": "2024-05-01T09:12:44Z",
        },
    )


KINDS = {
    AWS_KEY_ID: "aws-access-key",
    AWS_SECRET: "aws-access-key",
    GITHUB_TOKEN: "github-token",
    SLACK_WEBHOOK: "slack-token",
    STRIPE_KEY: "stripe-access-key",
    DB_PASSWORD: "basic-auth-credentials",
    GIT_PASSWORD: "basic-auth-credentials",
    JWT: "json-web-token",
}


def _redacted(value: Any, kinds: Mapping[str, str]) -> Any:
    """`value` with each of `kinds`' secrets, wherever a string holds it, as the mask writes it."""
    if isinstance(value, str):
        for secret, kind in kinds.items():
            value = value.replace(secret, f"[REDACTED:{kind}]")
        return value
    if isinstance(value, list):
        return [_redacted(item, kinds) for item in value]
    if isinstance(value, dict):
        return {key: _redacted(item, kinds) for key, item in value.items()}
    return value


def _inspect(inspector: secrets.SecretsInspector, value: Any = None, *, text: str | None = None,
             phase: str = "result") -> Decision:
    payload = Payload(text=text) if text is not None else Payload(value=value)
    return inspector.inspect(Subject(phase, "tools/call", "payments.read_config", payload))


def _assert_no_secret_in(decision: Decision, *values: str) -> None:
    for value in values:
        assert value not in decision.reason
        assert all(value not in finding for finding in decision.findings)


MASK_ALL = secrets.build(secrets.DEFAULTS)


def test_the_detectors_are_detect_secrets_regex_plugins_but_the_public_ip_one() -> None:
    assert list(secrets.DETECTORS) == [
        "artifactory-credentials", "aws-access-key", "azure-storage-account-access-key", "basic-auth-credentials",
        "cloudant-credentials", "discord-bot-token", "github-token", "gitlab-token", "ibm-cloud-iam-key",
        "ibm-cos-hmac-credentials", "json-web-token", "mailchimp-access-key", "npm-tokens", "openai-token",
        "private-key", "pypi-token", "sendgrid-api-key", "slack-token", "softlayer-credentials",
        "square-oauth-secret", "stripe-access-key", "telegram-bot-token", "twilio-api-key",
    ]
    assert all(detector.plugin is not IPPublicDetector for detector in secrets.DETECTORS.values())
    # The plugin's own compiled expressions, flags and all (the secret-key one ignores case).
    aws = secrets.DETECTORS["aws-access-key"]
    assert aws.patterns == tuple(AWSKeyDetector.denylist)
    assert all(mine is theirs for mine, theirs in zip(aws.patterns, AWSKeyDetector.denylist, strict=True))
    assert isinstance(MASK_ALL.patterns, PatternSet)


@pytest.mark.parametrize(("secret_type", "expected"), [
    ("AWS Access Key", "aws-access-key"), ("JSON Web Token", "json-web-token"), ("Private Key", "private-key"),
    ("Public IP (ipv4)", "public-ip-ipv4"), ("IBM COS HMAC Credentials", "ibm-cos-hmac-credentials"),
])
def test_a_detector_is_named_by_a_slug_of_its_secret_type(secret_type: str, expected: str) -> None:
    assert secrets.slug(secret_type) == expected


def test_every_secret_of_a_config_dump_is_masked_and_nothing_else_changes(rsa_pem: str) -> None:
    value = _config_dump(rsa_pem)

    decision = _inspect(MASK_ALL, value)

    assert decision.action == "rewrite"
    assert decision.findings == ("aws-access-key", "basic-auth-credentials", "github-token", "json-web-token",
                                 "private-key", "slack-token", "stripe-access-key")
    assert decision.payload is not None
    expected = _redacted(value, {**KINDS, rsa_pem.strip(): "private-key"})
    assert orjson.loads(decision.payload.text) == expected
    assert decision.payload.value == expected
    for secret in (*KINDS, "MII"):  # "MII": how every PEM body of an RSA key begins
        assert secret not in decision.payload.text
    _assert_no_secret_in(decision, *KINDS)


def test_only_the_secret_of_a_match_is_masked_not_its_keyword_or_url() -> None:
    value = _result(f"git remote -v\norigin\thttps://deploy-bot:{GIT_PASSWORD}@git.example.com/acme/app.git (fetch)",
                    {"aws_secret_access_key": AWS_SECRET})

    decision = _inspect(MASK_ALL, value)

    assert decision.payload is not None
    result = decision.payload.value["result"]
    assert result["content"][0]["text"] == (
        "git remote -v\norigin\thttps://deploy-bot:[REDACTED:basic-auth-credentials]"
        "@git.example.com/acme/app.git (fetch)")
    assert result["structuredContent"] == {"aws_secret_access_key": "[REDACTED:aws-access-key]"}


def test_a_match_that_runs_on_past_its_string_is_cut_at_the_string_s_end() -> None:
    # detect-secrets' npm expression ends in `.+` (written for a line of .npmrc): in JSON text with no
    # line break it would run on through the keys that follow.
    npm_token = "npm_" + "k3Jx9QvL2mT8rW5yB1nH6cF4dZ7sA0pE9uGi"
    value = _result("Read .npmrc", {"npmrc": f"//registry.npmjs.org/:_authToken={npm_token}", "scope": "@acme",
                                    "always_auth": True})

    decision = _inspect(MASK_ALL, value)

    assert decision.action == "rewrite"
    assert decision.payload is not None
    assert decision.payload.value["result"]["structuredContent"] == {
        "npmrc": "//registry.npmjs.org/:_authToken=[REDACTED:npm-tokens]", "scope": "@acme", "always_auth": True}


@pytest.mark.parametrize("private_format", [serialization.PrivateFormat.PKCS8, serialization.PrivateFormat.OpenSSH])
def test_a_private_key_block_is_masked_whole_from_begin_to_end(private_format: serialization.PrivateFormat) -> None:
    pem = _ec_key(private_format)
    value = _result(f"$ cat ~/.ssh/deploy_key\n{pem}$ echo done\ndone")

    decision = _inspect(MASK_ALL, value)

    assert decision.findings == ("private-key",)
    assert decision.payload is not None
    assert decision.payload.value["result"]["content"][0]["text"] == (
        "$ cat ~/.ssh/deploy_key\n[REDACTED:private-key]\n$ echo done\ndone")


def test_a_private_key_cut_short_is_masked_to_the_end_of_its_string(rsa_pem: str) -> None:
    truncated = rsa_pem[:400]  # a tool that returns the first 400 bytes of a file
    value = _result("head -c 400 id_rsa", {"preview": truncated, "truncated": True, "path": "/home/deploy/.ssh/id_rsa"})

    decision = _inspect(MASK_ALL, value)

    assert decision.payload is not None
    assert decision.payload.value["result"]["structuredContent"] == {
        "preview": "[REDACTED:private-key]", "truncated": True, "path": "/home/deploy/.ssh/id_rsa"}


def test_a_secret_in_text_content_that_is_itself_json_is_found() -> None:
    # The most common tool result: JSON.stringify'd data as text; in the JSON text its quotes are \".
    inner = orjson.dumps({"profile": "prod", "aws_secret_access_key": AWS_SECRET, "token": GITHUB_TOKEN}).decode()

    decision = _inspect(MASK_ALL, _result(inner))

    assert decision.findings == ("aws-access-key", "github-token")
    assert decision.payload is not None
    text = decision.payload.value["result"]["content"][0]["text"]
    assert orjson.loads(text) == {"profile": "prod", "aws_secret_access_key": "[REDACTED:aws-access-key]",
                                  "token": "[REDACTED:github-token]"}


def test_the_refuse_action_refuses_and_names_the_detectors_not_the_secrets(rsa_pem: str) -> None:
    inspector = secrets.build({**secrets.DEFAULTS, "action": "refuse"})

    decision = _inspect(inspector, _config_dump(rsa_pem))

    assert decision.action == "refuse"
    assert decision.payload is None
    assert decision.reason == ("aws-access-key, basic-auth-credentials, github-token, json-web-token, private-key, "
                               "slack-token, stripe-access-key found in the result")
    _assert_no_secret_in(decision, *KINDS, rsa_pem.splitlines()[1])


def test_the_request_phase_inspects_the_call_s_arguments() -> None:
    params = {"name": "ci.trigger_pipeline",
              "arguments": {"repo": "acme/payments", "ref": "main", "token": GITHUB_TOKEN,
                            "variables": {"STRIPE_KEY": STRIPE_KEY, "RETRIES": "3"}}}

    masked_decision = _inspect(MASK_ALL, params, phase="request")
    refused = _inspect(secrets.build({"action": "refuse"}), params, phase="request")

    assert masked_decision.payload is not None
    assert masked_decision.payload.value == {
        "name": "ci.trigger_pipeline",
        "arguments": {"repo": "acme/payments", "ref": "main", "token": "[REDACTED:github-token]",
                      "variables": {"STRIPE_KEY": "[REDACTED:stripe-access-key]", "RETRIES": "3"}}}
    assert refused.reason == "github-token, stripe-access-key found in the call's arguments"


def test_only_the_chosen_detectors_run(rsa_pem: str) -> None:
    inspector = secrets.build({"action": "mask", "detectors": ["github-token", "slack-token"]})
    value = _config_dump(rsa_pem)

    decision = _inspect(inspector, value)

    assert decision.findings == ("github-token", "slack-token")
    assert decision.payload is not None
    assert decision.payload.value == _redacted(value, {GITHUB_TOKEN: "github-token", SLACK_WEBHOOK: "slack-token"})


def test_escapes_cannot_hide_a_secret() -> None:
    # `A` written as \u0041 and the webhook's slashes as \/ (PHP's json_encode writes them so).
    escaped_key = "\\u0041" + AWS_KEY_ID[1:]
    text = ('{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"key id: ' + escaped_key
            + '\\nhook: ' + SLACK_WEBHOOK.replace("/", "\\/") + '"}]}}')
    assert AWS_KEY_ID not in text and SLACK_WEBHOOK not in text

    decision = _inspect(MASK_ALL, text=text)

    assert decision.findings == ("aws-access-key", "slack-token")
    assert decision.payload is not None
    assert decision.payload.value["result"]["content"][0]["text"] == (
        "key id: [REDACTED:aws-access-key]\nhook: [REDACTED:slack-token]")


def test_a_jwt_is_confirmed_as_detect_secrets_confirms_it() -> None:
    not_json_header = _b64url(b'{"alg":') + "." + _b64url(b'{"sub":"1"}') + ".c2lnbmF0dXJl"
    assert not_json_header.startswith("eyJ")

    assert _inspect(MASK_ALL, _result(f"token: {not_json_header}")).action == "pass"
    assert _inspect(MASK_ALL, _result(f"token: {JWT}")).findings == ("json-web-token",)


def test_a_payload_that_cannot_be_masked_is_refused() -> None:
    # A backend's response cut off mid-way: not JSON, so masking it cannot be checked.
    text = '{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"GITHUB_TOKEN=' + GITHUB_TOKEN

    decision = _inspect(MASK_ALL, text=text)

    assert decision.action == "refuse"
    assert decision.findings == ("github-token",)
    assert "could not be masked" in decision.reason
    _assert_no_secret_in(decision, GITHUB_TOKEN)


def _image_base64() -> str:
    data = random.Random(20240501).randbytes(1500)  # the same every run
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + data).decode()


ORDINARY = _result(
    "Found 3 orders for customer 5f3a9c2e-1b7d-4e8a-9c6f-2d4b8e1a7c30 (acct 7c1e9a4b2f6d8e03).\n"
    "The release v2.14.3 (commit 9fceb02d0ae598e95dc970b74767f19372d61af8) shipped on 2024-05-01; "
    "build 1.0.0-rc.2+sha.5114f85 is next. Invoice INV-2024-000871 totals $1,299.00 (EUR 1.204,50). "
    "Please get in touch if anything looks off: the key to the archive is in the usual place.",
    {
        "orders": [
            {"id": "ord_01HV6Z4X8Q3R2M9T", "number": "100-234-5678", "total": 1299.0, "currency": "USD",
             "placed": "2024-05-01T09:12:44Z", "sha256": hashlib.sha256(b"order 1").hexdigest()},
            {"id": "ord_01HV6Z5B1K7N4P2W", "number": "100-234-5679", "total": 49.95, "currency": "USD",
             "placed": "2024-05-02T17:40:03Z", "sha256": hashlib.sha256(b"order 2").hexdigest()},
        ],
        "thumbnail": f"data:image/png;base64,{_image_base64()}",
        "etag": 'W/"5e1f-4b7a9d2e"',
        "next_cursor": "eyJwYWdlIjoyfQ",  # base64 of {"page":2}: no dot, not a JWT
    },
)


def test_ordinary_results_pass() -> None:
    assert _inspect(MASK_ALL, ORDINARY) == PASS
    assert _inspect(secrets.build({"action": "refuse"}), ORDINARY) == PASS


@pytest.mark.parametrize(("settings", "field", "message"), [
    ([], "settings", "settings must be an object"),
    ({"mode": "mask"}, "settings.mode", "unknown setting 'mode'; the settings are: action, detectors"),
    ({"action": "block"}, "settings.action", "action must be mask or refuse"),
    ({"detectors": "github-token"}, "settings.detectors", "detectors must be a list of one or more of: "),
    ({"detectors": []}, "settings.detectors", "detectors must be a list of one or more of: "),
    ({"detectors": ["github-token", "aws"]}, "settings.detectors",
     "unknown detector 'aws'; the detectors are: artifactory-credentials, aws-access-key, "),
])
def test_settings_check_names_the_field_and_what_it_takes(settings: Any, field: str, message: str) -> None:
    problems = secrets.settings_check(settings)

    assert [problem.field for problem in problems] == [field]
    assert problems[0].message.startswith(message)
    if field == "settings.detectors":
        assert problems[0].message.endswith("telegram-bot-token, twilio-api-key")


@pytest.mark.parametrize("settings", [{}, {"action": "refuse"}, {"detectors": ["private-key"]}, dict(secrets.DEFAULTS)])
def test_settings_check_accepts_what_is_right(settings: Mapping[str, Any]) -> None:
    assert secrets.settings_check(settings) == []


def test_the_scan_view_keeps_positions_and_blanks_escapes() -> None:
    text = orjson.dumps({"a": 'say "hi"\n\tC:\\new\r\x1b[0m'}).decode()

    payload, view = scannable(Payload(text=text))

    assert len(view) == len(payload.text)
    assert re.fullmatch(r"""\{"a":"say ''hi'' \n  C:  new \r      \[0m"\}""", view)
