"""The official MCP conformance suite, run through the gateway against our fixture backend in
anonymous mode (the suite sends no credentials): on a single-backend virtual host (names pass
through), and on a composed host that mounts a second backend beside it, with an alias for each of
the fixture's tools (the suite calls them by their own names). Results: docs/conformance.md."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
from collections.abc import Iterator

import pytest

from apps.catalog.services import ToolTarget, virtual_host_create
from tests import factories
from tests.conformance.runner import compare_with_expected, load_expected_failures, run_suite
from tests.conftest import mcp_client
from tests.processes import ROOT, backend_argv, free_port, running

pytestmark = pytest.mark.slow

HERE = pathlib.Path(__file__).parent
RESULTS = ROOT / "var" / "conformance-results"


@pytest.fixture(scope="session")
def conformance_dir() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("CONFORMANCE_DIR", ROOT / "var" / "conformance"))
    if not (path / "alpha" / "node_modules").exists():
        pytest.fail(f"the conformance suite is not installed under {path}: run scripts/install-node-parts.sh")
    return path


@pytest.fixture(scope="session")
def fixture_backend_url() -> Iterator[str]:
    port = free_port()
    with running(backend_argv("tests.backends.conformance_server", port), port, log_name="conformance-backend"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def conformance_url(transactional_db: None, gateway_url: str, fixture_backend_url: str) -> str:
    tenant = factories.tenant_factory(slug="conformance")
    key = factories.api_key_factory(tenant=tenant, name="conformance-suite").api_key
    backend = factories.backend_factory(tenant=tenant, name="everything", urls=[fixture_backend_url])
    virtual_host_create(tenant=tenant, slug="main", mounts={"everything": backend}, allow_anonymous=True,
                        anonymous_key=key)
    return f"{gateway_url}/mcp/conformance/main"


@pytest.fixture
def composed_conformance_url(transactional_db: None, gateway_url: str, fixture_backend_url: str,
                             demo_backend_url: str) -> str:
    tenant = factories.tenant_factory(slug="conformance-composed")
    key = factories.api_key_factory(tenant=tenant, name="conformance-suite").api_key
    fixture = factories.backend_factory(tenant=tenant, name="everything", urls=[fixture_backend_url])
    demo = factories.backend_factory(tenant=tenant, name="demo", urls=[f"{demo_backend_url}"])
    aliases = {name: ToolTarget("everything", name) for name in asyncio.run(_tool_names(fixture_backend_url))}
    virtual_host_create(tenant=tenant, slug="main", mounts={"everything": fixture, "demo": demo}, tool_aliases=aliases,
                        allow_anonymous=True, anonymous_key=key)
    return f"{gateway_url}/mcp/conformance-composed/main"


async def _tool_names(url: str) -> list[str]:
    async with mcp_client(url, None, "legacy") as client:
        return [tool.name for tool in (await client.list_tools()).tools]


def _run(url: str, suite: str, host: str, conformance_dir: pathlib.Path, expected: str) -> None:
    result = run_suite(url, suite, RESULTS / host / suite, conformance_dir)  # type: ignore[arg-type]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"summary-{host}-{suite}.json").write_text(json.dumps({
        "suite": suite, "host": host, "scored_passed": result.scored_passed, "scored_total": result.scored_total,
        "failed": [s.name for s in result.failed],
    }, indent=2))
    print(result.summary())
    problems = compare_with_expected(result, load_expected_failures(HERE / expected))
    assert not problems, "\n".join(problems)
    assert result.scored_total > 0
    # What the suite runs but does not score yet (the tasks extension's scenarios, SSE polling, ...)
    # passes through the gateway as well: the fixture implements all of it.
    unscored = [s for s in result.scenarios if not s.scored]
    assert all(s.passed for s in unscored), [(s.name, [c.message for c in s.failures]) for s in unscored if not s.passed]
    if suite == "2026-07-28":
        assert len([s for s in unscored if s.name.startswith("tasks-")]) >= 9, [s.name for s in unscored]


@pytest.mark.parametrize("suite", ["stable", "2025-11-25", "2026-07-28"])
def test_conformance_through_the_gateway(conformance_url: str, conformance_dir: pathlib.Path, suite: str) -> None:
    _run(conformance_url, suite, "single", conformance_dir, "expected-failures.yml")


@pytest.mark.parametrize("suite", ["stable", "2025-11-25", "2026-07-28"])
def test_conformance_through_a_composed_host(composed_conformance_url: str, conformance_dir: pathlib.Path,
                                             suite: str) -> None:
    _run(composed_conformance_url, suite, "composed", conformance_dir, "expected-failures-composed.yml")
