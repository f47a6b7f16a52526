"""YAML documents the configuration tests share."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

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


def assert_refused_and_nothing_written(
    *, stored_first: str, broken: str, expected: str, stored: Callable[[], object]
) -> None:
    """Apply `stored_first`, then `broken` (with a tenant rename riding along, which a partial write
    would show): exactly one problem, starting with `expected`, and `stored()` as before."""
    from apps.configuration.services import ConfigInvalid, config_apply

    config_apply(document=stored_first, prune=False)
    before = stored()
    with pytest.raises(ConfigInvalid) as excinfo:
        config_apply(document=broken.replace("name: Acme Corp", "name: Renamed"), prune=True)
    problems = [str(p) for p in excinfo.value.problems]
    assert len(problems) == 1 and problems[0].startswith(expected), problems
    assert stored() == before
    assert not config_apply(document=stored_first, prune=True).changed  # not even the tenant's name
