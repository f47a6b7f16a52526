"""Arguments checked against ``inputSchema``; ``structuredContent`` checked against ``outputSchema``.

**Dialect**: JSON Schema 2020-12, which the compiler emits (``prefixItems``, ``type`` arrays for ``nullable``)
and MCP clients assume without ``$schema`` (the SDK's ``validator_for`` default). ``format`` is not asserted
(2020-12 default, as in the SDK client): real specs put loose formats on fields (``int32`` on strings,
``date-time`` on epoch numbers, vendor formats), and asserting them would refuse calls the API accepts.

**Sanitising**: schemas keep only the keywords that affect validation; a keyword whose value the metaschema
forbids (``maximum: "50"``), or a ``$ref`` (unresolvable once inlined), is ignored and listed in ``ignored``
rather than crash or mislead jsonschema. The compiler already emits metaschema-valid schemas (``schemas``
coerces or drops such values); this is the defence for schemas built anywhere else.

**Null** follows ``build_request`` (absent for path/query/header/cookie arguments, missing for required
ones): ``null`` for an optional non-body argument is accepted whatever its schema (clients that send
``null`` for unused fields, like "strict" function calling, would otherwise be refused), for a required
argument it is a missing argument, for an optional body argument it is validated (it is sent).

**Speed**: jsonschema costs ~10 µs an argument, so schemas are compiled into closures deciding exactly as
jsonschema for the common keywords (``checks``); a sub-schema with any other keyword is decided by jsonschema
itself. Only rejected values go through jsonschema, for the messages; values of more than :data:`DETAIL_LIMIT`
nodes are first narrowed down along the closures. Validators are cached by the tool's identity.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

import orjson
from jsonschema.exceptions import ValidationError, best_match

from .checks import DIALECT, Accept, Node, compile_node, is_number
from .model import CompiledTool
from .outgoing import ArgumentError

#: Values with more JSON nodes than this are not given to jsonschema whole (it costs ~5-9 µs a node).
DETAIL_LIMIT = 10_000
#: Problems listed in an ArgumentError, and how many are counted at most.
MAX_LISTED, MAX_COUNTED = 10, 100
_MAX_MESSAGE = 300
_MAX_SCHEMA_DEPTH = 100  # bounds the recursion of sanitising, compiling and validating
_FAILURES = (RecursionError, ValueError, TypeError, ArithmeticError)  # NaN, huge ints, deep values...

_ONE = frozenset({"additionalProperties", "items", "not", "if", "then", "else", "contains", "propertyNames",
                  "unevaluatedItems", "unevaluatedProperties"})
_MAP = frozenset({"properties", "patternProperties", "dependentSchemas"})
_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_COUNT = ("maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties", "maxContains",
          "minContains")
_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})


def _compiles(pattern: Any) -> bool:
    try:
        re.compile(pattern)
    except (re.error, *_FAILURES):
        return False
    return True


def _names(value: Any, allowed: frozenset[str] | None = None) -> bool:
    return (isinstance(value, list) and all(isinstance(v, str) and (not allowed or v in allowed) for v in value)
            and len(set(value)) == len(value))


# What the 2020-12 metaschema requires of each keyword whose value is not a sub-schema.
_VALUE_RULES: dict[str, Accept] = {
    "type": lambda v: _names(v if isinstance(v, list) and v else [v], _TYPES), "enum": lambda v: isinstance(v, list), "const": lambda v: True, "required": _names,
    "pattern": lambda v: isinstance(v, str) and _compiles(v), "uniqueItems": lambda v: isinstance(v, bool),
    "dependentRequired": lambda v: isinstance(v, dict) and all(map(_names, v.values())),
    "multipleOf": lambda v: is_number(v) and v > 0,
    **dict.fromkeys(("maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"), is_number),
    **dict.fromkeys(_COUNT, lambda v: is_number(v) and v >= 0 and (isinstance(v, int) or v.is_integer())),
}
#: A spec's regular expressions never run on what callers or services send: Python's ``re`` can
#: backtrack for ages on crafted input (ReDoS) and has no timeout. The service checks its own input.
_REGEX_KEYWORDS = frozenset({"pattern", "patternProperties"})
_REGEX_WHY = "not enforced: a spec's regular expression could backtrack catastrophically; the service checks it"
#: Every keyword that affects 2020-12 validation, except ``format`` (not asserted) and the references.
KEPT_KEYWORDS = _ONE | _MAP | _LIST | frozenset(_VALUE_RULES)


class _Sanitizer:
    """Rebuilds schema trees with only valid :data:`KEPT_KEYWORDS`; a repeated sub-schema is rebuilt once."""

    def __init__(self) -> None:
        self.ignored: list[str] = []
        self._memo: dict[int, Any] = {}  # the source schemas outlive the sanitiser, so ids stay unique

    def clean(self, schema: Any, where: str = "", depth: int = 0) -> Any:
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, dict) or depth > _MAX_SCHEMA_DEPTH:
            self._ignore(where or "/", "not a schema or nested too deeply; any value accepted")
            return True
        if id(schema) in self._memo:
            return self._memo[id(schema)]
        self._memo[id(schema)] = True  # a cycle (impossible from the compiler) reads as "any value"
        out: dict[str, Any] = {}
        for key, value in schema.items():
            at = f"{where}/{key}"
            if key in _REGEX_KEYWORDS:
                self._ignore(at, _REGEX_WHY)
            elif key in _ONE:
                out[key] = self.clean(value, at, depth + 1)
            elif key in _MAP and isinstance(value, dict):
                out[key] = {name: self.clean(sub, f"{at}/{name}", depth + 1) for name, sub in value.items()
                            if key != "patternProperties" or _compiles(name) or self._ignore(f"{at}/{name}")}
            elif key in _LIST and isinstance(value, list) and value:
                out[key] = [self.clean(sub, f"{at}/{index}", depth + 1) for index, sub in enumerate(value)]
            elif key in _VALUE_RULES and _VALUE_RULES[key](value):
                out[key] = value
            elif key in KEPT_KEYWORDS or key in ("$ref", "$dynamicRef"):
                self._ignore(at)
        if "patternProperties" in schema:
            # Without the pattern-matched properties, these would refuse names the spec allows.
            for key in ("additionalProperties", "unevaluatedProperties"):
                if out.pop(key, None) is not None:
                    self._ignore(f"{where}/{key}", "not enforced beside patternProperties (see pattern)")
        self._memo[id(schema)] = out
        return out

    def _ignore(self, where: str, why: str = "invalid value; ignored") -> None:
        self.ignored.append(f"{where}: {why}")


def _safe(accept: Accept, value: Any) -> bool:
    """``accept(value)``, False when the check itself fails (the report then says why)."""
    try:
        return accept(value)
    except _FAILURES:
        return False


_PLAIN_KEY = re.compile(r"[A-Za-z_$][\w$-]*")


def _display(name: Any) -> str:
    return name if isinstance(name, str) and _PLAIN_KEY.fullmatch(name) else orjson.dumps(str(name)).decode()


def _path_text(path: tuple[Any, ...]) -> str:
    """``("arguments", "Filter", 0, "a b")`` → ``arguments.Filter[0]["a b"]``."""
    parts = [f"[{p}]" if isinstance(p, int) else "." + p if _display(p) == p else f"[{_display(p)}]" for p in path[1:]]
    return str(path[0]) + "".join(parts)


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


def _small(value: Any) -> bool:
    """Whether ``value`` has at most :data:`DETAIL_LIMIT` JSON nodes (iterative: safe on any nesting)."""
    stack, count = [value], 0
    while stack and count <= DETAIL_LIMIT:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return count <= DETAIL_LIMIT


def _describe(error: ValidationError, path: tuple[Any, ...]) -> str:
    message = error.message
    if error.context and (closest := best_match(error.context)) is not None:
        where = _path_text(("", *closest.absolute_path))
        message += f" (closest option failed{' at ' + where if where else ''}: {closest.message})"
    return _clip(f"{_path_text(path + tuple(error.absolute_path))}: {message}")


def report(node: Node, value: Any, path: tuple[Any, ...]) -> Iterator[str]:
    """Problems of ``value`` under ``node``, each ``<path>: <message>``; nothing when it is valid."""
    if _small(value):
        try:
            for error in DIALECT(node.schema).iter_errors(value):
                yield _describe(error, path)
        except RecursionError:
            yield f"{_path_text(path)}: nested too deeply to validate"
        except _FAILURES as exc:
            yield _clip(f"{_path_text(path)}: cannot be validated ({type(exc).__name__}: {exc})")
        return
    found = False  # too big for jsonschema: descend where the closures reject
    children: Iterator[tuple[Any, Any, Node | None]] = iter(())
    if isinstance(value, dict):
        children = ((k, v, node.properties.get(k, node.extra)) for k, v in value.items())
    elif isinstance(value, list) and node.items is not None:
        children = ((i, v, node.items) for i, v in enumerate(value))
    for key, sub, child in children:
        if child is not None and not _safe(child.accept, sub):
            found = True
            yield from report(child, sub, (*path, key))
    for part in node.parts:
        if not _safe(part.accept, value):
            found = True
            yield from report(part, value, path)
    if not found:
        yield f"{_path_text(path)}: does not match the schema (too large for a detailed report)"


def _collect(problems: Iterator[str], listed: int, counted: int) -> tuple[list[str], int, bool]:
    """The first ``listed`` problems, how many more were seen, and whether counting stopped early."""
    taken = list(islice(problems, counted + 1))
    capped, taken = len(taken) > counted, taken[:counted]
    return taken[:listed], max(0, len(taken) - listed), capped


@dataclass(frozen=True, slots=True, eq=False)
class ArgumentsValidator:
    """The compiled argument check of one tool (see the module rules). Of the root schema only
    ``properties`` and ``required`` count (the compiler emits nothing else but ``type: object``);
    unknown arguments are refused whatever ``additionalProperties`` says, as build_request cannot send them."""

    properties: Mapping[str, Node]
    required: tuple[str, ...]
    #: Arguments for which ``null`` means "not given": the non-body ones and the required ones.
    absent_if_null: frozenset[str]
    #: Schema keywords ignored because their values are invalid (``pointer: reason``).
    ignored: tuple[str, ...] = ()

    def accepts(self, arguments: Mapping[str, Any]) -> bool:
        properties, absent = self.properties, self.absent_if_null
        for name, value in arguments.items():
            node = properties.get(name)
            if node is None or not (node.accept(value) or (value is None and name in absent)):
                return False
        return all(arguments.get(name) is not None for name in self.required)

    def problems(self, arguments: Mapping[str, Any]) -> Iterator[str]:
        for name in self.required:
            if arguments.get(name) is None:
                yield f"missing required argument: {_display(name)}{' (null counts as absent)' * (name in arguments)}"
        for name in arguments:
            if name not in self.properties:
                close = difflib.get_close_matches(str(name), list(self.properties), n=1)
                yield _clip(f"unknown argument: {_display(name)}{f' (did you mean {close[0]!r}?)' if close else ''}")
        for name, value in arguments.items():
            node = self.properties.get(name)
            if node is not None and not (value is None and name in self.absent_if_null) and not _safe(node.accept, value):
                yield from report(node, value, ("arguments", name))

    @classmethod
    def make(cls, tool: CompiledTool) -> ArgumentsValidator:
        sanitizer = _Sanitizer()
        root = sanitizer.clean(tool.input_schema)
        root = root if isinstance(root, dict) else {}
        memo: dict[int, Node] = {}
        properties = {name: compile_node(sub, memo) for name, sub in root.get("properties", {}).items()}
        required = tuple(root.get("required", ()))
        absent = frozenset({b.argument for b in tool.binding.arguments if b.location != "body"} | set(required))
        return cls(properties, required, absent, tuple(sanitizer.ignored))


_ARGUMENTS: dict[int, tuple[CompiledTool, Any]] = {}
_OUTPUTS: dict[int, tuple[CompiledTool, Any]] = {}
_MAX_CACHED = 16_384


def _cached(cache: dict[int, tuple[CompiledTool, Any]], tool: CompiledTool, make: Callable[[CompiledTool], Any]) -> Any:
    """``make(tool)``, memoised by the tool's identity like ``invoke.plan_for`` (the cache keeps it alive)."""
    hit = cache.get(id(tool))
    if hit is not None and hit[0] is tool:
        return hit[1]
    value = make(tool)
    if len(cache) >= _MAX_CACHED:
        cache.clear()
    cache[id(tool)] = (tool, value)
    return value


def arguments_validator(tool: CompiledTool) -> ArgumentsValidator:
    """The cached :class:`ArgumentsValidator` of ``tool``."""
    return _cached(_ARGUMENTS, tool, ArgumentsValidator.make)


def validate_arguments(tool: CompiledTool, arguments: Any) -> None:
    """Check a call's ``arguments`` against the tool's ``inputSchema``, before any request is built.

    Raises :class:`ArgumentError` (and nothing else): ``Invalid arguments for tool 'X': <problem>`` for one
    problem; else a header line and up to :data:`MAX_LISTED` ``- <problem>`` lines, then ``… and N more
    problems`` (``at least N`` past :data:`MAX_COUNTED`). A problem is ``missing required argument: VpcId``,
    ``unknown argument: Foo`` (with a "did you mean" hint) or ``<JSON path>: <jsonschema message>``, e.g.
    ``arguments.Filters[0].Name: 5 is not of type 'string'``; each is cut at 300 characters.
    """
    if not isinstance(arguments, Mapping):
        raise ArgumentError("arguments must be an object")
    validator = arguments_validator(tool)
    if _safe(validator.accepts, arguments):
        return
    shown, more, capped = _collect(validator.problems(arguments), MAX_LISTED, MAX_COUNTED)
    if not shown:
        return  # the closures failed where jsonschema does not (a check raised): jsonschema decides
    head = f"Invalid arguments for tool {tool.name!r}"
    if len(shown) == 1:
        raise ArgumentError(f"{head}: {shown[0]}")
    lines = [f"{head}:", *(f"- {p}" for p in shown)]
    if more:
        lines.append(f"… and {'at least ' * capped}{more} more problem{'s' * (more > 1)}")
    raise ArgumentError("\n".join(lines))


@dataclass(frozen=True, slots=True, eq=False)
class OutputValidator:
    """The compiled ``outputSchema`` check of one tool; ``ignored`` as for :class:`ArgumentsValidator`."""

    node: Node
    ignored: tuple[str, ...] = ()

    @classmethod
    def make(cls, tool: CompiledTool) -> OutputValidator | None:
        sanitizer = _Sanitizer()
        return None if tool.output_schema is None else cls(
            compile_node(sanitizer.clean(tool.output_schema), {}), tuple(sanitizer.ignored))


def output_validator(tool: CompiledTool) -> OutputValidator | None:
    """The cached :class:`OutputValidator` of ``tool``; None when the tool has no output schema."""
    return _cached(_OUTPUTS, tool, OutputValidator.make)


def check_structured(tool: CompiledTool, structured: Any, *, listed: int = 3) -> str | None:
    """None when ``structured`` (a result's ``structuredContent``) conforms to the tool's ``outputSchema`` or
    the tool has none; else up to ``listed`` problems ``structuredContent.<path>: <message>`` joined by
    ``"; "``, then ``(and N more)``. Never raises.

    ``shape_result`` wraps non-object JSON as ``{"result": value}``; the compiler only gives an output schema
    to operations whose response schema is an object, so for those the wrapper is what gets checked.
    """
    validator = output_validator(tool)
    if validator is None or _safe(validator.node.accept, structured):
        return None
    shown, more, capped = _collect(report(validator.node, structured, ("structuredContent",)), listed, 20)
    if not shown:
        return None
    return "; ".join(shown) + (f" (and {'at least ' * capped}{more} more)" if more else "")
