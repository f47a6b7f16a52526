"""A person signing an MCP client in at a tenant's authorization server, step by step through the
HTTP faces (the whole flow with the official SDK's client and a real browser: test_sign_in.py):
consent after the console's sign-in, codes bound to PKCE and to one virtual host, refresh tokens
rotated, reuse ending the grant, and every refusal specific."""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.oauth.flow import token_hash
from apps.oauth.models import Grant, RefreshToken
from apps.oauth.services import authorization_server_enable, grants_revoke
from apps.tenants.services import membership_set
from tests.factories import tenant_factory, virtual_host_factory

pytestmark = pytest.mark.django_db

ORIGIN = "http://127.0.0.1"  # OAuth over http: loopback only (OAuth 2.1, Authlib)
REDIRECT = "http://127.0.0.1:43111/callback"


class Flow:
    """One tenant with a server, a host, a member, and a registered client."""

    def __init__(self, client: Client) -> None:
        self.http = client
        self.tenant = tenant_factory()
        self.host = virtual_host_factory(tenant=self.tenant, slug="main")
        virtual_host_factory(tenant=self.tenant, slug="other")
        authorization_server_enable(tenant=self.tenant)
        self.user = get_user_model().objects.create_user(username=f"alice-{self.tenant.slug}", password="pw")
        membership_set(tenant=self.tenant, user=self.user, role="member")
        registered = client.post(f"/oauth/{self.tenant.slug}/register", {"redirect_uris": [REDIRECT], "client_name": "Agent",
                                                                   "grant_types": ["authorization_code", "refresh_token"]},
                                 content_type="application/json")
        self.client_id = registered.json()["client_id"]
        self.issuer = f"{ORIGIN}/oauth/{self.tenant.slug}"
        self.resource = f"{ORIGIN}/mcp/{self.tenant.slug}/main"
        self.verifier = secrets.token_urlsafe(48)

    def authorize_url(self, **changes: Any) -> str:
        challenge = base64.urlsafe_b64encode(hashlib.sha256(self.verifier.encode()).digest()).rstrip(b"=").decode()
        params = {"response_type": "code", "client_id": self.client_id, "redirect_uri": REDIRECT, "state": "st-1",
                  "code_challenge": challenge, "code_challenge_method": "S256", "resource": self.resource, **changes}
        return f"/oauth/{self.tenant.slug}/authorize?" + urlencode({k: v for k, v in params.items() if v is not None})

    def code(self, **changes: Any) -> str:
        self.http.force_login(self.user)
        answer = self.http.post(self.authorize_url(**changes), {"decision": "allow"})
        assert answer.status_code == 302, answer.content
        query = parse_qs(urlsplit(answer["Location"]).query)
        assert query["state"] == ["st-1"] and query["iss"] == [self.issuer]
        return query["code"][0]

    def token(self, **form: str) -> Any:
        return self.http.post(f"/oauth/{self.tenant.slug}/token", {"client_id": self.client_id, **form})


@pytest.fixture
def flow() -> Flow:
    return Flow(Client(HTTP_HOST="127.0.0.1"))


def test_a_person_allows_the_client_and_it_gets_tokens_for_that_host(flow: Flow) -> None:
    url = flow.authorize_url()
    assert flow.http.get(url)["Location"].startswith("/console/login/?next=")  # sign in first
    flow.http.force_login(flow.user)
    page = flow.http.get(url).content.decode()
    assert "Allow <q>Agent</q> to use main?" in page and flow.resource in page and flow.tenant.name in page
    assert "127.0.0.1:43111" in page  # where the answer goes
    # The browser may follow the form's redirect to the client (CSP form-action holds redirects too).
    headers = flow.http.get(url)
    assert "form-action 'self' http://127.0.0.1:43111;" in headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"] and headers["X-Frame-Options"] == "DENY"
    code = flow.code()
    answer = flow.token(grant_type="authorization_code", code=code, redirect_uri=REDIRECT, code_verifier=flow.verifier,
                        resource=flow.resource)
    assert answer.status_code == 200, answer.content
    assert answer["Cache-Control"] == "no-store"
    tokens = answer.json()
    assert tokens["token_type"] == "Bearer" and tokens["expires_in"] == 600 and tokens["refresh_token"]
    keys = jwt.PyJWKSet.from_dict(flow.http.get(f"/oauth/{flow.tenant.slug}/jwks").json())
    claims = jwt.decode(tokens["access_token"], keys.keys[0].key, algorithms=["ES256"], audience=flow.resource,
                        issuer=flow.issuer)
    assert claims["sub"] == flow.user.username and claims["client_id"] == flow.client_id
    assert jwt.get_unverified_header(tokens["access_token"])["typ"] == "at+jwt"
    grant = Grant.objects.get(user=flow.user)
    assert (grant.resource, grant.client.client_id, claims["gid"]) == (flow.resource, flow.client_id, str(grant.pk))


def test_the_host_url_spelled_with_mcp_at_the_end_gives_tokens_for_the_host(flow: Flow) -> None:
    code = flow.code(resource=flow.resource + "/mcp")  # as the Connect page spells it
    tokens = flow.token(grant_type="authorization_code", code=code, redirect_uri=REDIRECT, code_verifier=flow.verifier,
                        resource=flow.resource + "/mcp").json()
    assert jwt.decode(tokens["access_token"], options={"verify_signature": False})["aud"] == flow.resource


def test_a_client_registered_without_refresh_tokens_gets_none(flow: Flow) -> None:
    registered = flow.http.post(f"/oauth/{flow.tenant.slug}/register", {"redirect_uris": [REDIRECT]},
                                content_type="application/json").json()
    assert registered["grant_types"] == ["authorization_code"]  # RFC 7591's default
    flow.client_id = registered["client_id"]
    tokens = flow.token(grant_type="authorization_code", code=flow.code(), redirect_uri=REDIRECT,
                        code_verifier=flow.verifier).json()
    assert tokens["access_token"] and "refresh_token" not in tokens


def test_denying_answers_access_denied_with_the_issuer(flow: Flow) -> None:
    flow.http.force_login(flow.user)
    answer = flow.http.post(flow.authorize_url(), {"decision": "deny"})
    query = parse_qs(urlsplit(answer["Location"]).query)
    assert answer["Location"].startswith(REDIRECT)
    assert (query["error"], query["state"], query["iss"]) == (["access_denied"], ["st-1"], [flow.issuer])
    assert not Grant.objects.exists()


def test_a_code_works_once_with_its_verifier_and_a_second_use_ends_its_grant(flow: Flow) -> None:
    spent = flow.code()
    wrong = flow.token(grant_type="authorization_code", code=spent, redirect_uri=REDIRECT, code_verifier="x" * 50)
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    right = flow.token(grant_type="authorization_code", code=spent, redirect_uri=REDIRECT, code_verifier=flow.verifier)
    assert right.status_code == 400 and right.json()["error"] == "invalid_grant"  # spent by the failed attempt
    code = flow.code()
    good = flow.token(grant_type="authorization_code", code=code, redirect_uri=REDIRECT, code_verifier=flow.verifier)
    assert good.status_code == 200
    again = flow.token(grant_type="authorization_code", code=code, redirect_uri=REDIRECT, code_verifier=flow.verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    grant = Grant.objects.get(codes__code_hash=token_hash(code))
    assert grant.revoked_at is not None  # a copy of the code is in someone's hands: what it gave ends
    refresh = flow.token(grant_type="refresh_token", refresh_token=good.json()["refresh_token"])
    assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant"
    assert Grant.objects.filter(revoked_at__isnull=True).count() == 0


def test_refresh_tokens_rotate_and_a_replaced_one_used_again_ends_the_grant(flow: Flow) -> None:
    first = flow.token(grant_type="authorization_code", code=flow.code(), redirect_uri=REDIRECT,
                       code_verifier=flow.verifier).json()
    second = flow.token(grant_type="refresh_token", refresh_token=first["refresh_token"])
    assert second.status_code == 200, second.content
    assert second.json()["refresh_token"] != first["refresh_token"] and second.json()["access_token"]
    elsewhere = flow.token(grant_type="refresh_token", refresh_token=second.json()["refresh_token"],
                           resource=f"{ORIGIN}/mcp/{flow.tenant.slug}/other")
    assert elsewhere.status_code == 400 and elsewhere.json()["error"] == "invalid_target"
    stolen = flow.token(grant_type="refresh_token", refresh_token=first["refresh_token"])
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"
    assert Grant.objects.get().revoked_at is not None
    latest = flow.token(grant_type="refresh_token", refresh_token=second.json()["refresh_token"])
    assert latest.status_code == 400  # the grant ended: the newest token too
    assert RefreshToken.objects.count() == 2 and RefreshToken.objects.filter(token_hash=token_hash(first["refresh_token"])).exists()
    assert not RefreshToken.objects.filter(token_hash=first["refresh_token"]).exists()  # stored as hashes only


def test_a_revoked_grant_gives_no_more_tokens(flow: Flow) -> None:
    tokens = flow.token(grant_type="authorization_code", code=flow.code(), redirect_uri=REDIRECT,
                        code_verifier=flow.verifier).json()
    grant = Grant.objects.get()
    assert grants_revoke(tenant=flow.tenant, grant_ids=[grant.pk]) == 1
    assert grants_revoke(tenant=flow.tenant, grant_ids=[grant.pk]) == 0
    assert flow.token(grant_type="refresh_token", refresh_token=tokens["refresh_token"]).json()["error"] == "invalid_grant"


@pytest.mark.parametrize(("changes", "error", "says"), [
    ({"code_challenge": None, "code_challenge_method": None}, "invalid_request", "PKCE is required"),
    ({"code_challenge_method": "plain"}, "invalid_request", "Unsupported 'code_challenge_method'"),
    ({"resource": None}, "invalid_target", "name the virtual host"),
    ({"resource": f"{ORIGIN}/mcp/elsewhere/main"}, "invalid_target", "is not the URL of a virtual host"),
    ({"resource": "https://evil.example/mcp/x/main"}, "invalid_target", "is not the URL of a virtual host"),
    ({"response_type": "token"}, "unsupported_response_type", ""),
])
def test_a_bad_request_from_a_known_client_is_sent_back_to_it(flow: Flow, changes: dict[str, Any], error: str, says: str) -> None:
    flow.http.force_login(flow.user)
    answer = flow.http.get(flow.authorize_url(**changes))
    assert answer.status_code == 302 and answer["Location"].startswith(REDIRECT), answer.content
    query = parse_qs(urlsplit(answer["Location"]).query)
    assert query["error"] == [error] and query["iss"] == [flow.issuer] and query["state"] == ["st-1"]
    assert says in query.get("error_description", [""])[0]


@pytest.mark.parametrize("changes", [{"client_id": "gwc_unknown"}, {"redirect_uri": "http://127.0.0.1:1/elsewhere"}])
def test_an_unknown_client_or_redirect_is_shown_to_the_person_never_redirected(flow: Flow, changes: dict[str, str]) -> None:
    flow.http.force_login(flow.user)
    answer = flow.http.get(flow.authorize_url(**changes))
    assert answer.status_code == 400 and "This sign-in request cannot be used" in answer.content.decode()
    assert not answer.has_header("Location")


def test_someone_outside_the_tenant_cannot_consent(flow: Flow) -> None:
    stranger = get_user_model().objects.create_user(username="mallory", password="pw")
    flow.http.force_login(stranger)
    page = flow.http.get(flow.authorize_url())
    assert page.status_code == 403 and "not a member of" in page.content.decode()
    assert flow.http.post(flow.authorize_url(), {"decision": "allow"}).status_code == 403
    assert not Grant.objects.exists()


def test_the_consent_form_needs_its_csrf_token(flow: Flow) -> None:
    client = Client(enforce_csrf_checks=True, HTTP_HOST="127.0.0.1")
    client.force_login(flow.user)
    assert client.post(flow.authorize_url(), {"decision": "allow"}).status_code == 403
    assert not Grant.objects.exists()


def test_token_requests_get_specific_errors(flow: Flow) -> None:
    assert flow.token(grant_type="password", username="a", password="b").json()["error"] == "unsupported_grant_type"
    assert flow.token(grant_type="authorization_code", code="nope", redirect_uri=REDIRECT,
                      code_verifier=flow.verifier).json()["error"] == "invalid_grant"
    missing = flow.token(grant_type="authorization_code", code=flow.code(), redirect_uri=REDIRECT)
    assert missing.json()["error"] == "invalid_request"
    assert flow.http.get(f"/oauth/{flow.tenant.slug}/token").status_code == 405
    other = flow.http.post("/oauth/no-such/token", {"grant_type": "refresh_token", "refresh_token": "x"})
    assert other.status_code == 404


@pytest.mark.parametrize("which", ["refresh_token", "access_token"])
def test_a_client_revoking_either_token_ends_the_grant(flow: Flow, which: str) -> None:
    tokens = flow.token(grant_type="authorization_code", code=flow.code(), redirect_uri=REDIRECT,
                        code_verifier=flow.verifier).json()
    revoke = f"/oauth/{flow.tenant.slug}/revoke"
    answer = flow.http.post(revoke, {"client_id": flow.client_id, "token": tokens[which]})
    assert answer.status_code == 200, answer.content
    assert Grant.objects.get().revoked_at is not None
    assert flow.token(grant_type="refresh_token", refresh_token=tokens["refresh_token"]).json()["error"] == "invalid_grant"
    # An unknown token is answered as if revoked (RFC 7009 §2.2); a forged JWT changes nothing.
    assert flow.http.post(revoke, {"client_id": flow.client_id, "token": "nothing"}).status_code == 200
    assert flow.http.post(revoke, {"client_id": flow.client_id}).json()["error"] == "invalid_request"


def test_another_client_cannot_revoke_a_clients_grant(flow: Flow) -> None:
    tokens = flow.token(grant_type="authorization_code", code=flow.code(), redirect_uri=REDIRECT,
                        code_verifier=flow.verifier).json()
    other = flow.http.post(f"/oauth/{flow.tenant.slug}/register", {"redirect_uris": [REDIRECT]},
                           content_type="application/json").json()["client_id"]
    answer = flow.http.post(f"/oauth/{flow.tenant.slug}/revoke", {"client_id": other, "token": tokens["refresh_token"]})
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant"
    assert Grant.objects.get().revoked_at is None


def test_a_person_who_left_the_tenant_gets_no_more_tokens(flow: Flow) -> None:
    from apps.tenants.models import Membership

    tokens = flow.token(grant_type="authorization_code", code=flow.code(), redirect_uri=REDIRECT,
                        code_verifier=flow.verifier).json()
    Membership.objects.filter(user=flow.user, tenant=flow.tenant).delete()
    refused = flow.token(grant_type="refresh_token", refresh_token=tokens["refresh_token"])
    assert refused.status_code == 400
    assert Grant.objects.get().revoked_at is not None  # and the gateway refuses its access token at once


def test_each_sign_in_is_a_grant_of_its_own(flow: Flow) -> None:
    first = flow.token(grant_type="authorization_code", code=flow.code(), redirect_uri=REDIRECT,
                       code_verifier=flow.verifier).json()
    second = flow.token(grant_type="authorization_code", code=flow.code(), redirect_uri=REDIRECT,
                        code_verifier=flow.verifier).json()
    assert Grant.objects.count() == 2
    assert flow.http.post(f"/oauth/{flow.tenant.slug}/revoke", {"client_id": flow.client_id,
                                                                "token": first["refresh_token"]}).status_code == 200
    assert flow.token(grant_type="refresh_token", refresh_token=second["refresh_token"]).status_code == 200


def test_registration_is_throttled_per_address(flow: Flow, clean_redis: object) -> None:
    from apps.oauth.throttle import REGISTRATIONS_PER_HOUR

    answers = [flow.http.post(f"/oauth/{flow.tenant.slug}/register", {"redirect_uris": [REDIRECT]},
                              content_type="application/json", REMOTE_ADDR="203.0.113.9").status_code
               for _ in range(REGISTRATIONS_PER_HOUR + 1)]
    assert answers[:-1] == [201] * REGISTRATIONS_PER_HOUR and answers[-1] == 429
