"""YAML documents the configuration tests share."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs" / "config.md"

# Exactly the shape scripts and users rely on (the project's README example); must apply as written.
README_EXAMPLE = """\
tenants:
  - slug: acme
    name: Acme Corp
    teams: [platform]
    keys:
      - name: agent
        team: platform
        secret: "acme-agent-0123456789abcdef"   # optional; generated and printed when absent
backends:
  - tenant: acme
    name: demo
    kind: mcp
    transport: streamable-http
    urls: ["http://127.0.0.1:9001/mcp"]          # one or more replicas
virtual_hosts:
  - tenant: acme
    slug: main
    backends: {demo: demo}                        # map key -> backend name
    tool_aliases: {}                              # exposed alias -> "map-key:upstream-name"
"""


def docs_examples() -> list[str]:
    """Every configuration document shown in docs/config.md, in order."""
    blocks = re.findall(r"```yaml\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.S)
    return [block for block in blocks if block.startswith("tenants:")]


def full_example() -> str:
    """The two-tenant example of docs/config.md (the one with aliases and several replicas)."""
    return next(doc for doc in docs_examples() if "globex" in doc)
