"""What a routed call costs against budgets (docs/policies.md, "Tool costs"). Compiled once per configuration snapshot;
looking a cost up is pure and needs no I/O.

A virtual host's tool costs are entries of tool patterns and a cost in units, in the order written.
Patterns match a tool exactly as access rules do (`policy.names_tool`): shell-style globs against
its exposed *or* its upstream name. The first entry that names the tool decides; a tool no entry
names costs `DEFAULT_COST`. `resources/read` and `prompts/get` always cost `DEFAULT_COST`: patterns
are tool names, and a resource URI or prompt name matched by a tool glob would be an accident."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from apps.kernel.policy import PolicyError, names_tool, tool_patterns_compile, tool_patterns_problem
from apps.kernel.problems import FieldProblem

DEFAULT_COST = 1
#: The largest cost and cap the control plane stores (a PostgreSQL integer).
UNITS_MAX = 2_147_483_647


@dataclass(frozen=True, slots=True)
class ToolCostSpec:
    """One entry as configured: the tools it names (exposed or upstream names, globs allowed) and
    what each call of one of them costs, in units (0: free)."""

    tools: Sequence[str]
    cost: int


@dataclass(frozen=True, slots=True)
class ToolCosts:
    entries: tuple[tuple[Any, int], ...]  # (compiled patterns, cost), in written order

    def of(self, exposed: str, upstream: str) -> int:
        for match, cost in self.entries:
            if names_tool(match, exposed, upstream):
                return cost
        return DEFAULT_COST


def tool_cost_check(spec: ToolCostSpec) -> list[FieldProblem]:
    """What is wrong with one entry (empty: nothing): the rule every face applies, with the same words."""
    problems = []
    if (problem := tool_patterns_problem(tuple(spec.tools))) is not None:
        problems.append(FieldProblem("tools", problem))
    cost = spec.cost
    # bool is an int subclass: `cost: true` would otherwise be read as 1.
    if isinstance(cost, bool) or not isinstance(cost, int) or not 0 <= cost <= UNITS_MAX:
        problems.append(FieldProblem("cost", f"cost must be a whole number from 0 to {UNITS_MAX}"))
    return problems


def tool_costs_check(specs: Sequence[ToolCostSpec]) -> ToolCosts:
    """`tool_costs_compile` for entries being written, each also held to `tool_cost_check`."""
    for number, spec in enumerate(specs, start=1):
        if problems := tool_cost_check(spec):
            raise PolicyError(f"tool cost {number}: {'; '.join(problem.message for problem in problems)}")
    return tool_costs_compile(specs)


def tool_costs_compile(specs: Sequence[ToolCostSpec]) -> ToolCosts:
    """The host's cost table, whatever the limits for writing say (see `policy.TOOL_PATTERNS_MAX`);
    raises PolicyError naming the bad entry (1-based, as written)."""
    entries = []
    for number, spec in enumerate(specs, start=1):
        cost = spec.cost
        if isinstance(cost, bool) or not isinstance(cost, int) or not 0 <= cost <= UNITS_MAX:
            raise PolicyError(f"tool cost {number}: cost must be a whole number from 0 to {UNITS_MAX}")
        try:
            entries.append((tool_patterns_compile(tuple(spec.tools)), cost))
        except PolicyError as exc:
            raise PolicyError(f"tool cost {number}: {exc}") from None
    return ToolCosts(tuple(entries))


def call_cost(costs: ToolCosts | None, method: str, exposed: str, upstream: str) -> int:
    """What one routed call costs: a `tools/call` by the host's table, anything else one unit."""
    if costs is None or method != "tools/call":
        return DEFAULT_COST
    return costs.of(exposed, upstream)
