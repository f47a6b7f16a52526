"""Schemas compiled into closures that decide exactly as jsonschema (draft 2020-12) for the common keywords.

jsonschema costs ~10 µs an argument, so :func:`compile_node` turns a *sanitised* schema (see ``validation``)
into a :class:`Node` whose ``accept`` is a plain closure; a sub-schema with any keyword outside :data:`_FAST`
is decided by jsonschema itself. The nodes keep their children so a rejected value can be narrowed down
without giving jsonschema the whole of it.
"""

from __future__ import annotations

import numbers
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

DIALECT = Draft202012Validator

Accept = Callable[[Any], bool]


def is_number(v: Any) -> bool:  # jsonschema's "number"
    return type(v) in (int, float) or (isinstance(v, numbers.Number) and not isinstance(v, bool))


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    """A sanitised schema with an exact acceptance test; the children let a failure be located cheaply."""

    schema: Any
    accept: Accept
    properties: Mapping[str, Node] = field(default_factory=dict)
    extra: Node | None = None  # additionalProperties, when not "any value"
    items: Node | None = None
    parts: tuple[Node, ...] = ()  # allOf


ANY = Node(True, lambda v: True)
_true = ANY.accept
_FAST = frozenset({"type", "enum", "properties", "required", "additionalProperties", "minProperties",
                   "maxProperties", "items", "minItems", "maxItems", "minLength", "maxLength", "pattern",
                   "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "allOf", "anyOf", "uniqueItems"})
_INF = float("inf")


# Mirrors jsonschema's draft 2020-12 type checker exactly (1.0 is an integer, True is not a number).
_TYPE_TESTS: dict[str, Accept] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": is_number,
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}
# The failing comparison of each numeric bound, as jsonschema writes it (so NaN passes, as it does there).
_BOUNDS = {"minimum": operator.lt, "maximum": operator.gt, "exclusiveMinimum": operator.le,
           "exclusiveMaximum": operator.ge}


def _all(checks: list[Accept]) -> Accept:
    if len(checks) == 1:
        return checks[0]

    def accept(v: Any) -> bool:
        for check in checks:
            if not check(v):
                return False
        return True
    return accept


def compile_node(schema: Any, memo: dict[int, Node]) -> Node:
    """The :class:`Node` of a *sanitised* schema; ``memo`` shares the nodes of shared sub-schemas."""
    if schema is True or schema == {}:
        return ANY
    if schema is False:
        return Node(False, lambda v: False)
    if id(schema) in memo:
        return memo[id(schema)]
    enum = schema.get("enum")
    if not set(schema) <= _FAST or schema.get("uniqueItems") is True or (
            enum is not None and not all(e is None or isinstance(e, str) for e in enum)):
        memo[id(schema)] = node = Node(schema, DIALECT(schema).is_valid)  # jsonschema itself decides
        return node
    checks: list[Accept] = []
    if "type" in schema:
        tests = [_TYPE_TESTS[t] for t in ([schema["type"]] if isinstance(schema["type"], str) else schema["type"])]
        checks.append(tests[0] if len(tests) == 1 else lambda v: any(t(v) for t in tests))
    if enum is not None:  # jsonschema's equal(): a string matches by ==, None only matches None
        strings, has_none = frozenset(e for e in enum if isinstance(e, str)), None in enum
        checks.append(lambda v: v in strings if isinstance(v, str) else (v is None and has_none))
    props = {name: compile_node(sub, memo) for name, sub in schema.get("properties", {}).items()}
    extra = compile_node(schema.get("additionalProperties", True), memo)
    extra = None if extra is ANY else extra
    if props or extra or {"required", "minProperties", "maxProperties"} & set(schema):
        checks.append(_object_check(schema, props, extra))
    items = compile_node(schema["items"], memo) if "items" in schema else None
    if items is not None or {"minItems", "maxItems"} & set(schema):
        low, high, each = schema.get("minItems", 0), schema.get("maxItems", _INF), items and items.accept
        checks.append(lambda v: not isinstance(v, list) or (
            low <= len(v) <= high and (each is None or each is _true or all(map(each, v)))))
    if {"minLength", "maxLength", "pattern"} & set(schema):
        shortest, longest = schema.get("minLength", 0), schema.get("maxLength", _INF)
        search = re.compile(schema["pattern"]).search if "pattern" in schema else None  # jsonschema: re.search
        checks.append(lambda v: not isinstance(v, str) or (
            shortest <= len(v) <= longest and (search is None or search(v) is not None)))
    bounds = [(fails, schema[key]) for key, fails in _BOUNDS.items() if key in schema]
    if bounds:
        checks.append(lambda v: not is_number(v) or not any(fails(v, bound) for fails, bound in bounds))
    parts = tuple(compile_node(sub, memo) for sub in schema.get("allOf", ()))
    if parts:
        checks.append(_all([p.accept for p in parts]))
    if "anyOf" in schema:
        options = [compile_node(sub, memo).accept for sub in schema["anyOf"]]
        checks.append(lambda v: any(option(v) for option in options))
    memo[id(schema)] = node = Node(schema, _all(checks) if checks else _true, props, extra, items, parts)
    return node


def _object_check(schema: dict[str, Any], props: dict[str, Node], extra: Node | None) -> Accept:
    required = tuple(schema.get("required", ()))
    low, high = schema.get("minProperties", 0), schema.get("maxProperties", _INF)
    subs = {name: node.accept for name, node in props.items()}
    rest = extra.accept if extra is not None else None

    def accept(v: Any) -> bool:
        if not isinstance(v, dict):
            return True
        if not low <= len(v) <= high or any(name not in v for name in required):
            return False
        for name, value in v.items():
            sub = subs.get(name, rest)
            if sub is not None and not sub(value):
                return False
        return True
    return accept
