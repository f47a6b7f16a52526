"""OpenAPI schema objects → self-contained JSON Schema (all ``$ref`` inlined).

MCP clients generally cannot follow ``$ref``, so every reference is inlined. Rules:

* **Recursion**: a ``$ref`` to a schema that is already being expanded on the current path is
  replaced by ``{}`` ("any value") and a warning is recorded at the referencing site. The result is
  always finite.
* **Sharing**: the expansion of a ``$ref`` is memoised and the *same* dict object reused when the
  expansion did not depend on the enclosing expansion stack; this keeps big documents (EC2: 765
  operations over ~4,000 shapes) linear. Consumers must not mutate schemas.
* **Depth**: fresh nesting deeper than ``max_schema_depth`` is cut to ``{}`` with a warning; a
  memoised expansion is only reused where it fits under that depth.
* **Dialect**: OpenAPI 3.0 ``nullable`` / Swagger ``x-nullable`` become ``type: [..., "null"]``,
  boolean ``exclusiveMinimum``/``exclusiveMaximum`` become numeric, ``type: file`` becomes a binary
  string, tuple ``items`` become ``prefixItems``; OpenAPI-only annotations (``example``,
  ``examples``, ``xml``, ``discriminator``, ``externalDocs``, ``x-*``) are dropped to keep tool
  schemas small. Literal values (``enum``, ``default``, ``const``...) are copied verbatim and never
  scanned for ``$ref``.
* **Metaschema**: MCP clients check tool schemas against the 2020-12 metaschema (the official SDK refuses
  a tool whose ``outputSchema`` fails ``check_schema``), so a keyword value of the wrong type is coerced
  when the intent is clear (``maximum: "50"`` → ``50``, ``deprecated: "true"`` → ``true``) and dropped
  otherwise (a ``pattern`` Python's ``re`` cannot compile, an empty ``enum``...), each with a warning.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

from .diagnostics import Diagnostics, join
from .refs import RefResolver

_MAP_KEYWORDS = frozenset({"properties", "patternProperties", "dependentSchemas"})
_ONE_KEYWORDS = frozenset({
    "additionalProperties", "items", "not", "contains", "propertyNames", "if", "then", "else",
    "unevaluatedItems", "unevaluatedProperties", "additionalItems",
})
_LIST_KEYWORDS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SUBSCHEMAS = _MAP_KEYWORDS | _ONE_KEYWORDS | _LIST_KEYWORDS
_DROPPED = frozenset({
    "example", "examples", "xml", "externalDocs", "discriminator", "nullable", "x-nullable", "$defs",
    "definitions", "$schema", "$id", "$anchor", "$dynamicAnchor", "$comment", "collectionFormat",
})
# Keywords meaningful next to a $ref in 2.0/3.0, where siblings are formally ignored; keeping these
# preserves the per-property documentation generators like to put there.
_ANNOTATIONS = frozenset({"description", "title", "default", "deprecated", "readOnly", "writeOnly"})
_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
_INF = 1 << 30

# Keywords whose value the 2020-12 metaschema types, by the kind of value expected (see _coerce).
_KINDS = {
    **dict.fromkeys(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"), "number"),
    "multipleOf": "positive",
    **dict.fromkeys(("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
                     "minContains", "maxContains"), "count"),
    **dict.fromkeys(("deprecated", "readOnly", "writeOnly", "uniqueItems", "nullable", "x-nullable"), "flag"),
    **dict.fromkeys(("format", "title", "description", "contentEncoding", "contentMediaType"), "text"),
    "pattern": "pattern", "required": "names", "enum": "enum", "dependentRequired": "dependencies",
}
_EXPECTED = {"number": "a number", "positive": "a number above 0", "count": "a non-negative integer",
             "flag": "a boolean", "text": "a string", "names": "an array of property names",
             "enum": "a non-empty array", "dependencies": "an object of property-name arrays"}
# The type a valid value of each kind usually has: such values need no closer look.
_USUAL = {"number": int, "count": int, "flag": bool, "text": str}
_EXCLUSIVE = {"exclusiveMinimum": "minimum", "exclusiveMaximum": "maximum"}
_NUMERIC = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_FLAGS = {"true": True, "false": False}
_DROP = object()  # _coerce's verdict for a value that cannot be kept


class SchemaBudgetExceeded(Exception):
    """More schema nodes than ``max_schema_nodes``: the document is abusive (e.g. a YAML alias bomb)."""

    def __init__(self, pointer: str) -> None:
        super().__init__(pointer)
        self.pointer = pointer


class SchemaConverter:
    """Converts schemas of one document; create one per compilation (it memoises per document)."""

    def __init__(
        self, refs: RefResolver, diag: Diagnostics, *, version: str, max_depth: int, max_nodes: int
    ) -> None:
        self._refs = refs
        self._diag = diag
        self._legacy = version in ("2.0", "3.0")
        self._max_depth = max_depth
        self._nodes_left = max_nodes
        # ref target pointer → (converted schema, height)
        self._memo: dict[str, tuple[Any, int]] = {}
        # ref target pointer → index in the expansion stack (pointers currently being expanded)
        self._active: dict[str, int] = {}

    def convert(self, schema: Any, pointer: str) -> Any:
        """JSON Schema for the OpenAPI schema found at ``pointer``; never raises for bad input
        (problems are recorded), except :class:`SchemaBudgetExceeded`."""
        return self._convert(schema, pointer, 0)[0]

    # Each internal step returns (schema, cut, height): ``cut`` is the lowest expansion-stack index
    # whose presence shaped the result (_INF when none, -1 for a depth cut), ``height`` its nesting.
    def _convert(self, node: Any, pointer: str, depth: int) -> tuple[Any, int, int]:
        if isinstance(node, bool):
            return ({} if node else {"not": {}}), _INF, 1
        if not isinstance(node, dict):
            self._diag.warning(pointer, f"schema must be an object, not {type(node).__name__}; accepting any value")
            return {}, _INF, 1
        if depth >= self._max_depth:
            self._diag.warning(pointer, f"schema nested deeper than {self._max_depth} levels; cut to {{}}")
            return {}, -1, 1
        self._nodes_left -= 1
        if self._nodes_left < 0:
            raise SchemaBudgetExceeded(pointer)
        if "$ref" in node:
            return self._convert_ref(node, pointer, depth)
        return self._convert_object(node, pointer, depth)

    def _convert_ref(self, node: dict[str, Any], pointer: str, depth: int) -> tuple[Any, int, int]:
        found = self._refs.lookup(node["$ref"], pointer)
        if found is None:
            return {}, _INF, 1
        target, value = found
        if target in self._active:
            self._diag.warning(pointer, f"recursive schema: $ref to {target} replaced by {{}} (any value)")
            base, cut, height = {}, self._active[target], 1
        else:
            memo = self._memo.get(target)
            if memo is not None and depth + memo[1] <= self._max_depth:
                base, cut, height = memo[0], _INF, memo[1]
            else:
                level = len(self._active)
                self._active[target] = level
                try:
                    base, cut, height = self._convert(value, target, depth)
                finally:
                    del self._active[target]
                if cut >= level:  # independent of anything outside this expansion
                    self._memo[target] = (base, height)
                    cut = _INF
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if not siblings:
            return base, cut, height
        nullable = self._nullable(siblings, pointer)
        if self._legacy:
            extra = {}
            for key, value in siblings.items():
                if key in _ANNOTATIONS:
                    value = self._typed(key, value, pointer) if key in _KINDS else value
                    if value is not _DROP:
                        extra[key] = value
            merged: Any = {**base, **extra} if isinstance(base, dict) and extra else base
        else:
            rest, rest_cut, rest_height = self._convert_object(siblings, pointer, depth)
            cut, height = min(cut, rest_cut), max(height, rest_height)
            if set(siblings) <= _ANNOTATIONS:
                merged = {**base, **rest}
            else:  # 3.1: a $ref with siblings is an intersection
                merged = {"allOf": [base], **rest}
                height += 1
        if nullable and merged:
            merged = {"anyOf": [merged, {"type": "null"}]}
            height += 1
        return merged, cut, height

    def _convert_object(self, node: dict[str, Any], pointer: str, depth: int) -> tuple[dict[str, Any], int, int]:
        out: dict[str, Any] = {}
        exclusive: dict[str, bool] = {}  # the 2.0/3.0 boolean exclusiveMinimum/exclusiveMaximum
        cut, height = _INF, 0
        for key, value in node.items():
            if key in _DROPPED or key.startswith("x-") or key == "$ref":
                continue
            # Leaf keywords first, without building their pointer: they are most keys, and rarely wrong.
            kind = _KINDS.get(key)
            if kind is not None:
                if type(value) is _USUAL.get(kind) and (kind != "count" or value >= 0):
                    out[key] = value
                    continue
                value = self._typed(key, value, pointer)
                if key in _EXCLUSIVE and isinstance(value, bool):
                    exclusive[key] = value
                elif value is not _DROP and (value or key != "required"):
                    out[key] = value
                continue
            if key == "type":
                self._put_type(out, value, pointer)
                continue
            if key not in _SUBSCHEMAS:
                out[key] = value
                continue
            where = join(pointer, key)
            if key in _MAP_KEYWORDS:
                if not isinstance(value, dict):
                    self._diag.warning(where, f"'{key}' must be an object; ignored")
                    continue
                converted: dict[str, Any] = {}
                for name, sub in value.items():
                    if key == "patternProperties" and (error := _regex_error(name)) is not None:
                        self._diag.warning(join(where, name), f"not a valid regular expression ({error}); ignored")
                        continue
                    converted[name], sub_cut, sub_height = self._convert(sub, join(where, name), depth + 1)
                    cut, height = min(cut, sub_cut), max(height, sub_height)
                out[key] = converted
            elif key in _ONE_KEYWORDS:
                if isinstance(value, str) and value in ("true", "false"):
                    # Seen in the wild (Spotify): additionalProperties: "true".
                    self._diag.warning(where, f"'{key}' is the string {value!r}; read as a boolean")
                    value = value == "true"
                if isinstance(value, bool) and key in ("additionalProperties", "unevaluatedProperties",
                                                       "additionalItems", "unevaluatedItems"):
                    out[key] = value
                    continue
                if key == "items" and isinstance(value, list) and value:
                    key, value = "prefixItems", value  # draft-4 tuple form
                    out[key], sub_cut, sub_height = self._convert_list(value, where, depth)
                elif isinstance(value, (dict, bool)):
                    out[key], sub_cut, sub_height = self._convert(value, where, depth + 1)
                else:
                    self._diag.warning(where, f"'{key}' must be a schema; ignored")
                    continue
                cut, height = min(cut, sub_cut), max(height, sub_height)
            else:
                if not isinstance(value, list) or not value:  # the metaschema wants at least one schema
                    self._diag.warning(where, f"'{key}' must be a non-empty array of schemas; ignored")
                    continue
                out[key], sub_cut, sub_height = self._convert_list(value, where, depth)
                cut, height = min(cut, sub_cut), max(height, sub_height)
        for key, bound in _EXCLUSIVE.items():
            if exclusive.get(key) and bound in out:
                out[key] = out.pop(bound)  # the boolean form made the bound itself exclusive
        if self._nullable(node, pointer):
            _make_nullable(out)
        return out, cut, height + 1

    def _convert_list(self, items: list[Any], pointer: str, depth: int) -> tuple[list[Any], int, int]:
        result, cut, height = [], _INF, 0
        for index, sub in enumerate(items):
            converted, sub_cut, sub_height = self._convert(sub, join(pointer, index), depth + 1)
            result.append(converted)
            cut, height = min(cut, sub_cut), max(height, sub_height)
        return result, cut, height + 1

    def _put_type(self, out: dict[str, Any], value: Any, pointer: str) -> None:
        if type(value) is str and value in _TYPES:
            out["type"] = value
            return
        if value == "file":  # Swagger 2.0 upload
            out["type"], out["format"] = "string", "binary"
            return
        names = value if isinstance(value, list) else [value]
        if names and all(isinstance(v, str) and v in _TYPES for v in names) and len(set(names)) == len(names):
            out["type"] = value
            return
        # Case slips ("String") and repeated names are unambiguous; anything else is not.
        fixed = list(dict.fromkeys(v.strip().lower() for v in names)) if all(isinstance(v, str) for v in names) else []
        if fixed and all(v in _TYPES for v in fixed):
            out["type"] = fixed if isinstance(value, list) and len(fixed) > 1 else fixed[0]
            self._diag.warning(join(pointer, "type"), f"schema type {value!r} read as {out['type']!r}")
        else:
            self._diag.warning(join(pointer, "type"), f"unknown schema type {value!r}; ignored")

    def _typed(self, key: str, value: Any, pointer: str) -> Any:
        """``value`` of the keyword ``key`` of the schema at ``pointer``, made fit for the metaschema, or _DROP."""
        fixed, problem = _coerce(key, value)
        if problem is not None:
            self._diag.warning(join(pointer, key), problem)
        return fixed

    def _nullable(self, node: dict[str, Any], pointer: str) -> bool:
        """Whether OpenAPI 3.0 ``nullable`` or Swagger ``x-nullable`` is set (a string ``"true"`` too)."""
        flags = (node.get(key) for key in ("nullable", "x-nullable"))
        if not any(flag is not None and flag is not False for flag in flags):
            return False  # the common case, without building pointers
        return any(self._typed(key, node[key], pointer) is True
                   for key in ("nullable", "x-nullable") if key in node)


def _coerce(key: str, value: Any) -> tuple[Any, str | None]:
    """``(value fit for the metaschema or _DROP, warning or None)`` for a keyword in :data:`_KINDS`.

    A wrong value is coerced only when its intent is unambiguous: a numeric string for a number, ``"true"`` /
    ``"false"`` for a boolean (``exclusiveMinimum`` too: the 3.0 form), a number for a text; else dropped."""
    kind = _KINDS[key]
    if kind in ("number", "positive", "count"):
        if isinstance(value, bool) and key in _EXCLUSIVE:
            return value, None  # the boolean form of 2.0/3.0, converted by the caller
        number, coerced = value, isinstance(value, str)
        if coerced:
            text = value.strip()
            if key in _EXCLUSIVE and text.lower() in _FLAGS:
                return _FLAGS[text.lower()], f"'{key}' is the string {value!r}; read as a boolean"
            number = _parse_number(text)
            if kind == "count" and isinstance(number, float) and number.is_integer():
                number = int(number)
        if isinstance(number, (int, float)) and not isinstance(number, bool) and math.isfinite(number) and (
                kind == "number" or (kind == "positive" and number > 0)
                or (kind == "count" and number >= 0 and (isinstance(number, int) or number.is_integer()))):
            return number, f"'{key}' is {_show(value)}; read as {number!r}" if coerced else None
    elif kind == "flag":
        if isinstance(value, bool):
            return value, None
        if isinstance(value, str) and value.strip().lower() in _FLAGS:
            return _FLAGS[value.strip().lower()], f"'{key}' is the string {value!r}; read as a boolean"
    elif kind == "text":
        if isinstance(value, str):
            return value, None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value), f"'{key}' is the number {value!r}; read as a string"
    elif kind == "pattern":
        if isinstance(value, str):
            error = _regex_error(value)
            if error is None:
                return value, None
            return _DROP, f"'pattern' {_show(value)} is not a valid regular expression ({error}); ignored"
        return _DROP, f"'pattern' must be a string, not {_show(value)}; ignored"
    elif kind == "names":
        if _is_names(value):
            unique = list(dict.fromkeys(value))
            return (value, None) if len(unique) == len(value) else (unique, f"'{key}' lists a name twice; read once")
    elif kind == "enum":
        if isinstance(value, list) and value:
            return value, None  # members are literal values: anything goes
        if isinstance(value, list):  # nothing would be valid: a generator's slip, not a constraint
            return _DROP, "'enum' is empty; ignored"
    elif isinstance(value, dict) and all(_is_names(v) and len(set(v)) == len(v) for v in value.values()):
        return value, None  # dependentRequired
    return _DROP, f"'{key}' must be {_EXPECTED[kind]}, not {_show(value)}; ignored"


def _parse_number(text: str) -> int | float | None:
    """The JSON number ``text`` spells, or None (also for digits beyond what ``int()`` will read)."""
    if not _NUMERIC.fullmatch(text):
        return None
    try:
        return float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        return None


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _show(value: Any) -> str:
    text = f"the string {value!r}" if isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


@lru_cache(maxsize=16_384)  # AWS documents repeat patterns across shapes and services (4,063 distinct in all)
def _regex_error(pattern: str) -> str | None:
    """Why Python's ``re`` (what jsonschema checks ``format: regex`` and ``pattern`` with) refuses
    ``pattern``, or None. ECMA-only syntax such as ``\\p{L}`` is refused too."""
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    except (RecursionError, OverflowError, ValueError) as exc:
        return type(exc).__name__
    return None


def _make_nullable(schema: dict[str, Any]) -> None:
    kind = schema.get("type")
    if isinstance(kind, str) and kind != "null":
        schema["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        schema["type"] = [*kind, "null"]
    if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
        schema["enum"] = [*schema["enum"], None]


def is_object_schema(schema: Any) -> bool:
    """True for a plain object schema whose properties can be used one by one (no composition)."""
    if not isinstance(schema, dict) or schema.get("type", "object" if "properties" in schema else None) != "object":
        return False
    return not any(k in schema for k in ("allOf", "anyOf", "oneOf", "not", "if"))
