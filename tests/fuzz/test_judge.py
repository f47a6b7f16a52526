"""The fuzz verdict can fail: reports written by mcp-fuzzer's own writers (so their shape is the
tool's, not a guess), exchanges as the recording proxy writes them, and gateway logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_fuzzer.diagnostics.classify import classify_fuzz_runs, summarize_findings
from mcp_fuzzer.reports.crash_repro import write_crash_repros, write_findings_report
from mcp_fuzzer.reports.run_summary import build_run_summary, write_run_summary

from tests.fuzz.judge import ReportError, exchange_problems, log_problems, read_exchanges, report_problems

REJECTED = {"response": {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Invalid params: k"}},
            "error": None}
INTERNAL = {"response": {"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "Internal error"}},
            "error": None}


def write_run(out: Path, *, mode: str = "protocol", tools: dict[str, Any] | None = None,
              protocols: dict[str, Any] | None = None, blocked: bool = False) -> Path:
    """What mcp-fuzzer 0.7 writes at the end of a run (orchestrator/persist.py, cli/post_run.py)."""
    findings = classify_fuzz_runs(tools, protocols)
    write_crash_repros(out, tools, protocols)
    write_findings_report(out, findings)
    discovery = {"failure": "auth_required", "detail": "HTTP 401"} if blocked else None
    write_run_summary(out, build_run_summary(mode=mode, tool_results=tools, protocol_results=protocols,
                                             blocked=blocked, findings_summary=summarize_findings(findings),
                                             tool_discovery=discovery))
    return out


def protocol_run(result: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"fuzz_data": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, "label": "x", "result": result,
            "success": True, "outcome": "server_rejected", **extra}


def test_a_clean_run_has_no_problem(tmp_path: Path) -> None:
    write_run(tmp_path, protocols={"ListToolsRequest": [protocol_run(REJECTED)]})
    assert report_problems(tmp_path, mode="protocol", label="p") == []


def test_a_32603_answer_is_a_problem(tmp_path: Path) -> None:
    write_run(tmp_path, protocols={"ListToolsRequest": [protocol_run(REJECTED), protocol_run(INTERNAL)]})
    problems = report_problems(tmp_path, mode="protocol", label="p")
    assert len(problems) == 1
    assert problems[0].startswith("[p] internal_error (medium) on protocol ListToolsRequest run 2")


def test_a_leaked_traceback_and_a_crash_are_problems(tmp_path: Path) -> None:
    leaked = {"response": {"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": 'Traceback (most recent call last):\n  File "x.py", line 1'}]}}, "error": None}
    crashed = {"args": {"q": "x"}, "success": False, "outcome": "crashed", "error": "server_crashed",
               "exception": "server exited", "crash": {"returncode": -11, "stderr_tail": ["Segmentation fault"]}}
    write_run(tmp_path, mode="tools", tools={"echo": [crashed]}, protocols={"ListToolsRequest": [protocol_run(leaked)]})
    problems = "\n".join(report_problems(tmp_path, mode="tools", label="t"))
    assert "error_leakage" in problems
    assert "crash (critical) on tool echo run 1" in problems
    assert "crash reproduction recorded" in problems


def test_tolerated_categories_are_not_problems_and_unknown_ones_are(tmp_path: Path) -> None:
    accepted = {"response": {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}, "error": None}
    write_run(tmp_path, protocols={"ListToolsRequest": [protocol_run(accepted, outcome="accepted_malformed")]})
    assert report_problems(tmp_path, mode="protocol", label="p") == []
    document = json.loads((tmp_path / "findings.json").read_text())
    document["findings"][0]["category"] = "brand_new_check"
    (tmp_path / "findings.json").write_text(json.dumps(document))
    summary = json.loads((tmp_path / "run_summary.json").read_text())
    summary["findings"]["by_category"] = {"brand_new_check": 1}
    (tmp_path / "run_summary.json").write_text(json.dumps(summary))
    assert "unclassified finding category 'brand_new_check'" in report_problems(tmp_path, mode="protocol", label="p")[0]


def test_arguments_a_validating_tool_should_refuse_are_a_problem(tmp_path: Path) -> None:
    answered = {"content": [{"type": "text", "text": "{}"}], "isError": False}
    runs = [{"args": args, "result": answered, "success": False, "outcome": "accepted_malformed"}
            for args in ({"query": "pets", "k": 3}, {"query": "pets", "k": "3"})]
    write_run(tmp_path, mode="tools", tools={"tool_search": runs, "echo": runs})
    schema = {"type": "object", "properties": {"query": {"type": "string"}, "k": {"type": "integer"}},
              "required": ["query"]}
    assert report_problems(tmp_path, mode="tools", label="t") == []  # a backend's tool decides for itself
    problems = report_problems(tmp_path, mode="tools", label="t", validated={"tool_search": schema})
    assert problems == ["[t] tool_search answered arguments its input schema refuses ('3' is not of type "
                        "'integer'): {\"query\": \"pets\", \"k\": \"3\"}"]


def test_a_blocked_run_is_a_problem(tmp_path: Path) -> None:
    write_run(tmp_path, mode="tools", tools={}, blocked=True)
    assert report_problems(tmp_path, mode="tools", label="t") == ["[t] the fuzzer was blocked: auth_required HTTP 401"]


@pytest.mark.parametrize(("file", "change", "message"), [
    ("run_summary.json", None, "run_summary.json is missing"),
    ("findings.json", None, "findings.json is missing"),
    ("run_summary.json", "not json", "is not JSON"),
    ("run_summary.json", ("whole", {"mode": "protocol"}), "expected an object with"),
    ("run_summary.json", {"findings": {"total": "0", "by_category": {}}}, "unexpected 'findings'"),
    ("run_summary.json", {"mode": "tools"}, "mode is 'tools', the run asked for 'protocol'"),
    ("run_summary.json", {"status": "interrupted"}, "unknown status"),
    ("findings.json", {"findings": [], "count": 3}, "count 3 but 0 findings"),
    ("findings.json", {"findings": [{"category": "crash"}], "count": 1}, "unexpected finding"),
    ("findings.json", ("whole", [{"category": "crash"}]), "expected an object with a 'findings' list"),
])
def test_a_missing_or_misshapen_report_cannot_pass(tmp_path: Path, file: str, change: Any, message: str) -> None:
    write_run(tmp_path, protocols={"ListToolsRequest": [protocol_run(REJECTED)]})
    path = tmp_path / file
    if change is None:
        path.unlink()
    elif isinstance(change, str):
        path.write_text(change)
    elif isinstance(change, tuple):  # the whole document replaced
        path.write_text(json.dumps(change[1]))
    else:  # some fields replaced
        path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    with pytest.raises(ReportError, match=message):
        report_problems(tmp_path, mode="protocol", label="p")


def test_findings_that_disagree_with_the_summary_cannot_pass(tmp_path: Path) -> None:
    write_run(tmp_path, protocols={"ListToolsRequest": [protocol_run(INTERNAL)]})
    summary = json.loads((tmp_path / "run_summary.json").read_text())
    summary["findings"] = {"total": 0, "by_category": {}}
    (tmp_path / "run_summary.json").write_text(json.dumps(summary))
    with pytest.raises(ReportError, match="disagrees with run_summary.json"):
        report_problems(tmp_path, mode="protocol", label="p")


def exchange(body: str, *, status: int | None = 200, request: str = '{"method":"tools/call"}',
             content_type: str = "application/json", error: str | None = None, method: str = "POST",
             completed: bool = True) -> dict[str, Any]:
    return {"method": method, "path": "/mcp/t/h", "status": status, "content_type": content_type,
            "request": request, "body": body, "truncated": False, "completed": completed, "error": error}


def test_answers_are_judged_by_what_the_gateway_sent() -> None:
    fine = [
        exchange('{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params: k must be an integer"}}'),
        exchange('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}', status=400),
        exchange('{"received": "KeyError: x"}', request='{"arguments":{"q":"KeyError: x"}}'),  # an echo
        exchange("", status=202),
        exchange(": listening\n\n", method="GET", content_type="text/event-stream", completed=False),
        exchange('{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Unknown tool: {\\"code\\": -32603}"}}'),
    ]
    assert exchange_problems(fine) == []
    sse = ('id: 1\ndata: \n\nevent: message\ndata: {"jsonrpc":"2.0","id":3,"error":{"code": -32603,"message":"boom"}}'
           '\n\n')
    bad = [
        exchange('{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}', status=500),
        exchange(sse, content_type="text/event-stream"),
        exchange('{"result":{"content":[{"text":"AttributeError: \'NoneType\' object has no attribute \'get\'"}]}}'),
        exchange("", status=None, error="the gateway could not be reached: ConnectError()"),
        exchange("partial", error="the gateway broke off its answer: RemoteProtocolError()", completed=False),
        exchange("", status=None),
        exchange('[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"x"}}]'),
        exchange('{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"cut off'),
        exchange("id: 1\ndata: \n\n", content_type="text/event-stream", completed=False),
    ]
    problems = exchange_problems(bad)
    expected = [(1, "HTTP 500"), (1, "JSON-RPC -32603 internal error"), (2, "JSON-RPC -32603 internal error"),
                (3, "the answer leaks Python exception text"), (4, "the gateway could not be reached"),
                (5, "the gateway broke off its answer"), (6, "no answer began before the client gave up"),
                (7, "JSON-RPC -32603 internal error"), (8, "JSON-RPC -32603 internal error"),
                (9, "the answer was unfinished when the client gave up")]
    assert len(problems) == len(expected)
    for problem, (number, phrase) in zip(problems, expected, strict=True):
        assert problem.startswith(f"exchange {number} (POST /mcp/t/h") and phrase in problem
    assert "AttributeError: " in problems[3] and "'NoneType' object" in problems[3]


def test_no_or_misshapen_exchanges_cannot_pass(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="missing"):
        read_exchanges(tmp_path / "exchanges.jsonl")
    (tmp_path / "exchanges.jsonl").write_text("")
    with pytest.raises(ReportError, match="empty"):
        read_exchanges(tmp_path / "exchanges.jsonl")
    with pytest.raises(ReportError, match="not shaped as the recording proxy writes"):
        exchange_problems([{"status": 200, "body": ""}])


def test_a_traceback_in_the_gateway_log_is_a_problem() -> None:
    log = "\n".join([
        '127.0.0.1:1 - - [01/Dec/2026:10:08:51] "POST /mcp/t/h" 200 78',
        "2026-12-01 10:08:51,259 ERROR apps.gateway.transports.consumers unhandled error on POST /mcp/t/h",
        "Traceback (most recent call last):",
        '  File "/work/main/apps/gateway/pipeline/gateway.py", line 157, in handle',
        "    return await self._handle(request)",
        '  File "/work/main/apps/gateway/snapshots.py", line 139, in _backend_view',
        "    egress = egress_plan_build(backend=backend)",
        "TypeError: egress_plan_build() got an unexpected keyword argument 'allow_private'",
        '{"level": "ERROR", "exc_info": "Traceback (most recent call last):\\n  File \\"x.py\\"\\nKeyError: 1"}',
    ])
    assert log_problems(log) == [
        "gateway log line 3: TypeError: egress_plan_build() got an unexpected keyword argument 'allow_private' "
        "(innermost: File \"/work/main/apps/gateway/snapshots.py\", line 139, in _backend_view)",
        'gateway log line 9: {"level": "ERROR", "exc_info": "Traceback (most recent call last):\\n  File '
        '\\"x.py\\"\\nKeyError: 1"}',
    ]
    assert log_problems('127.0.0.1:1 - - "POST /mcp/t/h" 200 78\n') == []
