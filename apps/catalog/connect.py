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


def _toml_key(name: str) -> str:
    """A TOML bare key when `name` is one, else a quoted key."""
    bare = name.replace("-", "").replace("_", "")
    return name if bare.isascii() and bare.isalnum() else json.dumps(name)
