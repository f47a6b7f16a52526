"""What the console's tool tester shows of a request an OpenAPI tool sent: every credential redacted,
the rest as sent."""

from __future__ import annotations

import pytest

from apps.catalog.openapi.outgoing import REDACTED, Credential, OutgoingRequest, redacted

SENT = OutgoingRequest(
    "POST", "https://api.example.com/pets?limit=5&api_key=s3cret-value&x=1",
    (("Accept", "application/json"), ("X-API-Key", "s3cret-value"), ("Authorization", "Bearer s3cret-value"),
     ("Cookie", "theme=dark; token=s3cret-value"), ("X-Request-Tag", "echo s3cret-value")),
    b'{"name":"Rex"}', "application/json",
)


def _headers(request: OutgoingRequest) -> dict[str, str]:
    return dict(request.headers)


@pytest.mark.parametrize("kind, name", [
    ("api_key_header", "X-API-Key"), ("api_key_query", "api_key"), ("api_key_cookie", "token"), ("bearer", ""),
])
def test_the_credential_is_redacted_wherever_it_went_and_nothing_else_changes(kind: str, name: str) -> None:
    shown = redacted(SENT, Credential(kind=kind, value="s3cret-value", name=name))  # type: ignore[arg-type]
    text = f"{shown.url} {shown.headers}"
    assert "s3cret" not in text
    assert shown.url == f"https://api.example.com/pets?limit=5&api_key={REDACTED}&x=1"
    headers = _headers(shown)
    assert headers["Authorization"] == REDACTED and headers["Accept"] == "application/json"
    assert headers["X-Request-Tag"] == f"echo {REDACTED}"  # its value anywhere else too
    assert (shown.method, shown.body) == (SENT.method, SENT.body)


def test_the_credentials_own_place_is_redacted_even_when_its_value_is_short() -> None:
    sent = OutgoingRequest("GET", "https://a.example/x?key=abc&q=abc", (("Cookie", "key=abc; other=abc"),))
    assert redacted(sent, Credential(kind="api_key_query", value="abc", name="key")).url == (
        f"https://a.example/x?key={REDACTED}&q=abc")  # a three-letter value elsewhere is left alone
    shown = redacted(sent, Credential(kind="api_key_cookie", value="abc", name="key"))
    assert _headers(shown)["Cookie"] == f"key={REDACTED}; other=abc"


def test_basic_credentials_and_authorization_headers_are_never_shown() -> None:
    sent = OutgoingRequest("GET", "https://a.example/", (("authorization", "Basic dXNlcjpwdw=="),
                                                         ("Proxy-Authorization", "Basic eA==")))
    for credential in (Credential(kind="basic", value="pw", username="user"), None):
        assert all(value == REDACTED for _, value in redacted(sent, credential).headers)
