"""A prerequisite chain read back as a graph from the stored closures, and laid out in layers."""

from __future__ import annotations

from apps.retrieval.graphs import graph_layout, prerequisite_edges

# Attach needs an interface and an instance; the interface a subnet and a security group; both of
# those, and the instance's subnet, a VPC. Closures as the index stores them: dependencies first.
CLOSURES = {
    "Attach": ["Vpc", "Subnet", "Group", "Interface", "Run"],
    "Interface": ["Vpc", "Subnet", "Group"],
    "Run": ["Vpc", "Subnet"],
    "Subnet": ["Vpc"],
    "Group": ["Vpc"],
}


def test_edges_are_the_direct_needs_only() -> None:
    edges = prerequisite_edges("Attach", CLOSURES["Attach"], CLOSURES)
    assert sorted(edges) == sorted([
        ("Vpc", "Subnet"), ("Vpc", "Group"), ("Subnet", "Interface"), ("Group", "Interface"),
        ("Subnet", "Run"), ("Interface", "Attach"), ("Run", "Attach"),
    ])


def test_a_member_is_linked_only_to_what_comes_before_it_in_the_chain() -> None:
    # A stored cycle (each names the other) is cut where the chain's order puts it.
    closures = {"T": ["A", "B"], "A": ["B"], "B": ["A"]}
    assert prerequisite_edges("T", ["A", "B"], closures) == [("A", "B"), ("B", "T")]


def test_layers_put_dependencies_left_and_the_tool_rightmost() -> None:
    edges = prerequisite_edges("Attach", CLOSURES["Attach"], CLOSURES)
    places = graph_layout("Attach", edges)
    assert places["Vpc"][0] == 0 and {places["Subnet"][0], places["Group"][0]} == {1}
    assert places["Run"][0] == 2 and places["Interface"][0] == 2
    assert places["Attach"] == (3, 0)
    assert len({places[k] for k in places}) == len(places)  # no two nodes in one place
