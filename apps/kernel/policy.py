"""Tool access control of a virtual host (docs/policies.md): who may see and call which
tool, with which arguments. Compiled once per configuration snapshot; deciding is pure.

A policy is a default effect (`allow` or `deny`) and rules, each with
- a subject: the whole tenant, a team, or one key (by name);
- an effect: `allow` or `deny`;
- tool patterns (shell-style globs: `*`, `?` and `[...]` classes, case-sensitive). A pattern matches a tool when it
  matches its exposed name *or* its upstream name; neither takes precedence, so `get-sum` (exposed)
  and `sum` (upstream) both name the same tool;
- optionally a condition in CEL over `arguments` (the call's arguments) and `principal` (`tenant`,
  `team`, `key`, `subject`, `scopes`). A condition that fails to evaluate (a missing argument, a type
  mismatch) or gives something other than true or false counts against the caller: an `allow`
  rule's does not hold, a `deny` rule's does. A condition being written is checked statically
  first (`conditions.condition_problem`): one that can never be true or false, or calls what CEL
  does not have, is refused.

Deciding a call (with its real arguments), in this order:
1. the first `deny` rule (in written order) whose subject, tools and condition match denies;
2. else the first `allow` rule that matches allows;
3. else the default effect applies.
Deny overrides allow regardless of order. A denied call answers -32003 naming the rule.

Listing (`tools/list`, and `tool_search` later) cannot know the arguments, so a tool is shown when
some arguments could let the call through: it is hidden only by a `deny` rule whose condition does
not read `arguments` and holds for the caller, or when nothing could allow it (default `deny` and no
`allow` rule whose condition could hold). A rule whose condition reads `arguments` therefore never
empties the list. A hidden tool answers a call exactly like a missing one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cel

from apps.kernel.conditions import condition_problem
from apps.kernel.globs import glob_problem, globs_compile
from apps.kernel.identity import Principal

EFFECTS = ("allow", "deny")
SUBJECTS = ("tenant", "team", "key")
_UNKNOWN = object()  # "depends on the arguments"
_ERROR = object()  # the condition could not be evaluated


class PolicyError(ValueError):
    """A rule that cannot be compiled; the message says which part and why."""


@dataclass(frozen=True, slots=True)
class Condition:
    source: str
    program: Any  # cel.Program
    reads_arguments: bool
    reads_principal: bool = True

    @classmethod
    def compile(cls, source: str) -> Condition:
        """The condition, compiled; raises PolicyError when it is not CEL. What it reads and calls
        is checked only when it is written (`policy_check`): a stored one compiles whatever the
        check says since, and reading what is not there fails when evaluated."""
        try:
            program = cel.compile(source)
        except (ValueError, RuntimeError) as exc:
            raise PolicyError(f"condition {source!r} is not valid CEL: {exc}") from None
        # A macro's variable is listed too: reading "arguments" is over-estimated, never missed.
        variables = set(program.variables())
        return cls(source, program, "arguments" in variables, "principal" in variables)

    def holds(
        self, principal: Mapping[str, Any], arguments: Mapping[str, Any] | object, errors: list[str] | None = None
    ) -> bool | object:
        """True or False; `_UNKNOWN` when the condition reads arguments and none are given, `_ERROR`
        when it cannot be evaluated or gives something else than true or false (why is appended to
        `errors`, when given)."""
        if arguments is _UNKNOWN and self.reads_arguments:
            return _UNKNOWN
        context = {"arguments": {} if arguments is _UNKNOWN else arguments}
        if self.reads_principal:  # converting it for CEL costs several times the evaluation
            context["principal"] = principal
        try:
            value = self.program.execute(context)
        except Exception as exc:  # noqa: BLE001 - CEL raises KeyError/TypeError/... for data it cannot use
            if errors is not None:
                errors.append(_error_words(exc))
            return _ERROR
        if value is True or value is False:
            return value
        if errors is not None:
            errors.append(f"it gave {_shown(value)}, not true or false")
        return _ERROR


def _error_words(exc: Exception) -> str:
    """What a CEL evaluation error says, in a line: `no such key 'foo'`, `No such overload: …`."""
    if isinstance(exc, KeyError):
        return f"no such key {_shown(exc.args[0] if exc.args else '')}"
    first = str(exc).split(". ")[0].strip() or type(exc).__name__
    return first if len(first) <= 200 else first[:199] + "…"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    subject_kind: str
    subject_name: str
    effect: str
    patterns: tuple[str, ...]
    match: Any  # compiled regex of all patterns
    condition: Condition | None

    def applies_to(self, principal: Principal) -> bool:
        if self.subject_kind == "tenant":
            return principal.tenant_slug == self.subject_name
        if self.subject_kind == "team":
            return principal.team == self.subject_name
        # A token's subject is not a key, even when it has a key's name.
        return principal.issuer is None and principal.key_name == self.subject_name

    def names(self, exposed: str, upstream: str) -> bool:
        return names_tool(self.match, exposed, upstream)


@dataclass(frozen=True, slots=True)
class ConditionError:
    """A rule's condition that could not be evaluated while deciding a call, and why."""

    rule: str
    effect: str
    message: str

    @property
    def treated(self) -> str:
        """How it counted (module docstring): against the caller."""
        if self.effect == "deny":
            return "treated as matching: a deny rule whose condition cannot be evaluated denies"
        return "treated as not matching"


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    rule: str | None  # the deciding rule's id; None when the default decided

    @property
    def reason(self) -> str:
        verdict = "allowed" if self.allowed else "denied"
        return f"{verdict} by rule {self.rule!r}" if self.rule is not None else f"{verdict} by default"


@dataclass(frozen=True, slots=True)
class Policy:
    default: str
    rules: tuple[Rule, ...]

    def visible(self, principal: Principal, exposed: str, upstream: str) -> bool:
        """Whether the tool is listed for `principal`: some arguments could let a call through."""
        context = principal_context(principal)
        could_allow = self.default == "allow"
        for rule in self._matching(principal, exposed, upstream):
            holds = True if rule.condition is None else rule.condition.holds(context, _UNKNOWN)
            if rule.effect == "deny" and (holds is True or holds is _ERROR):
                return False
            if rule.effect == "allow" and (holds is True or holds is _UNKNOWN):
                could_allow = True
        return could_allow

    def decide(
        self, principal: Principal, exposed: str, upstream: str, arguments: Mapping[str, Any],
        errors: list[ConditionError] | None = None,
    ) -> Decision:
        """The decision on one call with its real arguments (module docstring). The conditions that
        could not be evaluated on the way are appended to `errors`, when given (the simulator's)."""
        context = principal_context(principal)
        allowing: str | None = None
        for rule in self._matching(principal, exposed, upstream):
            if rule.condition is None:
                holds = True
            elif errors is None:
                holds = rule.condition.holds(context, arguments)
            else:
                why: list[str] = []
                holds = rule.condition.holds(context, arguments, why)
                errors.extend(ConditionError(rule.id, rule.effect, message) for message in why)
            if holds is not True and not (rule.effect == "deny" and holds is _ERROR):
                continue
            if rule.effect == "deny":
                return Decision(False, rule.id)
            if allowing is None:
                allowing = rule.id
        if allowing is not None:
            return Decision(True, allowing)
        return Decision(self.default == "allow", None)

    def _matching(self, principal: Principal, exposed: str, upstream: str) -> list[Rule]:
        return [rule for rule in self.rules if rule.applies_to(principal) and rule.names(exposed, upstream)]


def principal_context(principal: Principal) -> dict[str, Any]:
    """What a condition sees as `principal`."""
    return {
        "tenant": principal.tenant_slug,
        "team": principal.team or "",
        "key": principal.key_name,
        "subject": principal.key_name,
        "scopes": list(principal.scopes),
    }


#: What a policy or a tool cost being written may hold: a pattern at most as long as the longest
#: tool name, at most this many patterns per list, rules per policy and characters per condition.
#: Only writes are held to them (`policy_check`, `tool_patterns_problem`): what is stored compiles
#: whatever its size, so a limit added later never turns a stored policy into "deny everything".
TOOL_PATTERN_MAX_LENGTH = 128
TOOL_PATTERNS_MAX = 200
RULES_MAX = 500
CONDITION_MAX_LENGTH = 2000


def tool_patterns_problem(patterns: Sequence[object]) -> str | None:
    """Why `patterns` cannot be written as a list of tool patterns, or None when they can."""
    if not patterns or len(patterns) > TOOL_PATTERNS_MAX:
        return f"tools must be a list of 1-{TOOL_PATTERNS_MAX} tool names or globs"
    for number, pattern in enumerate(patterns, start=1):
        if not isinstance(pattern, str) or not pattern:
            return f"tools must be a list of 1-{TOOL_PATTERNS_MAX} tool names or globs; item {number} is empty"
        if len(pattern) > TOOL_PATTERN_MAX_LENGTH:
            return (f"a tool name or glob is at most {TOOL_PATTERN_MAX_LENGTH} characters, "
                    f"not {len(pattern)} ({pattern[:40]!r}…)")
        if any(ch.isspace() for ch in pattern):  # no tool name has one: the pattern would never match
            return f"a tool name or glob has no spaces: {pattern[:40]!r}"
        if (problem := glob_problem(pattern)) is not None:
            return problem
    return None


def tool_patterns_compile(patterns: Sequence[str]) -> Any:
    """One matcher for a list of tool-name globs (`*`, `?`, `[...]`, case-sensitive, whole name):
    what `names_tool` takes. Raises PolicyError for an empty list or an empty pattern."""
    if not patterns or not all(isinstance(p, str) and p for p in patterns):
        raise PolicyError("tools must be a list of tool names or globs, none of them empty")
    return globs_compile(patterns).match


def names_tool(match: Any, exposed: str, upstream: str) -> bool:
    """Whether the patterns compiled into `match` name the tool: its exposed *or* its upstream name
    (neither takes precedence). Access rules and tool costs (`costs.py`) match tools the same way."""
    return match(exposed) is not None or (upstream != exposed and match(upstream) is not None)


def patterns_unmatched(patterns: Sequence[str], tools: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The patterns that name none of `tools`, (exposed, upstream) pairs, in the order given."""
    names = {name for tool in tools for name in tool}
    unmatched = []
    for pattern in patterns:
        if not _GLOB.search(pattern):  # a plain name: no need to try it on every tool
            named = pattern in names
        else:
            match = tool_patterns_compile((pattern,))
            named = any(names_tool(match, exposed, upstream) for exposed, upstream in tools)
        if not named:
            unmatched.append(pattern)
    return tuple(unmatched)


_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """A rule as configured (the control plane's shape)."""

    id: str
    subject_kind: str
    subject_name: str
    effect: str
    tools: Sequence[str]
    condition: str = ""


_RULE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def policy_check(default: str, rules: Sequence[RuleSpec]) -> Policy:
    """`policy_compile` for a policy being written, which is also held to the limits for writing
    (`TOOL_PATTERNS_MAX` and the rest); raises PolicyError naming the bad part."""
    if len(rules) > RULES_MAX:
        raise PolicyError(f"a policy has at most {RULES_MAX} rules, not {len(rules)}")
    for spec in rules:
        where = f"rule {spec.id[:64]!r}"
        if (problem := tool_patterns_problem(tuple(spec.tools))) is not None:
            raise PolicyError(f"{where}: {problem}")
        if len(spec.condition) > CONDITION_MAX_LENGTH:
            raise PolicyError(f"{where}: a condition is at most {CONDITION_MAX_LENGTH} characters")
    policy = policy_compile(default, rules)
    for rule in policy.rules:  # CEL compiled them: what it takes that cannot work
        if rule.condition is not None and (problem := condition_problem(rule.condition.source)) is not None:
            raise PolicyError(f"rule {rule.id!r}: condition {rule.condition.source!r} {problem}")
    return policy


def policy_compile(default: str, rules: Sequence[RuleSpec]) -> Policy:
    """The policy, every pattern and condition compiled; raises PolicyError naming the bad part."""
    if default not in EFFECTS:
        raise PolicyError(f"default must be allow or deny, not {default!r}")
    compiled: list[Rule] = []
    seen: set[str] = set()
    for spec in rules:
        where = f"rule {spec.id!r}"
        if not _RULE_ID.fullmatch(spec.id):
            raise PolicyError(f"{where}: ids are 1-64 letters, digits, '_', '.' and '-', starting with a letter or digit")
        if spec.id in seen:
            raise PolicyError(f"{where}: the id is used twice")
        seen.add(spec.id)
        if spec.subject_kind not in SUBJECTS:
            raise PolicyError(f"{where}: the subject is a tenant, team or key, not {spec.subject_kind!r}")
        if spec.effect not in EFFECTS:
            raise PolicyError(f"{where}: effect must be allow or deny, not {spec.effect!r}")
        patterns = tuple(spec.tools)
        try:
            match = tool_patterns_compile(patterns)
        except PolicyError as exc:
            raise PolicyError(f"{where}: {exc}") from None
        try:
            condition = Condition.compile(spec.condition) if spec.condition.strip() else None
        except PolicyError as exc:
            raise PolicyError(f"{where}: {exc}") from None
        compiled.append(Rule(spec.id, spec.subject_kind, spec.subject_name, spec.effect, patterns, match, condition))
    return Policy(default, tuple(compiled))
