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
"""

from __future__ import annotations

from typing import Any

from .diagnostics import Diagnostics, join
from .refs import RefResolver

_MAP_KEYWORDS = frozenset({"properties", "patternProperties", "dependentSchemas"})
_ONE_KEYWORDS = frozenset({
    "additionalProperties", "items", "not", "contains", "propertyNames", "if", "then", "else",
    "unevaluatedItems", "unevaluatedProperties", "additionalItems",
})
_LIST_KEYWORDS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_DROPPED = frozenset({
    "example", "examples", "xml", "externalDocs", "discriminator", "nullable", "x-nullable", "$defs",
    "definitions", "$schema", "$id", "$anchor", "$dynamicAnchor", "$comment", "collectionFormat",
})
# Keywords meaningful next to a $ref in 2.0/3.0, where siblings are formally ignored; keeping these
# preserves the per-property documentation generators like to put there.
_ANNOTATIONS = frozenset({"description", "title", "default", "deprecated", "readOnly", "writeOnly"})
_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
_INF = 1 << 30


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
        nullable = siblings.get("nullable") is True or siblings.get("x-nullable") is True
        if self._legacy:
            extra = {k: v for k, v in siblings.items() if k in _ANNOTATIONS}
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
        cut, height = _INF, 0
        for key, value in node.items():
            if key in _DROPPED or key.startswith("x-") or key == "$ref":
                continue
            where = join(pointer, key)
            if key in _MAP_KEYWORDS:
                if not isinstance(value, dict):
                    self._diag.warning(where, f"'{key}' must be an object; ignored")
                    continue
                converted: dict[str, Any] = {}
                for name, sub in value.items():
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
                if key == "items" and isinstance(value, list):
                    key, value = "prefixItems", value  # draft-4 tuple form
                    out[key], sub_cut, sub_height = self._convert_list(value, where, depth)
                elif isinstance(value, (dict, bool)):
                    out[key], sub_cut, sub_height = self._convert(value, where, depth + 1)
                else:
                    self._diag.warning(where, f"'{key}' must be a schema; ignored")
                    continue
                cut, height = min(cut, sub_cut), max(height, sub_height)
            elif key in _LIST_KEYWORDS:
                if not isinstance(value, list):
                    self._diag.warning(where, f"'{key}' must be an array of schemas; ignored")
                    continue
                out[key], sub_cut, sub_height = self._convert_list(value, where, depth)
                cut, height = min(cut, sub_cut), max(height, sub_height)
            elif key == "type":
                self._put_type(out, value, where)
            elif key == "required":
                if isinstance(value, list) and all(isinstance(v, str) for v in value):
                    if value:
                        out[key] = value
                else:
                    self._diag.warning(where, "'required' must be an array of property names; ignored")
            elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
                bound = "minimum" if key == "exclusiveMinimum" else "maximum"
                if value and isinstance(node.get(bound), (int, float)):
                    out[key] = node[bound]
            else:
                out[key] = value
        for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if node.get(key) is True and bound in out:
                del out[bound]  # now expressed by the numeric exclusive bound
        if node.get("nullable") is True or node.get("x-nullable") is True:
            _make_nullable(out)
        return out, cut, height + 1

    def _convert_list(self, items: list[Any], pointer: str, depth: int) -> tuple[list[Any], int, int]:
        result, cut, height = [], _INF, 0
        for index, sub in enumerate(items):
            converted, sub_cut, sub_height = self._convert(sub, join(pointer, index), depth + 1)
            result.append(converted)
            cut, height = min(cut, sub_cut), max(height, sub_height)
        return result, cut, height + 1

    def _put_type(self, out: dict[str, Any], value: Any, where: str) -> None:
        if value == "file":  # Swagger 2.0 upload
            out["type"], out["format"] = "string", "binary"
        elif isinstance(value, str) and value in _TYPES:
            out["type"] = value
        elif isinstance(value, list) and value and all(isinstance(v, str) and v in _TYPES for v in value):
            out["type"] = value
        else:
            self._diag.warning(where, f"unknown schema type {value!r}; ignored")


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
