"""An OAuth 2.0 authorization server's token endpoint for the client credentials grant (RFC 6749
§4.4) and token exchange (RFC 8693), and the issuer of the JWT access tokens it exchanges, for tests.

    POST /token      the client authenticates with HTTP basic (client_secret_basic) or
                     client_id/client_secret in the form (client_secret_post); a bad client gets 401
                     {"error": "invalid_client"}. Tokens are valid `lifetime` seconds.
                     - grant_type=client_credentials: issues `oauth-token-<n>`;
                     - grant_type=urn:ietf:params:oauth:grant-type:token-exchange: `subject_token`, an
                       access token this server signed (signature, `iss`, `exp` checked; else 400
                       invalid_grant), is exchanged for `xchg-<sub>-<n>`.
    GET /jwks        the public key its access tokens are signed with (ES256)
    POST /__mint     {"sub", "aud", "team"?, "lifetime"?}: {"token": a signed access token}
    GET /__stats     {"issued": n, "requests": [form fields and how the client authenticated]}
    POST /__config   {"lifetime": s, "delay": s, "fail": bool, "bad": bool, "refuse": [subjects]}:
                     change what the next requests get (`bad`: a token with a line break in it;
                     `refuse`: subjects whose tokens are not exchanged)

Run: python -m tests.backends.token_server --port N --client-id gw --client-secret s3cret"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
from typing import Any
from urllib.parse import parse_qsl, unquote

import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import ec

from tests.backends.asgi import read_body

state: dict[str, Any] = {"issued": 0, "requests": [], "lifetime": 3600, "delay": 0.0, "fail": False, "bad": False,
                         "refuse": []}
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
_KEY = ec.generate_private_key(ec.SECP256R1())
_KID = "token-server-1"


async def _reply(send: Any, status: int, payload: object) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": body})


def _mint(issuer: str, claims: dict[str, Any]) -> str:
    now = int(time.time())
    payload = {"iss": issuer, "iat": now, "exp": now + int(claims.pop("lifetime", 300)), **claims}
    return jwt.encode(payload, _KEY, algorithm="ES256", headers={"kid": _KID})


def _exchanged(issuer: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """The answer to a token exchange request (RFC 8693 §2.2)."""
    if form.get("subject_token_type") != ACCESS_TOKEN or not form.get("subject_token"):
        return 400, {"error": "invalid_request", "error_description": "an access token is the subject token"}
    try:
        claims = jwt.decode(form["subject_token"], _KEY.public_key(), algorithms=["ES256"], issuer=issuer,
                            options={"verify_aud": False, "require": ["exp", "iss", "sub"]})
    except jwt.PyJWTError as exc:
        return 400, {"error": "invalid_grant", "error_description": f"the subject token: {exc}"}
    if claims["sub"] in state["refuse"]:
        return 400, {"error": "invalid_grant", "error_description": f"{claims['sub']} may not reach that audience"}
    state["issued"] += 1
    return 200, {"access_token": f"xchg-{claims['sub']}-{state['issued']}", "token_type": "Bearer",
                 "issued_token_type": ACCESS_TOKEN, "expires_in": state["lifetime"]}


def build(client_id: str, client_secret: str, issuer: str) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, _ = await read_body(receive)
        if scope["path"] == "/jwks":
            key = {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(_KEY.public_key())), "kid": _KID, "alg": "ES256"}
            return await _reply(send, 200, {"keys": [key]})
        if scope["path"] == "/__mint":
            return await _reply(send, 200, {"token": _mint(issuer, json.loads(body))})
        if scope["path"] == "/__stats":
            return await _reply(send, 200, {"issued": state["issued"], "requests": state["requests"]})
        if scope["path"] == "/__config":
            state.update(json.loads(body))
            return await _reply(send, 200, {})
        form = dict(parse_qsl(body.decode()))
        headers = {name.decode().lower(): value.decode() for name, value in scope["headers"]}
        via = "post"
        given = (form.get("client_id"), form.get("client_secret"))
        if headers.get("authorization", "").startswith("Basic "):
            via = "basic"
            user, _, password = base64.b64decode(headers["authorization"][6:]).decode().partition(":")
            given = (unquote(user), unquote(password))
        state["requests"].append({**{k: v for k, v in form.items() if k != "client_secret"}, "via": via})
        if state["delay"]:
            await asyncio.sleep(state["delay"])
        if state["fail"]:
            return await _reply(send, 503, {"error": "temporarily_unavailable"})
        if form.get("grant_type") not in {"client_credentials", EXCHANGE}:
            return await _reply(send, 400, {"error": "unsupported_grant_type"})
        if given != (client_id, client_secret):
            return await _reply(send, 401, {"error": "invalid_client", "error_description": "bad client credentials"})
        if form["grant_type"] == EXCHANGE:
            return await _reply(send, *_exchanged(issuer, form))
        state["issued"] += 1
        token = f"oauth-token-{state['issued']}" + ("\r\nX-Injected: 1" if state["bad"] else "")
        return await _reply(send, 200, {"access_token": token, "token_type": "Bearer",
                                        "expires_in": state["lifetime"]})

    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--client-id", default="gateway")
    parser.add_argument("--client-secret", default="client-s3cret")
    parser.add_argument("--issuer", default="", help="the `iss` of its tokens (default: its own URL)")
    args = parser.parse_args(argv)
    issuer = args.issuer or f"http://{args.host}:{args.port}"
    uvicorn.run(build(args.client_id, args.client_secret, issuer), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
