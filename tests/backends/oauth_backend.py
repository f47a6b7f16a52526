"""An MCP server protected by its own OAuth authorization server, built with the official SDK's
server-side auth (its authorization, token, registration and revocation endpoints, its RFC 8414
and RFC 9728 metadata, its bearer check with RFC 8707 resource binding): what a SaaS product's
remote MCP server is to the gateway. Only the provider's storage is this file's (in memory), and a
sign-in page where a person names their account and allows the client.

    /mcp                        tools `whoami` (the account the token is for) and `add`
    GET /login?request=<id>     the sign-in page; POST /login (request, account, decision) answers
                                the client at its redirect URI
    GET /__stats                {"registered", "issued", "refreshed", "revoked", "bearers": [...]}
    POST /__config              {"lifetime": s}: access tokens issued from now on live `s` seconds
    POST /__revoke_all          every token ends (as a person revoking the app at the SaaS would)

Run: python -m tests.backends.oauth_backend --port N"""

from __future__ import annotations

import argparse
import html
import secrets
import time
from typing import Any

import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

state: dict[str, Any] = {"lifetime": 3600, "registered": 0, "issued": 0, "refreshed": 0, "revoked": 0, "bearers": []}


class MemoryProvider:
    """The SDK's `OAuthAuthorizationServerProvider`, keeping clients, codes and tokens in memory."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.pending: dict[str, tuple[OAuthClientInformationFull, AuthorizationParams]] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        state["registered"] += 1

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        request = secrets.token_urlsafe(16)
        self.pending[request] = (client, params)
        return f"/login?request={request}"

    def sign_in(self, request: str, account: str, allowed: bool) -> str:
        client, params = self.pending.pop(request)
        if not allowed:
            return construct_redirect_uri(str(params.redirect_uri), error="access_denied", state=params.state)
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or [], expires_at=time.time() + 300, client_id=client.client_id or "",
            code_challenge=params.code_challenge, redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly, resource=params.resource,
            subject=account,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, authorization_code: str) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _tokens(self, client_id: str, scopes: list[str], resource: str | None, subject: str | None) -> OAuthToken:
        state["issued"] += 1
        access, refresh = f"up-{secrets.token_urlsafe(16)}", f"upr-{secrets.token_urlsafe(16)}"
        lifetime = int(state["lifetime"])
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes, resource=resource,
                                          subject=subject, expires_at=int(time.time()) + lifetime)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource,
                                             subject=subject)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=lifetime, refresh_token=refresh,
                          scope=" ".join(scopes) or None)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode) -> OAuthToken:
        del self.codes[authorization_code.code]
        return self._tokens(client.client_id or "", authorization_code.scopes, authorization_code.resource,
                            authorization_code.subject)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        found = self.refresh.get(refresh_token)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken,
                                     scopes: list[str]) -> OAuthToken:
        del self.refresh[refresh_token.token]  # rotated: the old one is spent
        state["refreshed"] += 1
        return self._tokens(client.client_id or "", scopes or refresh_token.scopes, refresh_token.resource,
                            refresh_token.subject)

    async def load_access_token(self, token: str) -> AccessToken | None:
        state["bearers"].append(token)
        found = self.access.get(token)
        return found if found is not None and (found.expires_at or 0) > time.time() else None

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        state["revoked"] += 1
        subject = token.subject
        self.access = {k: v for k, v in self.access.items() if v.subject != subject}
        self.refresh = {k: v for k, v in self.refresh.items() if v.subject != subject}


def build(issuer: str) -> Any:
    provider = MemoryProvider()
    server = MCPServer(
        "tracker", auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=issuer, resource_server_url=f"{issuer}/mcp", validate_token_resource=True,
            client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=["tracker"],
                                                                  default_scopes=["tracker"]),
            revocation_options=RevocationOptions(enabled=True), required_scopes=["tracker"],
        ),
    )

    @server.tool()
    def whoami() -> str:
        """The account the caller's token is for."""
        token = get_access_token()
        return token.subject or "" if token is not None else ""

    @server.tool()
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    @server.custom_route("/login", methods=["GET", "POST"])
    async def login(request: Request) -> Response:
        if request.method == "GET":
            ask = html.escape(request.query_params.get("request", ""))
            return HTMLResponse(
                "<!doctype html><title>Sign in to Tracker</title><h1>Sign in to Tracker</h1>"
                f"<form method=post><input type=hidden name=request value='{ask}'>"
                "<label>Account <input name=account></label>"
                "<button name=decision value=allow>Allow</button><button name=decision value=deny>Deny</button></form>")
        form = await request.form()
        target = provider.sign_in(str(form["request"]), str(form.get("account", "")), form.get("decision") == "allow")
        return RedirectResponse(target, status_code=302)

    @server.custom_route("/__stats", methods=["GET"])
    async def stats(request: Request) -> Response:
        return JSONResponse({k: v for k, v in state.items() if k != "lifetime"})

    @server.custom_route("/__config", methods=["POST"])
    async def config(request: Request) -> Response:
        state.update(await request.json())
        return JSONResponse({})

    @server.custom_route("/__revoke_all", methods=["POST"])
    async def revoke_all(request: Request) -> Response:
        provider.access.clear()
        provider.refresh.clear()
        return JSONResponse({})

    return server.streamable_http_app(host="127.0.0.1")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    uvicorn.run(build(f"http://{args.host}:{args.port}"), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
