"""The official MCP conformance suite, run through the gateway against our fixture backend on a
single-backend virtual host (names pass through) in anonymous mode (the suite sends no credentials)."""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Iterator

import pytest

from apps.catalog.services import virtual_host_create
from tests import factories
from tests.conformance.runner import compare_with_expected, load_expected_failures, run_suite
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


@pytest.mark.parametrize("suite", ["stable", "2025-11-25", "2026-07-28"])
def test_conformance_through_the_gateway(conformance_url: str, conformance_dir: pathlib.Path, suite: str) -> None:
    result = run_suite(conformance_url, suite, RESULTS / suite, conformance_dir)  # type: ignore[arg-type]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"summary-{suite}.json").write_text(json.dumps({
        "suite": suite, "scored_passed": result.scored_passed, "scored_total": result.scored_total,
        "failed": [s.name for s in result.failed],
    }, indent=2))
    print(result.summary())
    problems = compare_with_expected(result, load_expected_failures(HERE / "expected-failures.yml").get(suite, {}))
    assert not problems, "\n".join(problems)
    assert result.scored_total > 0
