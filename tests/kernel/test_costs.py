"""Tool costs (pure): the first entry naming a tool decides, by its exposed or its upstream name, the
way access rules match; a tool no entry names, and every `resources/read` / `prompts/get`, costs 1."""

from __future__ import annotations

import pytest

from apps.kernel.costs import DEFAULT_COST, ToolCostSpec, call_cost, tool_costs_check, tool_costs_compile
from apps.kernel.policy import PolicyError

COSTS = tool_costs_compile(
    [
        ToolCostSpec(["get-sum"], 7),  # an exposed name (an alias)
        ToolCostSpec(["calc-*"], 5),
        ToolCostSpec(["sum", "echo"], 3),  # upstream names; never reached for get-sum / calc-sum
        ToolCostSpec(["free-*"], 0),
    ]
)


@pytest.mark.parametrize(
    ("exposed", "upstream", "cost"),
    [
        ("get-sum", "sum", 7),  # the first entry wins, though a later one names the upstream name
        ("calc-sum", "sum", 5),
        ("other-sum", "sum", 3),  # matched by its upstream name
        ("echo", "echo", 3),
        ("free-ping", "ping", 0),
        ("unlisted", "unlisted", DEFAULT_COST),
    ],
)
def test_the_first_entry_naming_the_tool_decides(exposed: str, upstream: str, cost: int) -> None:
    assert call_cost(COSTS, "tools/call", exposed, upstream) == cost


def test_reads_and_prompts_cost_one_unit_whatever_their_name() -> None:
    assert call_cost(COSTS, "resources/read", "calc-x", "calc-x") == 1
    assert call_cost(COSTS, "prompts/get", "get-sum", "sum") == 1
    assert call_cost(None, "tools/call", "get-sum", "sum") == 1  # a host without tool costs


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ([ToolCostSpec([], 1)], "tool cost 1: tools must be a list of 1-200 tool names or globs"),
        ([ToolCostSpec(["a"], 1), ToolCostSpec([""], 1)], "tool cost 2: tools must be a list of 1-200 tool names or globs; item 1 is empty"),
        ([ToolCostSpec(["a"], -1)], "tool cost 1: cost must be a whole number from 0"),
        ([ToolCostSpec(["a"], True)], "tool cost 1: cost must be a whole number from 0"),
        ([ToolCostSpec(["a"], 2**31)], "tool cost 1: cost must be a whole number from 0"),
    ],
)
def test_bad_entries_are_refused_naming_them(specs: list[ToolCostSpec], message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        tool_costs_check(specs)


def test_entries_past_the_limits_for_writing_are_refused_written_but_compiled_stored() -> None:
    # A limit added later must not break costs stored before it: they still compile for serving.
    for spec in (ToolCostSpec(["t" * 129], 0), ToolCostSpec([f"t{i}" for i in range(201)], 0), ToolCostSpec(["a b"], 0)):
        with pytest.raises(PolicyError):
            tool_costs_check([spec])
        assert call_cost(tool_costs_compile([spec]), "tools/call", spec.tools[0], spec.tools[0]) in (0, 1)
    assert call_cost(tool_costs_compile([ToolCostSpec(["t" * 129], 0)]), "tools/call", "t" * 129, "x") == 0
