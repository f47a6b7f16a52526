"""What a `tool_search` answer holds, and how it is fit into its byte budget ([docs](../../../docs/tool-search.md),
"Calling it").

An answer is `{"tools": [...], "prerequisites": [...]}`:

- `tools`: the hits, best first, as `tools/list` shows them on the host (exposed names), then the
  prerequisites the caller asked to `expand`, as listed too. Each carries `_meta["gateway/prerequisites"]`
  (its chain, dependencies first) and, when known and visible, `_meta["gateway/lookups"]` (each required
  id parameter -> the read-only tool that finds an existing one).
- `prerequisites`: the other tools the hits need first, in dependency order, in brief: name, one-line
  description, `_meta["gateway/produces"]` (tool -> the parameters of it this tool makes) and
  `gateway/prerequisiteOf` (the hits that need it). One asked for in `expand` is in `tools` instead.

The whole `CallToolResult` (both copies: `structuredContent` and its serialized text block) is fit into
`ANSWER_BUDGET` bytes by shortening the hits along `_LADDER`: each step is applied to every hit not
expanded, lowest-ranked first, until the answer fits, so the best hits keep the most. Every step only
relaxes a schema (a call the full schema accepts is still accepted) and keeps what a call needs: names,
`required` members with their types, enums and required structure. A shortened hit says so
(`_meta["gateway/shortened"]`). Expanded tools are never shortened: an answer that holds them, or whose
hits' required structure alone is larger, may exceed the budget. Shortening is the costly part of
building an answer; a `Shortened` kept across calls does each tool's steps once. Pure: no I/O,
deterministic (a `Shortened` changes how fast, never what)."""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from apps.gateway.protocol import jsonrpc
from apps.kernel.search_tool import Found

Key = tuple[int, str]

#: The most bytes a whole `tool_search` result should take (both copies of the answer).
ANSWER_BUDGET = 32 * 1024
#: A prerequisite's one-line description, in characters.
PREREQUISITE_LINE = 120

PREREQUISITES = "gateway/prerequisites"
PREREQUISITE_OF = "gateway/prerequisiteOf"
LOOKUPS = "gateway/lookups"
PRODUCES = "gateway/produces"
SHORTENED = "gateway/shortened"


class ExpandUnknown(ValueError):
    """`expand` names tools the answer does not hold; the message says which, for the caller."""


class Shortened:
    """Listed tools as each step of the ladder leaves them, for the most recently shortened
    `size` (tool, step) pairs. Keyed by the listed object's identity: an entry holds the object, so
    its id is not reused while the entry lives, and a new list (new objects) never meets an old
    entry."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[int, int], tuple[Mapping[str, Any], dict[str, Any]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, item: Mapping[str, Any], step: int) -> dict[str, Any]:
        """`item` shortened to `_LADDER[step]`."""
        key = (id(item), step)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is item:
            self._entries.move_to_end(key)
            return entry[1]
        shortened = _shorten(item, _LADDER[step])
        self._entries[key] = (item, shortened)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return shortened


@dataclass(frozen=True, slots=True)
class _Cut:
    """One step of the ladder: what is kept of a tool's `tools/list` object. Depths count object
    members from the input schema's root (its properties are at depth 1; array items keep their
    array's depth). None: no limit."""

    summary: int | None  # the tool's description: its leading sentences within this many characters
    notes: int | None  # a schema's descriptions: likewise
    notes_depth: int  # descriptions are kept on members down to this depth
    bare_from: int | None  # optional members from this depth are their type alone
    gone_from: int | None  # optional members from this depth are left out

    @property
    def structural(self) -> bool:
        return self.bare_from is not None or self.gone_from is not None

    @property
    def touches_schema(self) -> bool:
        return self.notes is not None or self.notes_depth < _DEEP or self.structural


_DEEP = 1 << 30
#: Applied in order. Every step drops `outputSchema` and `icons` (a caller needs neither to call).
_LADDER = (
    _Cut(summary=None, notes=None, notes_depth=_DEEP, bare_from=None, gone_from=None),
    _Cut(summary=400, notes=200, notes_depth=_DEEP, bare_from=None, gone_from=None),
    _Cut(summary=240, notes=120, notes_depth=1, bare_from=2, gone_from=None),
    _Cut(summary=200, notes=80, notes_depth=1, bare_from=1, gone_from=None),
    _Cut(summary=160, notes=None, notes_depth=0, bare_from=1, gone_from=1),
)

# Where a JSON Schema (2020-12, and draft 4-7's spellings) holds sub-schemas.
_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")
_SCHEMA_ONE = ("items", "additionalItems", "additionalProperties", "contains", "propertyNames", "not", "if",
               "then", "else", "unevaluatedItems", "unevaluatedProperties")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_ANNOTATIONS = ("title", "examples", "$comment")  # read by no validator; dropped once a schema is cut
# Dropped once members are cut: dropping them only relaxes a schema, where cutting inside them might
# not (`not`); definitions are read in place instead.
_STRUCTURAL_DROPS = ("not", "if", "then", "else", "$defs", "definitions")
_MAX_NODES = 20_000  # a schema expanded past this (references reused many times) is cut to `{}`
_MAX_DEPTH = 64
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


def answer_build(
    found: Found,
    shown: Mapping[Key, Mapping[str, Any]],
    *,
    expand: Collection[str] = (),
    budget: int = ANSWER_BUDGET,
    shortened: Shortened | None = None,
) -> dict[str, Any]:
    """The answer (`structuredContent`) for what the index found, among the tools the caller is
    shown (`shown`: (backend id, upstream name) -> the listed object, under its exposed name).
    Tools the caller cannot see are never named. Raises ExpandUnknown when `expand` names a tool
    that is neither a hit nor a prerequisite of this answer. `shortened`: what earlier answers
    shortened, kept by the caller (a fresh one otherwise)."""
    hits = [key for key in found.hits if key in shown]

    def chain(key: Key) -> list[Key]:
        return [dependency for dependency in found.prerequisites.get(key, ()) if dependency in shown]

    def name(key: Key) -> str:
        return str(shown[key]["name"])

    needed_by: dict[Key, list[Key]] = {}  # in the order first needed
    for hit in hits:
        for dependency in chain(hit):
            if dependency not in hits:
                needed_by.setdefault(dependency, []).append(hit)
    present = [*hits, *needed_by]
    wanted = set(expand)
    unknown = sorted(wanted - {name(key) for key in present})
    if unknown:
        raise ExpandUnknown(
            f"'expand' names tools this answer does not hold: {', '.join(unknown)}. Name found tools or "
            "their prerequisites as the answer shows them, with the same query, k and also.")

    def lookups(key: Key) -> dict[str, str]:
        return {need.parameter: name(need.lookup) for need in found.needs.get(key, ())
                if need.lookup is not None and need.lookup in shown}

    produces: dict[Key, dict[str, list[str]]] = {}
    for dependent in present:
        for need in found.needs.get(dependent, ()):
            if need.producer in needed_by and need.producer != dependent:
                made = produces.setdefault(need.producer, {}).setdefault(name(dependent), [])
                if need.parameter not in made:
                    made.append(need.parameter)

    def extra(key: Key, **meta: Any) -> dict[str, Any]:
        found_lookups = lookups(key)
        return {PREREQUISITES: [name(d) for d in chain(key)], **meta, **({LOOKUPS: found_lookups} if found_lookups else {})}

    def listed(key: Key, **meta: Any) -> dict[str, Any]:
        return _with_meta(shown[key], extra(key, **meta))

    def of(key: Key) -> dict[str, Any]:
        return {PREREQUISITE_OF: [name(h) for h in needed_by[key]], PRODUCES: produces.get(key, {})}

    expanded = [listed(key, **of(key)) for key in needed_by if name(key) in wanted]
    # In brief, without their own chains: each one's chain is among the entries before it.
    compact = [{"name": name(key), "description": _sentences(str(shown[key].get("description") or ""), PREREQUISITE_LINE),
                "_meta": of(key)} for key in needed_by if name(key) not in wanted]
    hit_tools = [_Hit(shown[hit], extra(hit), name(hit) in wanted) for hit in hits]
    return _fit(hit_tools, expanded, compact, budget, shortened if shortened is not None else Shortened(len(hits) * len(_LADDER)))


def answer_result(answer: Mapping[str, Any]) -> dict[str, Any]:
    """The `CallToolResult` of an answer: `structuredContent`, and the same JSON as one text block
    (as MCP asks of a tool returning structured content, for clients that read text only), each
    encoded once."""
    return _result(jsonrpc.dumps(answer))


def answer_bytes(result: Mapping[str, Any]) -> int:
    """The size of a `tool_search` result (a `CallToolResult`) as it is sent: its JSON encoding."""
    return len(jsonrpc.dumps(result))


def _result(structured: bytes) -> dict[str, Any]:
    content = jsonrpc.dumps([{"type": "text", "text": structured.decode()}])
    return {"content": jsonrpc.encoded(content), "structuredContent": jsonrpc.encoded(structured)}


_WRAPPER = answer_bytes(_result(b"")) - len(jsonrpc.dumps(""))


def _cost(part: bytes) -> int:
    """What `part` of the answer adds to the result: itself, and itself escaped in the text block
    (escaping goes character by character, so the costs of parts add up)."""
    return len(part) + len(jsonrpc.dumps(part.decode())) - 2


@dataclass(frozen=True, slots=True)
class _Hit:
    item: Mapping[str, Any]  # as listed
    meta: dict[str, Any]  # what this answer adds to its `_meta`
    fixed: bool  # expanded: never shortened


def _with_meta(item: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    return {**item, "_meta": {**(item.get("_meta") or {}), **meta}}


def _fit(hits: list[_Hit], expanded: list[dict[str, Any]], compact: list[dict[str, Any]], budget: int,
         shortened: Shortened) -> dict[str, Any]:
    """The answer with the hits shortened along the ladder until the result fits `budget`. A hit's
    `_meta` is added after shortening its listed object: shortening never touches `_meta` but to
    mark it, so the shortened forms do not depend on the answer and are kept in `shortened`."""
    tools = [_with_meta(hit.item, hit.meta) for hit in hits]
    glue = b'{"tools":[' + b"," * max(0, len(tools) + len(expanded) - 1) + b'],"prerequisites":' \
        + jsonrpc.dumps(compact) + b"}"
    costs = [_cost(jsonrpc.dumps(tool)) for tool in tools]
    size = _WRAPPER + _cost(glue) + sum(costs) + sum(_cost(jsonrpc.dumps(tool)) for tool in expanded)
    for step in range(len(_LADDER)):
        for at in reversed(range(len(tools))):
            if size <= budget:
                return {"tools": [*tools, *expanded], "prerequisites": compact}
            if not hits[at].fixed:
                tools[at] = _with_meta(shortened.get(hits[at].item, step), hits[at].meta)
                cost = _cost(jsonrpc.dumps(tools[at]))
                size += cost - costs[at]
                costs[at] = cost
    return {"tools": [*tools, *expanded], "prerequisites": compact}


def _shorten(tool: Mapping[str, Any], cut: _Cut) -> dict[str, Any]:
    """A tool's listed object cut down to `cut`, marked as shortened when anything was left out."""
    kept = {key: value for key, value in tool.items() if key not in ("outputSchema", "icons")}
    description = kept.get("description")
    if isinstance(description, str) and cut.summary is not None:
        kept["description"] = _sentences(description, cut.summary)
    schema = kept.get("inputSchema")
    if isinstance(schema, dict) and cut.touches_schema:
        kept["inputSchema"] = _Slimmer(cut, schema).root()
    annotations = kept.get("annotations")
    if isinstance(annotations, dict) and cut.summary is not None and "title" in annotations:
        # Compiled tools repeat their description's first sentence as the title.
        rest = {k: v for k, v in annotations.items() if k != "title"}
        if rest:
            kept["annotations"] = rest
        else:
            del kept["annotations"]
    if kept != tool:
        kept["_meta"] = {**(tool.get("_meta") or {}), SHORTENED: True}
    return kept


class _Slimmer:
    """One input schema cut down to a ladder step. At the structural steps local references are
    read in place (the definitions are left out); any other reference, a cycle, or a schema past
    `_MAX_DEPTH` or `_MAX_NODES` becomes `{}`, which accepts anything the original did."""

    def __init__(self, cut: _Cut, schema: dict[str, Any]) -> None:
        self._cut = cut
        self._document = schema
        self._nodes = 0

    def root(self) -> Any:
        return self._node(self._document, 0, ())

    def _node(self, node: Any, depth: int, refs: tuple[str, ...]) -> Any:
        if not isinstance(node, dict):
            return node  # true / false
        self._nodes += 1
        if self._nodes > _MAX_NODES or len(refs) + depth > _MAX_DEPTH:
            return {}
        cut = self._cut
        if cut.structural and "$ref" in node:
            reference = node["$ref"]
            target = self._resolve(reference) if isinstance(reference, str) and reference not in refs else None
            if target is None:
                return {}
            rest = {k: v for k, v in node.items() if k != "$ref"}
            if not rest:
                return self._node(target, depth, (*refs, reference))
            node = {**rest, "allOf": [*rest.get("allOf", ()), target]} if isinstance(rest.get("allOf", []), list) else rest
            refs = (*refs, reference)
        out: dict[str, Any] = {}
        required = node.get("required") if isinstance(node.get("required"), list) else []
        left_out = False
        for keyword, value in node.items():
            if keyword in _ANNOTATIONS or (cut.structural and keyword in _STRUCTURAL_DROPS):
                continue
            if keyword == "description":
                if isinstance(value, str) and depth <= cut.notes_depth:
                    out[keyword] = _sentences(value, cut.notes) if cut.notes is not None else value
                continue
            if keyword == "properties" and isinstance(value, dict):
                members: dict[str, Any] = {}
                for member, sub in value.items():
                    optional = member not in required
                    if optional and cut.gone_from is not None and depth + 1 >= cut.gone_from:
                        left_out = True
                    elif optional and cut.bare_from is not None and depth + 1 >= cut.bare_from:
                        members[member] = _bare(sub)
                    else:
                        members[member] = self._node(sub, depth + 1, refs)
                out[keyword] = members
            elif keyword in _SCHEMA_MAPS and isinstance(value, dict):
                out[keyword] = {member: self._node(sub, depth + 1, refs) for member, sub in value.items()}
            elif keyword in _SCHEMA_ONE and isinstance(value, dict | bool):
                out[keyword] = self._node(value, depth, refs)
            elif (keyword in _SCHEMA_LISTS or keyword == "items") and isinstance(value, list):
                # One of several slimmed branches may now match where one alone did: anyOf.
                spelled = "anyOf" if keyword == "oneOf" and cut.structural else keyword
                out[spelled] = [*out.get(spelled, ()), *(self._node(sub, depth, refs) for sub in value)]
            else:
                out[keyword] = value
        if left_out:
            # What they applied to changed: members left out would now fall under them.
            for keyword in ("additionalProperties", "unevaluatedProperties"):
                out.pop(keyword, None)
        return out

    def _resolve(self, reference: str) -> Any:
        if not reference.startswith("#"):
            return None
        target: Any = self._document
        for token in filter(None, reference[1:].split("/")):
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and token in target:
                target = target[token]
            elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                return None
        return target


def _bare(schema: Any) -> Any:
    """An optional member as its type alone (anything, when the schema names none)."""
    if not isinstance(schema, dict):
        return schema
    return {"type": schema["type"]} if "type" in schema else {}


def _sentences(text: str, limit: int) -> str:
    """The leading sentences of `text` (whitespace folded) that fit in `limit` characters; the first
    alone, cut at a word and ended with "…", when it does not fit."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    kept = ""
    for sentence in _SENTENCE_END.split(text):
        joined = f"{kept} {sentence}" if kept else sentence
        if len(joined) > limit:
            break
        kept = joined
    if kept:
        return kept
    head = text[: limit - 1]
    return (head.rsplit(" ", 1)[0] if " " in head else head) + "…"
