"""An OAuth 2.0 token endpoint for the client credentials grant (RFC 6749 §4.4), for tests.

    POST /token      grant_type=client_credentials; the client authenticates with HTTP basic
                     (client_secret_basic) or client_id/client_secret in the form
                     (client_secret_post). Issues `oauth-token-<n>`, valid `--lifetime` seconds;
                     a bad client gets 401 {"error": "invalid_client"}.
    GET /__stats     {"issued": n, "requests": [form fields and how the client authenticated]}
    POST /__config   {"lifetime": s, "delay": s, "fail": bool, "bad": bool}: change what the next
                     requests get (`bad`: a token with a line break in it)

Run: python -m tests.backends.token_server --port N --client-id gw --client-secret s3cret"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from typing import Any
from urllib.parse import parse_qsl, unquote

import uvicorn

from tests.backends.asgi import read_body

state: dict[str, Any] = {"issued": 0, "requests": [], "lifetime": 3600, "delay": 0.0, "fail": False, "bad": False}


async def _reply(send: Any, status: int, payload: object) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": body})


def build(client_id: str, client_secret: str) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, _ = await read_body(receive)
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
        if form.get("grant_type") != "client_credentials":
            return await _reply(send, 400, {"error": "unsupported_grant_type"})
        if given != (client_id, client_secret):
            return await _reply(send, 401, {"error": "invalid_client", "error_description": "bad client credentials"})
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
    args = parser.parse_args(argv)
    uvicorn.run(build(args.client_id, args.client_secret), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
