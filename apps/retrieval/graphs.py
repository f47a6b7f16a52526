"""A tool's prerequisite chain as a graph, laid out in layers for drawing (the console's tool
page draws it as inline SVG): dependencies on the left, the tool itself on the right.

The index stores each tool's closure, not its edges (`IndexedTool.prerequisites`). The edges are
read back from the closures of the chain's members: a member needs the members its own closure
holds that come before it in the chain (the chain is in dependency order, so this cannot loop),
less those it reaches through another (a transitive reduction)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from apps.catalog.models import Backend, Tool
from apps.retrieval.chains import prerequisites_get

Key = tuple[int, str]

NODE_WIDTH = 210
NODE_HEIGHT = 34
COLUMN_GAP = 56
ROW_GAP = 14
MARGIN = 4


def prerequisite_edges(target: Hashable, chain: Sequence[Hashable],
                       closures: Mapping[Hashable, Sequence[Hashable]]) -> list[tuple[Hashable, Hashable]]:
    """(dependency, dependent) pairs of the chain of `target` (its closure, dependencies first),
    given each member's own closure: every member, and `target`, linked to what it needs directly."""
    position = {key: i for i, key in enumerate(chain)}
    needs = {key: [d for d in closures.get(key, ()) if d in position and position[d] < position[key]] for key in chain}
    needs[target] = list(chain)
    reach: dict[Hashable, set[Hashable]] = {}
    for key in chain:  # dependencies first: each member's reach is known before it is needed
        reach[key] = set(needs[key]).union(*(reach[d] for d in needs[key]))
    edges = []
    for key in [*chain, target]:
        for dependency in needs[key]:
            if not any(dependency in reach[other] for other in needs[key] if other != dependency):
                edges.append((dependency, key))
    return edges


@dataclass(frozen=True, slots=True)
class GraphNode:
    key: Key
    tool_id: int | None  # the catalog row, when the tool still has one
    backend_name: str
    name: str
    x: int
    y: int
    target: bool


@dataclass(frozen=True, slots=True)
class GraphEdge:
    path: str  # SVG path data, from the dependency's right side to the dependent's left


@dataclass(frozen=True, slots=True)
class PrerequisiteGraph:
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    width: int
    height: int


def graph_layout(target: Key, edges: Sequence[tuple[Key, Key]]) -> dict[Key, tuple[int, int]]:
    """(column, row) of every node: a node's column is one past its deepest dependency's (the
    target is rightmost); in a column, nodes are ordered by the mean row of their dependencies."""
    needs: dict[Key, list[Key]] = {}
    for dependency, dependent in edges:
        needs.setdefault(dependent, []).append(dependency)
        needs.setdefault(dependency, [])
    needs.setdefault(target, [])
    column: dict[Key, int] = {}

    def depth(key: Key, seen: frozenset[Key] = frozenset()) -> int:
        if key not in column:
            column[key] = 1 + max((depth(d, seen | {key}) for d in needs[key] if d not in seen), default=-1)
        return column[key]

    for key in needs:
        depth(key)
    column[target] = max(column.values())
    rows: dict[Key, int] = {}
    for at in range(column[target] + 1):
        members = [key for key in needs if column[key] == at]
        members.sort(key=lambda k: (sum(rows[d] for d in needs[k] if d in rows) / max(1, len(needs[k])), k))
        for row, key in enumerate(members):
            rows[key] = row
    return {key: (column[key], rows[key]) for key in needs}


def tool_prerequisite_graph(*, tool: Tool) -> PrerequisiteGraph | None:
    """The tool's stored chain as a laid-out graph; None when it has no prerequisites. Three
    queries, however long the chain."""
    target: Key = (tool.backend_id, tool.name)
    closures = prerequisites_get(tenant_id=tool.backend.tenant_id, keys=[target])
    chain = list(closures.get(target, ()))
    if not chain:
        return None
    edges = prerequisite_edges(target, chain, closures)
    places = graph_layout(target, edges)
    backends = dict(Backend.objects.filter(tenant_id=tool.backend.tenant_id, pk__in={b for b, _ in places})
                    .values_list("pk", "name"))
    ids = {(b, n): pk for pk, b, n in Tool.objects.filter(backend_id__in=backends.keys(), name__in={n for _, n in places})
           .values_list("pk", "backend_id", "name")}

    def corner(key: Key) -> tuple[int, int]:
        column, row = places[key]
        return MARGIN + column * (NODE_WIDTH + COLUMN_GAP), MARGIN + row * (NODE_HEIGHT + ROW_GAP)

    nodes = [GraphNode(key, ids.get(key), backends.get(key[0], ""), key[1], *corner(key), key == target)
             for key in sorted(places, key=lambda k: places[k])]
    lines = []
    for dependency, dependent in edges:
        (x1, y1), (x2, y2) = corner(dependency), corner(dependent)
        x1, y1, y2 = x1 + NODE_WIDTH, y1 + NODE_HEIGHT // 2, y2 + NODE_HEIGHT // 2
        middle = (x1 + x2) // 2
        lines.append(GraphEdge(f"M{x1},{y1} C{middle},{y1} {middle},{y2} {x2 - 6},{y2}"))
    columns = 1 + max(c for c, _ in places.values())
    rows = 1 + max(r for _, r in places.values())
    return PrerequisiteGraph(nodes, lines, 2 * MARGIN + columns * NODE_WIDTH + (columns - 1) * COLUMN_GAP,
                             2 * MARGIN + rows * NODE_HEIGHT + (rows - 1) * ROW_GAP)
