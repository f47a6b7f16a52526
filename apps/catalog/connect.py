"""Ready-to-paste client configuration for a virtual host's MCP endpoint, for the console's Connect
page and the REST API. Pure: the URL and the key (a placeholder unless the caller has a key it may
show) come in, text goes out. Every client sends the key as `Authorization: Bearer <key>`; VS Code
prompts for it instead of reading it from its file."""

from __future__ import annotations

import json
from dataclasses import dataclass

KEY_PLACEHOLDER = "YOUR_API_KEY"
KEY_ENV_VAR = "MCP_GATEWAY_KEY"


@dataclass(frozen=True)
class ClientConfig:
    client: str  # a stable id: claude-desktop, claude-code, cursor, vscode, windsurf, codex, python
    title: str
    where: str  # the file to edit, or where to run it
    language: str  # json, shell, toml, python
    text: str


def mcp_url(*, origin: str, tenant_slug: str, vhost_slug: str) -> str:
    """The virtual host's Streamable HTTP endpoint at `origin` (scheme and host, no trailing slash),
    spelled with `/mcp` at the end, as clients that go by a URL's last segment expect."""
    return f"{origin}/mcp/{tenant_slug}/{vhost_slug}/mcp"


def sse_url(*, origin: str, tenant_slug: str, vhost_slug: str) -> str:
    """The virtual host's HTTP+SSE (2024-11-05) event-stream URL at `origin`."""
    return f"{origin}/mcp/{tenant_slug}/{vhost_slug}/sse"


def _json(value: object) -> str:
    return json.dumps(value, indent=2)


def client_configs(*, url: str, name: str, key: str = KEY_PLACEHOLDER) -> list[ClientConfig]:
    """One configuration per client for the endpoint `url`, the server called `name` in each."""
    bearer = f"Bearer {key}"
    return [
        ClientConfig(
            "claude-desktop", "Claude Desktop", "claude_desktop_config.json", "json",
            # Claude Desktop's config file starts local (stdio) servers: mcp-remote bridges to HTTP.
            _json({"mcpServers": {name: {
                "command": "npx",
                "args": ["-y", "mcp-remote", url, "--header", "Authorization:${AUTH_HEADER}"],
                "env": {"AUTH_HEADER": bearer},
            }}}),
        ),
        ClientConfig(
            "claude-code", "Claude Code", "a terminal", "shell",
            f'claude mcp add --transport http {name} {url} --header "Authorization: {bearer}"',
        ),
        ClientConfig(
            "cursor", "Cursor", "~/.cursor/mcp.json", "json",
            _json({"mcpServers": {name: {"url": url, "headers": {"Authorization": bearer}}}}),
        ),
        ClientConfig(
            "vscode", "VS Code", ".vscode/mcp.json", "json",
            # VS Code asks for the key when it starts the server and keeps it in its secret storage:
            # the file, often committed with a project, never holds it (not even one at hand).
            _json({
                "inputs": [{"type": "promptString", "id": f"{name}-key", "description": f"API key for {name}",
                            "password": True}],
                "servers": {name: {"type": "http", "url": url,
                                   "headers": {"Authorization": f"Bearer ${{input:{name}-key}}"}}},
            }),
        ),
        ClientConfig(
            "windsurf", "Windsurf", "~/.codeium/windsurf/mcp_config.json", "json",
            _json({"mcpServers": {name: {"serverUrl": url, "headers": {"Authorization": bearer}}}}),
        ),
        ClientConfig(
            "codex", "Codex CLI", "~/.codex/config.toml", "toml",
            # Codex reads a bearer token from an environment variable, not from the file.
            f"# export {KEY_ENV_VAR}={json.dumps(key)}\n"
            f"[mcp_servers.{_toml_key(name)}]\n"
            f"url = {json.dumps(url)}\n"
            f"bearer_token_env_var = {json.dumps(KEY_ENV_VAR)}",
        ),
        ClientConfig(
            "python", "Python (official MCP SDK)", "a script", "python",
            "import asyncio\n\n"
            "import httpx2\n"
            "from mcp import Client\n"
            "from mcp.client.streamable_http import streamable_http_client\n\n"
            f"URL = {json.dumps(url)}\n"
            f"KEY = {json.dumps(key)}\n\n\n"
            "async def main() -> None:\n"
            '    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}) as http:\n'
            "        async with Client(streamable_http_client(URL, http_client=http)) as client:\n"
            "            listed = await client.list_tools()\n"
            "            for tool in listed.tools:\n"
            "                print(tool.name)\n\n\n"
            "asyncio.run(main())",
        ),
    ]


def client_configs_signed_in(*, url: str, name: str) -> list[ClientConfig]:
    """The same clients, for a host whose tenant signs people in (the gateway's authorization
    server, docs/identity.md): no key — each client finds the server from the host's 401, registers
    and opens a browser page where the person signs in and allows it."""
    return [
        ClientConfig(
            "claude-desktop", "Claude Desktop, claude.ai", "Settings → Connectors → Add custom connector", "text",
            f"Name: {name}\nRemote MCP server URL: {url}",
        ),
        ClientConfig("claude-code", "Claude Code", "a terminal", "shell",
                     f"claude mcp add --transport http {name} {url}\n# then, in Claude Code: /mcp → {name} → Authenticate"),
        ClientConfig("cursor", "Cursor", "~/.cursor/mcp.json", "json", _json({"mcpServers": {name: {"url": url}}})),
        ClientConfig("vscode", "VS Code", ".vscode/mcp.json", "json",
                     _json({"servers": {name: {"type": "http", "url": url}}})),
        ClientConfig("windsurf", "Windsurf", "~/.codeium/windsurf/mcp_config.json", "json",
                     _json({"mcpServers": {name: {"serverUrl": url}}})),
        ClientConfig(
            "python", "Python (official MCP SDK)", "a script", "python",
            "import asyncio\n"
            "import webbrowser\n"
            "from http.server import BaseHTTPRequestHandler, HTTPServer\n"
            "from urllib.parse import parse_qs, urlsplit\n\n"
            "import httpx2\n"
            "from mcp import Client\n"
            "from mcp.client.auth import OAuthClientProvider\n"
            "from mcp.client.streamable_http import streamable_http_client\n"
            "from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata\n\n"
            f"URL = {json.dumps(url)}\n"
            'CALLBACK = "http://127.0.0.1:33418/callback"\n\n\n'
            "class Memory:  # keep the tokens and the registration on disk in real use\n"
            "    tokens = client = None\n\n"
            "    async def get_tokens(self): return self.tokens\n"
            "    async def set_tokens(self, tokens): self.tokens = tokens\n"
            "    async def get_client_info(self): return self.client\n"
            "    async def set_client_info(self, info): self.client = info\n\n\n"
            "async def open_browser(url: str) -> None:\n"
            "    webbrowser.open(url)\n\n\n"
            "async def wait_for_callback() -> AuthorizationCodeResult:\n"
            "    answer = {}\n\n"
            "    class Handler(BaseHTTPRequestHandler):\n"
            "        def do_GET(self):\n"
            "            answer.update(parse_qs(urlsplit(self.path).query))\n"
            "            self.send_response(200)\n"
            "            self.end_headers()\n"
            '            self.wfile.write(b"Signed in: you may close this window.")\n\n'
            '    await asyncio.to_thread(HTTPServer(("127.0.0.1", 33418), Handler).handle_request)\n'
            '    return AuthorizationCodeResult(code=answer["code"][0], state=answer.get("state", [None])[0],\n'
            '                                   iss=answer.get("iss", [None])[0])\n\n\n'
            "async def main() -> None:\n"
            "    auth = OAuthClientProvider(\n"
            "        server_url=URL, storage=Memory(), redirect_handler=open_browser, callback_handler=wait_for_callback,\n"
            f"        client_metadata=OAuthClientMetadata(redirect_uris=[CALLBACK], client_name={json.dumps(name)}),\n"
            "    )\n"
            "    async with httpx2.AsyncClient(auth=auth) as http:\n"
            "        async with Client(streamable_http_client(URL, http_client=http)) as client:\n"
            "            for tool in (await client.list_tools()).tools:\n"
            "                print(tool.name)\n\n\n"
            "asyncio.run(main())",
        ),
    ]


def _toml_key(name: str) -> str:
    """A TOML bare key when `name` is one, else a quoted key."""
    bare = name.replace("-", "").replace("_", "")
    return name if bare.isascii() and bare.isalnum() else json.dumps(name)
