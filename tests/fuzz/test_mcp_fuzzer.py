"""mcp-fuzzer against the MCP endpoint (docs/conformance.md, "Fuzzing"): a real gateway under Daphne fronting the demo
MCP backend (Streamable HTTP), an OpenAPI backend on the recording REST service and the host's own
tool_search, fuzzed with a fixed seed in tools mode (realistic and aggressive arguments) and
protocol mode (realistic and aggressive messages).

The fuzzer talks to the gateway through a recording proxy; `tests/fuzz/judge.py` fails the run on
any crash, 5xx, JSON-RPC -32603, leaked traceback or exception text, or a gateway that died or
logged a traceback. Reports land in var/fuzz-results/ (docs/conformance.md, "Fuzzing")."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fuzz.conftest import RESULTS, Target
from tests.fuzz.judge import exchange_problems, log_problems, read_exchanges, read_summary, report_problems
from tests.processes import ROOT, stop

pytestmark = pytest.mark.slow

SEED = "20260728"
# Bounds: each call and message waits at most REQUEST_TIMEOUT; a whole fuzzer run at most
# RUN_TIMEOUT (the three together take about 50 s here). A backend answers within the fixture's
# BACKEND_TIMEOUT or the gateway answers for it, so a request still unanswered when the fuzzer
# gives up is a hang of the gateway's.
REQUEST_TIMEOUT = "10"
RUN_TIMEOUT = 150.0
COMMON = ("--protocol", "streamablehttp", "--seed", SEED, "--timeout", REQUEST_TIMEOUT, "--no-corpus",
          "--max-concurrency", "2", "--output-types", "fuzzing_results", "error_report", "--log-level", "WARNING")


@dataclass(frozen=True)
class FuzzRun:
    label: str
    mode: str
    options: tuple[str, ...]


RUNS = (
    # Every tool: arguments built from its schema, then hostile ones (wrong types, oversized and
    # attack strings). The safety filter would defuse the hostile ones; the fixture tools have no
    # file, process or network side effects, so it is off.
    FuzzRun("tools", "tools", ("--mode", "tools", "--phase", "both", "--runs", "3", "--no-safety", "--fail-if-no-tools")),
    # Every MCP message type, well formed (after the fuzzer's spec checks) and then malformed.
    FuzzRun("protocol-realistic", "protocol", ("--mode", "protocol", "--protocol-phase", "realistic",
                                                "--runs-per-type", "3")),
    FuzzRun("protocol-aggressive", "protocol", ("--mode", "protocol", "--protocol-phase", "aggressive",
                                                 "--runs-per-type", "3", "--no-spec-guard")),
)


def fuzz(target: Target, run: FuzzRun, sandbox: Path) -> Path:
    """One bounded mcp-fuzzer run; its reports go to var/fuzz-results/<label>/, its files (the auth
    config with the key, its filesystem sandbox) to `sandbox`."""
    output = RESULTS / run.label
    auth = sandbox / "auth.json"
    auth.write_text(json.dumps({"providers": {"gateway": {"type": "api_key", "api_key": target.key}},
                                "default_provider": "gateway"}))
    argv = [sys.executable, "-m", "mcp_fuzzer", *COMMON, "--endpoint", target.url, "--auth-config", str(auth),
            "--output-dir", str(output), "--fs-root", str(sandbox / run.label), *run.options]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=RUN_TIMEOUT, check=False)
    (output / "stdout.txt").write_bytes(done.stdout)
    (output / "stderr.txt").write_bytes(done.stderr)
    assert done.returncode == 0, (
        f"mcp-fuzzer {run.label} exited {done.returncode}:\n{done.stderr.decode(errors='replace')[-3000:]}")
    return output


def test_fuzzing_the_mcp_endpoint_finds_nothing(target: Target, tmp_path: Path) -> None:
    problems: list[str] = []
    for run in RUNS:
        output = fuzz(target, run, tmp_path)
        problems += report_problems(output, mode=run.mode, label=run.label, validated=target.validated)
        summary = read_summary(output, mode=run.mode)
        if run.mode == "tools":  # the fuzzer reached the gateway's own tool, an MCP one and an OpenAPI one
            fuzzed = set(summary["tools"]["by_name"])
            missing = {"tool_search", "demo-echo", "svc-getPet"} - fuzzed
            assert not missing, f"the fuzzer did not reach {missing}; it fuzzed {sorted(fuzzed)}"
        else:
            assert summary["protocols"]["total_runs"] > 0, f"{run.label}: no protocol message was fuzzed"
    stop(target.proxy)  # it records an exchange once it is over: all are written when it has stopped
    problems += exchange_problems(read_exchanges(target.exchanges))
    if target.gateway.poll() is not None:
        problems.append(f"the gateway exited with code {target.gateway.returncode} during the fuzzing")
    problems += log_problems(target.gateway_log.read_text(encoding="utf-8", errors="replace"))
    assert not problems, f"{len(problems)} fuzzing finding(s) (reports in {RESULTS}):\n" + "\n".join(problems)
