"""Judging an mcp-fuzzer run against the gateway: what the fuzzer reported, what the gateway really
answered (the recording proxy's exchanges) and what the gateway logged.

mcp-fuzzer exits 0 whatever it finds, and its own classification is lenient: it counts a JSON-RPC
-32603 answer as the server "rejecting" bad input. So the verdict is ours, from three sources:

* the fuzzer's reports (`run_summary.json`, `findings.json`, `crashes/`), read strictly: a missing
  file or an unexpected shape is a `ReportError`, never a pass;
* every exchange the proxy relayed: a 5xx, a JSON-RPC -32603 or a Python traceback or exception
  text in any answer is a problem;
* the gateway's log: any traceback is a problem.

Each function returns problems as readable one-line strings; an empty list is a clean run."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

# mcp-fuzzer finding categories that are a fault of the gateway. `internal_error` and
# `error_leakage` are the issue's own criteria; a crash, a hang or an unbounded answer is a fault of
# any server.
FAULTS = frozenset({"crash", "internal_error", "error_leakage", "hang", "oversized_response", "memory_growth"})
# Categories that describe correct gateway behaviour here (docs/conformance.md, "Fuzzing"):
TOLERATED = {
    # mcp-fuzzer's name for any answer that is not an error, valid calls included. A backend's tool
    # decides which arguments it takes (the gateway forwards them as given); the tools whose
    # arguments the gateway checks itself are held to their schema (`validated` below).
    "accepted_malformed": "a backend's tool decides which arguments it accepts",
    # `echo` and the recording REST service repeat what they were sent; errors quote refused names.
    "injection_reflection": "the fixture tools echo their input by design",
    # Timing and ordering on a shared two-core CI machine measure the machine (`utc_now` differs
    # between identical calls, a 3 s backend timeout can land on either side of a call).
    "performance_outlier": "timing on a shared CI machine",
    "non_determinism": "time-dependent fixture tools and timeouts",
}

_SUMMARY_KEYS = {"mode", "status", "tools", "protocols", "findings"}
_FINDING_KEYS = {"category", "severity", "kind", "target", "run", "detail", "evidence"}
_EXCHANGE_KEYS = {"method", "path", "status", "content_type", "request", "body", "truncated", "completed", "error"}

_INTERNAL_ERROR = re.compile(r'"code"\s*:\s*-32603\b')
_SSE_DATA = re.compile(r"^data: ?(.*)$", re.MULTILINE)
_PYTHON_EXCEPTIONS = (
    "BaseException|Exception|ArithmeticError|AssertionError|AttributeError|BlockingIOError|BrokenPipeError|"
    "BufferError|ConnectionError|ConnectionResetError|EOFError|FileNotFoundError|FloatingPointError|"
    "ImportError|IndentationError|IndexError|KeyError|LookupError|MemoryError|ModuleNotFoundError|NameError|"
    "NotImplementedError|OSError|OverflowError|PermissionError|RecursionError|ReferenceError|RuntimeError|"
    "StopAsyncIteration|StopIteration|SyntaxError|SystemError|TimeoutError|TypeError|UnboundLocalError|"
    "UnicodeDecodeError|UnicodeEncodeError|UnicodeError|ValueError|ZeroDivisionError|CancelledError|"
    "JSONDecodeError|ValidationError|IntegrityError|DatabaseError|OperationalError|ProgrammingError|"
    "HTTPStatusError|ConnectError|ReadTimeout|RemoteProtocolError"
)
# Text a Python exception leaves when it escapes into an answer: a traceback, a frame line, the
# `Name: message` / `Name(...)` of an exception class, or the messages of the commonest bugs.
LEAKS = tuple(re.compile(pattern) for pattern in (
    r"Traceback \(most recent call last\)",
    r'File "[^"\n]+\.py", line \d+',
    rf"\b(?:{_PYTHON_EXCEPTIONS})(?::\s|\()",
    r"'NoneType' object",
    r"object has no attribute '",
    r"object is not (?:subscriptable|iterable|callable)",
    r"unhashable type: '",
    r"takes \d+ positional arguments? but \d+ (?:was|were) given",
    r"got an unexpected keyword argument '",
    r"is not JSON serializable",
))


class ReportError(Exception):
    """A fuzzer report is missing or not shaped as mcp-fuzzer 0.7 writes it: the run cannot be judged."""


def _load(path: Path) -> Any:
    if not path.is_file():
        raise ReportError(f"{path} is missing: the fuzzer did not finish its run")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ReportError(f"{path} is not JSON: {exc}") from exc


def _expect(condition: bool, path: Path, what: str) -> None:
    if not condition:
        raise ReportError(f"{path}: {what}")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _counts(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and _is_count(v) for k, v in value.items())


def read_summary(output_dir: Path, *, mode: str) -> dict[str, Any]:
    """`run_summary.json` of a run in `mode`, checked for the shape mcp-fuzzer 0.7 writes."""
    path = output_dir / "run_summary.json"
    summary = _load(path)
    _expect(isinstance(summary, dict) and _SUMMARY_KEYS <= summary.keys(), path,
            f"expected an object with {sorted(_SUMMARY_KEYS)}, got {str(summary)[:200]}")
    _expect(summary["mode"] == mode, path, f"mode is {summary['mode']!r}, the run asked for {mode!r}")
    _expect(summary["status"] in ("completed", "blocked"), path, f"unknown status {summary['status']!r}")
    tools, protocols, findings = summary["tools"], summary["protocols"], summary["findings"]
    _expect(isinstance(tools, dict) and _is_count(tools.get("total")) and _is_count(tools.get("total_runs"))
            and isinstance(tools.get("by_name"), dict), path, f"unexpected 'tools': {str(tools)[:200]}")
    _expect(isinstance(protocols, dict) and _is_count(protocols.get("total"))
            and _is_count(protocols.get("total_runs")) and isinstance(protocols.get("by_type"), dict),
            path, f"unexpected 'protocols': {str(protocols)[:200]}")
    _expect(isinstance(findings, dict) and _is_count(findings.get("total")) and _counts(findings.get("by_category")),
            path, f"unexpected 'findings': {str(findings)[:200]}")
    _expect(sum(findings["by_category"].values()) == findings["total"], path,
            "findings.total is not the sum of findings.by_category")
    return summary


def read_findings(output_dir: Path) -> list[dict[str, Any]]:
    """The findings of `findings.json`, each checked for the fields mcp-fuzzer 0.7 writes."""
    path = output_dir / "findings.json"
    document = _load(path)
    _expect(isinstance(document, dict) and isinstance(document.get("findings"), list)
            and _is_count(document.get("count")), path, "expected an object with a 'findings' list and a 'count'")
    findings: list[dict[str, Any]] = document["findings"]
    _expect(document["count"] == len(findings), path, f"count {document['count']} but {len(findings)} findings")
    for finding in findings:
        _expect(isinstance(finding, dict) and _FINDING_KEYS <= finding.keys()
                and isinstance(finding["category"], str), path, f"unexpected finding: {str(finding)[:200]}")
    return findings


def report_problems(
    output_dir: Path, *, mode: str, label: str, validated: Mapping[str, Mapping[str, Any]] | None = None
) -> list[str]:
    """What the fuzzer's own reports of one run hold against the gateway. Raises `ReportError` when
    they are missing or malformed.

    `validated`: the input schemas of the tools whose arguments the gateway checks itself (its own
    tool_search, OpenAPI tools). mcp-fuzzer calls every answer that is not an error
    "accepted_malformed", valid arguments included; for these tools the schema decides, and
    arguments it refuses that got an answer anyway are a problem."""
    summary = read_summary(output_dir, mode=mode)
    findings = read_findings(output_dir)
    problems: list[str] = []
    if summary["status"] == "blocked":
        problems.append(f"[{label}] the fuzzer was blocked: {summary.get('blocked_reason')} "
                        f"{summary.get('blocked_detail', '')}".rstrip())
    by_category = Counter(finding["category"] for finding in findings)
    if dict(by_category) != summary["findings"]["by_category"]:
        raise ReportError(f"{output_dir}: findings.json {dict(by_category)} disagrees with run_summary.json "
                          f"{summary['findings']['by_category']}")
    for finding in findings:
        category = finding["category"]
        if category == "accepted_malformed" and finding["target"] in (validated or {}):
            refused = _schema_refuses((validated or {})[finding["target"]], finding["evidence"].get("input"))
            if refused:
                problems.append(f"[{label}] {finding['target']} answered arguments its input schema refuses "
                                f"({refused}): {json.dumps(finding['evidence'].get('input'), default=str)[:300]}")
            continue
        if category in TOLERATED:
            continue
        where = f"{finding['kind']} {finding['target']}" + (f" run {finding['run']}" if finding["run"] else "")
        if category in FAULTS:
            problems.append(f"[{label}] {category} ({finding['severity']}) on {where}: {finding['detail']} "
                            f"evidence={json.dumps(finding['evidence'], default=str)[:300]}")
        else:
            problems.append(f"[{label}] unclassified finding category {category!r} on {where}: {finding['detail']} "
                            "(decide whether it is a gateway fault: tests/fuzz/judge.py)")
    crashes = output_dir / "crashes"
    if crashes.is_dir():
        problems.extend(f"[{label}] crash reproduction recorded: {path}" for path in sorted(crashes.iterdir()))
    return problems


def _internal_error(body: str) -> bool:
    """Whether an answer (JSON, a JSON batch, or an event stream of them) carries a JSON-RPC error
    -32603. Messages are looked at, not text, so a -32603 quoted back from the request in an error
    message is not one; an answer that does not parse is searched as text."""
    try:
        documents = [json.loads(body)] if body.lstrip().startswith(("{", "[")) else [
            json.loads(data) for data in _SSE_DATA.findall(body) if data.strip()]
    except ValueError:
        return bool(_INTERNAL_ERROR.search(body))
    messages = [m for document in documents for m in (document if isinstance(document, list) else [document])]
    return any(isinstance(m, dict) and isinstance(m.get("error"), dict) and m["error"].get("code") == -32603
               for m in messages)


def _schema_refuses(schema: Mapping[str, Any], arguments: Any) -> str | None:
    error = best_match(Draft202012Validator(schema).iter_errors(arguments))
    return None if error is None else error.message[:200]


def _leaks(text: str, request: str) -> list[str]:
    """Leak patterns found in `text` that are not an echo of the request."""
    found = []
    for pattern in LEAKS:
        for match in pattern.finditer(text):
            if match.group(0) not in request:
                found.append(match.group(0))
                break
    return found


def exchange_problems(exchanges: Iterable[Mapping[str, Any]]) -> list[str]:
    """What the gateway's answers (as the recording proxy saw them) hold: no answer, or one broken
    off or left unfinished, a 5xx, a JSON-RPC -32603 or leaked exception text.

    Every backend of the fuzzed host has a timeout shorter than the fuzzer's, so a POST the gateway
    had not answered in full when the fuzzer gave up is a hang of the gateway's. A GET is a stream
    the client listens to for as long as it likes."""
    problems: list[str] = []
    for number, exchange in enumerate(exchanges, 1):
        if not (isinstance(exchange, Mapping) and _EXCHANGE_KEYS <= exchange.keys()):
            raise ReportError(f"exchange {number} is not shaped as the recording proxy writes: {str(exchange)[:200]}")
        where = f"exchange {number} ({exchange['method']} {exchange['path']}, request {exchange['request'][:160]!r})"
        body = exchange["body"]
        if exchange["status"] is None:
            problems.append(f"{where}: {exchange['error'] or 'no answer began before the client gave up waiting'}")
            continue
        if exchange["status"] >= 500:
            problems.append(f"{where}: HTTP {exchange['status']}: {body[:300]!r}")
        if exchange["error"]:
            problems.append(f"{where}: {exchange['error']}")
        elif not exchange["completed"] and exchange["method"] == "POST":
            problems.append(f"{where}: the answer was unfinished when the client gave up waiting: {body[-300:]!r}")
        if _internal_error(body):
            problems.append(f"{where}: JSON-RPC -32603 internal error in the answer: {body[:300]!r}")
        leaked = _leaks(body, exchange["request"])
        if leaked:
            problems.append(f"{where}: the answer leaks Python exception text {leaked}: {body[:300]!r}")
    return problems


def read_exchanges(path: Path) -> list[dict[str, Any]]:
    """The recording proxy's exchanges; a `ReportError` when there are none (nothing was judged)."""
    if not path.is_file():
        raise ReportError(f"{path} is missing: no request went through the recording proxy")
    exchanges = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            exchanges.append(json.loads(line))
        except ValueError as exc:
            raise ReportError(f"{path} line {number} is not JSON: {exc}") from exc
    if not exchanges:
        raise ReportError(f"{path} is empty: no request went through the recording proxy")
    return exchanges


def log_problems(log: str) -> list[str]:
    """Every traceback in the gateway's log: its exception line and innermost frame (or, for a
    traceback inside a structured JSON log line, that line)."""
    problems = []
    lines = log.splitlines()
    for index, line in enumerate(lines):
        if "Traceback (most recent call last)" not in line:
            continue
        if line.lstrip().startswith("{"):
            problems.append(f"gateway log line {index + 1}: {line.strip()[:400]}")
            continue
        frames: list[str] = []
        ending = "(no exception line)"
        for candidate in lines[index + 1:index + 400]:
            if candidate.startswith((" ", "\t")):
                if candidate.lstrip().startswith("File "):
                    frames.append(candidate.strip())
            elif candidate.strip():
                ending = candidate.strip()
                break
        problems.append(f"gateway log line {index + 1}: {ending} (innermost: {frames[-1] if frames else '?'})")
    return problems
