"""The static check of an access rule's CEL condition, for a rule being written (`policy.policy_check`).

The pinned CEL library (`common-expression-language`, on cel-rust) compiles and runs an expression
but has no type checker and shows no syntax tree: it takes `frobnicate(arguments)` or
`arguments.MaxResults + 1` and fails only when a call is decided, which then denies it. So a
condition the library has accepted is parsed again here and its type inferred over what a condition
sees (`policy.py`): `principal`, a map with known fields (`tenant`, `team`, `key`, `subject`:
strings; `scopes`: a list of strings), and `arguments`, a map of string keys whose values only the
call knows (CEL's `dyn`).

A type here is the set of kinds a value may have when the condition runs: `arguments.a` may be
anything, `arguments.a + 1` only an int (CEL adds an int to nothing but an int), `size(x)` is an
int. The check refuses what is certainly wrong, whatever the arguments:

- a condition whose value can never be a bool (`arguments.a + 1`, `"yes"`, `[1]`, `arguments`);
- an operand of `!`, `&&` or `||`, the test of `? :`, or a macro's predicate that can never be a bool;
- an operator without an overload for its operands' kinds (`"a" - 1`, `x in "abc"`);
- a function, method or macro the library does not have (`frobnicate(x)`, `s.lowerAscii()`), one
  called the wrong way or with the wrong number of arguments, or a method of a value that can never
  have it (`principal.scopes.startsWith("a")`);
- a variable other than `arguments`, `principal`, the type names and those a macro binds; a field
  `principal` does not have.

What only the arguments decide is accepted (`arguments.flag` alone, `arguments.a > 1`): when a call
gives such a condition a value that is not a bool, the condition counts as one that cannot be
evaluated (`policy.Condition.holds`). The operator and function tables are the library's own
(tests/kernel/test_conditions.py checks them against it)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

BOOL, INT, UINT, DOUBLE, STRING, BYTES = "bool", "int", "uint", "double", "string", "bytes"
NULL, LIST, MAP, TYPE, TIMESTAMP, DURATION, OPTIONAL = "null", "list", "map", "type", "timestamp", "duration", "optional"
KINDS = frozenset({BOOL, INT, UINT, DOUBLE, STRING, BYTES, NULL, LIST, MAP, TYPE, TIMESTAMP, DURATION, OPTIONAL})
_NUMBERS = frozenset({INT, UINT, DOUBLE})


@dataclass(frozen=True, slots=True)
class CelType:
    """The kinds a value may have; a map's known `fields` (None: any key); what a list holds or a
    map's keys are (`items`, None: not known)."""

    kinds: frozenset[str]
    fields: Mapping[str, CelType] | None = None
    items: CelType | None = None

    def can_be(self, *kinds: str) -> bool:
        return not self.kinds.isdisjoint(kinds)


def _of(*kinds: str) -> CelType:
    return CelType(frozenset(kinds))


DYN = CelType(KINDS)
_STRING = _of(STRING)
PRINCIPAL = CelType(frozenset({MAP}), fields={
    "tenant": _STRING, "team": _STRING, "key": _STRING, "subject": _STRING,
    "scopes": CelType(frozenset({LIST}), items=_STRING),
}, items=_STRING)
ARGUMENTS = CelType(frozenset({MAP}), items=_STRING)
VARIABLES: Mapping[str, CelType] = {"arguments": ARGUMENTS, "principal": PRINCIPAL}
_TYPE_NAMES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"})

# (left kind, right kind) -> result kind, for each operator the library defines on those kinds.
_SAME_NUMBERS = {(INT, INT): INT, (UINT, UINT): UINT, (DOUBLE, DOUBLE): DOUBLE}
_ARITHMETIC: Mapping[str, Mapping[tuple[str, str], str]] = {
    "+": {**_SAME_NUMBERS, (STRING, STRING): STRING, (BYTES, BYTES): BYTES, (LIST, LIST): LIST, (LIST, MAP): LIST,
          (TIMESTAMP, DURATION): TIMESTAMP, (DURATION, DURATION): DURATION},
    "-": {**_SAME_NUMBERS, (TIMESTAMP, TIMESTAMP): DURATION, (TIMESTAMP, DURATION): TIMESTAMP,
          (DURATION, DURATION): DURATION},
    "*": _SAME_NUMBERS,
    "/": _SAME_NUMBERS,
    "%": {(INT, INT): INT, (UINT, UINT): UINT},
}
_ORDERED = frozenset({(a, b) for a in _NUMBERS for b in _NUMBERS} | {
    (kind, kind) for kind in (BOOL, STRING, BYTES, TIMESTAMP, DURATION)})
_IN = frozenset({(kind, LIST) for kind in KINDS} | {(kind, MAP) for kind in (BOOL, INT, UINT, STRING, OPTIONAL)})
_NEGATABLE = frozenset({INT, DOUBLE, BOOL})  # the library negates a bool too


@dataclass(frozen=True, slots=True)
class _Function:
    """A function of the library: a method (`x.f(…)`) or not (`f(…)`), the kinds of its receiver
    and of each argument (None: any), and what it gives."""

    method: bool
    receiver: frozenset[str] | None
    params: tuple[frozenset[str] | None, ...]
    result: CelType


_STRINGISH = frozenset({STRING})
_CONVERTIBLE = frozenset({INT, UINT, DOUBLE, STRING})
_TIME_PARTS = ("getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek")
_CLOCK_PARTS = ("getHours", "getMinutes", "getSeconds", "getMilliseconds")
FUNCTIONS: Mapping[str, _Function] = {
    "size": _Function(True, frozenset({STRING, BYTES, LIST, MAP}), (), _of(INT)),  # also size(x)
    **{name: _Function(True, _STRINGISH, (_STRINGISH,), _of(BOOL))
       for name in ("contains", "startsWith", "endsWith", "matches")},
    "int": _Function(False, None, (_CONVERTIBLE,), _of(INT)),
    "uint": _Function(False, None, (_CONVERTIBLE,), _of(UINT)),
    "double": _Function(False, None, (_CONVERTIBLE,), _of(DOUBLE)),
    "string": _Function(False, None, (frozenset({INT, UINT, DOUBLE, STRING, BYTES, TIMESTAMP, DURATION}),), _STRING),
    "bytes": _Function(False, None, (frozenset({STRING, BYTES}),), _of(BYTES)),
    "timestamp": _Function(False, None, (frozenset({STRING, TIMESTAMP}),), _of(TIMESTAMP)),
    "duration": _Function(False, None, (frozenset({STRING, DURATION}),), _of(DURATION)),
    "dyn": _Function(False, None, (None,), DYN),
    "type": _Function(False, None, (None,), _of(TYPE)),
    **{name: _Function(True, frozenset({TIMESTAMP}), (), _of(INT)) for name in _TIME_PARTS},
    **{name: _Function(True, frozenset({TIMESTAMP, DURATION}), (), _of(INT)) for name in _CLOCK_PARTS},
    "optional.of": _Function(False, None, (None,), _of(OPTIONAL)),
    "optional.ofNonZeroValue": _Function(False, None, (None,), _of(OPTIONAL)),
    "optional.none": _Function(False, None, (), _of(OPTIONAL)),
    "hasValue": _Function(True, frozenset({OPTIONAL}), (), _of(BOOL)),
    "value": _Function(True, frozenset({OPTIONAL}), (), DYN),
    "orValue": _Function(True, frozenset({OPTIONAL}), (None,), DYN),
    "or": _Function(True, frozenset({OPTIONAL}), (None,), _of(OPTIONAL)),
}
#: The macros: `has(x.f)` and, on a list or a map, these (the variable, then the expressions).
MACROS = ("has", "all", "exists", "exists_one", "map", "filter")
_PREDICATES = ("all", "exists", "exists_one")
_KNOWN = ("size, contains, startsWith, endsWith, matches, int, uint, double, string, bytes, timestamp, duration, "
          "dyn, type, the getters of a timestamp or duration (getHours(), …), optional.of and optional.none, and "
          "the macros has, all, exists, exists_one, map and filter")

_WORDS = {
    BOOL: "true or false", INT: "an int", UINT: "a uint", DOUBLE: "a double", STRING: "a string",
    BYTES: "bytes", NULL: "null", LIST: "a list", MAP: "a map", TYPE: "a type", TIMESTAMP: "a timestamp",
    DURATION: "a duration", OPTIONAL: "an optional",
}


def describe(kinds: frozenset[str]) -> str:
    """The kinds in words: "an int", "a string or a list", "a number"."""
    if kinds == KINDS:
        return "a value only the call decides"
    if len(kinds) > 1 and kinds <= _NUMBERS:
        return "a number"
    words = [_WORDS[kind] for kind in sorted(kinds)]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def condition_problem(source: str) -> str | None:
    """What is certainly wrong with the condition `source` (module docstring), in words that follow
    "condition '…' "; None when nothing is. `source` is CEL the library has already compiled: what
    this parser does not understand (a gap in it, not in the condition) is not refused."""
    try:
        found = condition_type(source)
    except ConditionRefused as refused:
        return str(refused)
    if found is not None and not found.can_be(BOOL):
        return (f"gives {describe(found.kinds)}, never true or false: a condition is a test, such as a comparison "
                "(arguments.limit <= 100), has(arguments.x), or tests joined by && and ||")
    return None


class ConditionRefused(Exception):
    """What is certainly wrong with a condition, in words."""


def condition_type(source: str) -> CelType | None:
    """The type of the CEL expression `source` over what a condition sees; None when this parser
    does not understand it. Raises ConditionRefused for what is certainly wrong in it (module
    docstring) but its own type, which is `condition_problem`'s to judge."""
    try:
        return _Checker().type_of(_Parser(_tokens(source)).parse(), {})
    except (_Unparsed, RecursionError):  # nested deeper than Python's stack (`!!!…!true`): the library's
        return None


# --- parsing -------------------------------------------------------------------------------------
class _Unparsed(Exception):
    """Text this parser does not understand (the library, which has compiled it, does)."""


_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<raw>(?:[rR][bB]?|[bB][rR])(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"[^"\n]*"|'[^'\n]*'))
  | (?P<string>[bB]?(?:\"\"\"(?:\\[\s\S]|[^\\])*?\"\"\"|'''(?:\\[\s\S]|[^\\])*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|\d*\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+[uU]?)
  | (?P<ident>[_A-Za-z][_A-Za-z0-9]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||[-+*/%!<>?:.,()\[\]{}])
""", re.VERBOSE)

Token = tuple[str, str]  # (kind, text)


def _tokens(source: str) -> list[Token]:
    tokens: list[Token] = []
    position = 0
    while position < len(source):
        found = _TOKEN.match(source, position)
        if found is None:
            raise _Unparsed(source[position:])
        kind = found.lastgroup or ""
        if kind != "space":
            tokens.append(("string" if kind == "raw" else kind, found.group()))
        position = found.end()
    return tokens


# The tree: tuples whose first item says what the node is.
Node = tuple


class _Parser:
    """CEL's grammar (https://github.com/google/cel-spec/blob/master/doc/langdef.md#syntax), by
    recursive descent."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.at = 0

    def parse(self) -> Node:
        node = self._expr()
        if self.at != len(self.tokens):
            raise _Unparsed(self.tokens[self.at][1])
        return node

    def _peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def _take(self) -> Token:
        if self.at >= len(self.tokens):
            raise _Unparsed("end of the condition")
        self.at += 1
        return self.tokens[self.at - 1]

    def _accept(self, text: str) -> bool:
        if self._peek() == text:
            self.at += 1
            return True
        return False

    def _expect(self, text: str) -> None:
        if not self._accept(text):
            raise _Unparsed(f"expected {text}")

    def _expr(self) -> Node:
        test = self._binary(0)
        if self._accept("?"):
            yes = self._binary(0)
            self._expect(":")
            return ("?:", test, yes, self._expr())
        return test

    _LEVELS = (("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"), ("+", "-"), ("*", "/", "%"))

    def _binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self._unary()
        node = self._binary(level + 1)
        while self._peek() in self._LEVELS[level]:
            operator = self._take()[1]
            node = (operator, node, self._binary(level + 1))
        return node

    def _unary(self) -> Node:
        if self._accept("!"):
            return ("!", self._unary())
        if self._accept("-"):
            return ("neg", self._unary())
        return self._member()

    def _member(self) -> Node:
        node = self._primary()
        while True:
            if self._accept("."):
                kind, name = self._take()
                if kind != "ident":
                    raise _Unparsed(name)
                node = ("call", node, name, self._arguments()) if self._accept("(") else ("select", node, name)
            elif self._accept("["):
                index = self._expr()
                self._expect("]")
                node = ("index", node, index)
            elif self._peek() == "{" and node[0] in ("ident", "select"):
                raise ConditionRefused("builds a message (Name{…}), which conditions cannot")
            else:
                return node

    def _arguments(self) -> tuple[Node, ...]:
        return tuple(self._items(")"))

    def _items(self, end: str) -> list[Node]:
        items: list[Node] = []
        while not self._accept(end):
            items.append(self._expr())
            if not self._accept(","):
                self._expect(end)
                break
        return items

    def _primary(self) -> Node:
        self._accept(".")  # `.name`: the name from the root, as a name is read anyway
        kind, text = self._take()
        if kind == "ident":
            if text in ("true", "false"):
                return ("literal", _of(BOOL))
            if text == "null":
                return ("literal", _of(NULL))
            if self._accept("("):
                return ("call", None, text, self._arguments())
            return ("ident", text)
        if kind == "number":
            return ("literal", _of(_number_kind(text)))
        if kind == "string":
            prefix = text[: len(text) - len(text.lstrip("rRbB"))]
            return ("literal", _of(BYTES if "b" in prefix.lower() else STRING))
        if text == "(":
            node = self._expr()
            self._expect(")")
            return node
        if text == "[":
            return ("list", tuple(self._items("]")))
        if text == "{":
            entries: list[tuple[Node, Node]] = []
            while not self._accept("}"):
                key = self._expr()
                self._expect(":")
                entries.append((key, self._expr()))
                if not self._accept(","):
                    self._expect("}")
                    break
            return ("map", tuple(entries))
        raise _Unparsed(text)


def _number_kind(text: str) -> str:
    if text[-1] in "uU":
        return UINT
    if text[:2].lower() != "0x" and any(ch in text for ch in ".eE"):
        return DOUBLE
    return INT


# --- types ---------------------------------------------------------------------------------------
def _union(*types: CelType) -> CelType:
    if all(found == types[0] for found in types):
        return types[0]
    return CelType(frozenset().union(*(found.kinds for found in types)))


def _wants(found: CelType, kinds: frozenset[str], what: str) -> None:
    if found.kinds.isdisjoint(kinds):
        raise ConditionRefused(f"uses {describe(found.kinds)} as {what}, which must be {describe(kinds)}")


class _Checker:
    def type_of(self, node: Node, scope: Mapping[str, CelType]) -> CelType:
        kind = node[0]
        if kind == "literal":
            return node[1]
        if kind == "ident":
            return self._ident(node[1], scope)
        if kind in ("||", "&&"):
            for operand in node[1:]:
                _wants(self.type_of(operand, scope), frozenset({BOOL}), f"an operand of {kind}")
            return _of(BOOL)
        if kind == "!":
            _wants(self.type_of(node[1], scope), frozenset({BOOL}), "the operand of !")
            return _of(BOOL)
        if kind == "neg":
            operand = self.type_of(node[1], scope)
            _wants(operand, _NEGATABLE, "the operand of -")
            return _of(*(operand.kinds & _NEGATABLE))
        if kind == "?:":
            _wants(self.type_of(node[1], scope), frozenset({BOOL}), "the test of ? :")
            return _union(self.type_of(node[2], scope), self.type_of(node[3], scope))
        if kind in ("==", "!="):
            self.type_of(node[1], scope), self.type_of(node[2], scope)
            return _of(BOOL)
        if kind == "in":
            _wants(self.type_of(node[2], scope), frozenset({LIST, MAP}), "the right side of in")
        if kind in ("<", "<=", ">", ">=", "in"):
            self._overload(kind, node, scope, dict.fromkeys(_ORDERED if kind != "in" else _IN, BOOL))
            return _of(BOOL)
        if kind in _ARITHMETIC:
            return _of(*self._overload(kind, node, scope, _ARITHMETIC[kind]))
        if kind == "list":
            items = [self.type_of(item, scope) for item in node[1]]
            return CelType(frozenset({LIST}), items=_union(*items) if items else None)
        if kind == "map":
            for key, value in node[1]:
                self.type_of(key, scope), self.type_of(value, scope)
            return _of(MAP)
        if kind == "select":
            return self._field(self.type_of(node[1], scope), node[2])
        if kind == "index":
            return self._index(node, scope)
        return self._call(node, scope)

    def _ident(self, name: str, scope: Mapping[str, CelType]) -> CelType:
        if name in scope:
            return scope[name]
        if name in VARIABLES:
            return VARIABLES[name]
        if name in _TYPE_NAMES:
            return _of(TYPE)
        raise ConditionRefused(f"reads {name}; only arguments and principal are known (and the variable a macro "
                       "such as all(x, …) binds)")

    def _overload(self, operator: str, node: Node, scope: Mapping[str, CelType],
                  table: Mapping[tuple[str, str], str]) -> set[str]:
        left, right = self.type_of(node[1], scope), self.type_of(node[2], scope)
        results = {result for (a, b), result in table.items() if a in left.kinds and b in right.kinds}
        if not results:
            raise ConditionRefused(f"applies {operator} to {describe(left.kinds)} and {describe(right.kinds)}, "
                           "which CEL does not define (it does not convert between types)")
        return results

    def _field(self, found: CelType, name: str) -> CelType:
        _wants(found, frozenset({MAP}), f"a map (reading .{name})")
        if found.fields is None:
            return DYN
        if name not in found.fields:
            raise ConditionRefused(f"reads .{name} of principal, which has only {', '.join(sorted(found.fields))}")
        return found.fields[name]

    def _index(self, node: Node, scope: Mapping[str, CelType]) -> CelType:
        found = self.type_of(node[1], scope)
        _wants(found, frozenset({LIST, MAP}), "a list or a map (reading [ ])")
        self.type_of(node[2], scope)
        return (found.items or DYN) if found.kinds == {LIST} else DYN

    def _call(self, node: Node, scope: Mapping[str, CelType]) -> CelType:
        _, target, name, arguments = node
        if target is not None and target[0] == "ident" and target[1] not in scope and target[1] not in VARIABLES:
            namespaced = f"{target[1]}.{name}"  # optional.of(…), or math.greatest(…) of another library
            if namespaced in FUNCTIONS or (name not in MACROS and name not in FUNCTIONS):
                target, name = None, namespaced
        if name in MACROS:
            return self._macro(name, target, arguments, scope)
        function = FUNCTIONS.get(name)
        if function is None:
            raise ConditionRefused(f"calls {name}(), which CEL conditions do not have; they have {_KNOWN}")
        if name == "size" and target is None and len(arguments) == 1:
            target, arguments = arguments[0], ()  # size(x) is x.size()
        if function.method and target is None:
            raise ConditionRefused(f"calls {name}() as a function; it is a method: x.{name}(…)")
        if not function.method and target is not None:
            raise ConditionRefused(f"calls {name}() as a method; it is a function: {name}(x)")
        if len(arguments) != len(function.params):
            raise ConditionRefused(f"gives {name}() {len(arguments)} argument(s); it takes {len(function.params)}")
        if target is not None and function.receiver is not None:
            _wants(self.type_of(target, scope), function.receiver, f"the receiver of .{name}()")
        for number, (argument, kinds) in enumerate(zip(arguments, function.params, strict=True), start=1):
            found = self.type_of(argument, scope)
            if kinds is not None:
                _wants(found, kinds, f"argument {number} of {name}()")
        return function.result

    def _macro(self, name: str, target: Node | None, arguments: Sequence[Node], scope: Mapping[str, CelType]) -> CelType:
        if name == "has":
            if target is not None or len(arguments) != 1 or arguments[0][0] != "select":
                raise ConditionRefused("uses has() on something other than a field: write has(arguments.x)")
            self._field(self.type_of(arguments[0][1], scope), arguments[0][2])
            return _of(BOOL)
        counts = (2, 3) if name == "map" else (2,)
        if target is None or len(arguments) not in counts or arguments[0][0] != "ident":
            shape = "x.map(v, expression) or x.map(v, test, expression)" if name == "map" else f"x.{name}(v, test)"
            raise ConditionRefused(f"uses .{name}() wrongly: write {shape}")
        found = self.type_of(target, scope)
        _wants(found, frozenset({LIST, MAP}), f"the receiver of .{name}()")
        variable = found.items if found.items is not None and len(found.kinds) == 1 else DYN
        inner = {**scope, arguments[0][1]: variable}
        tests = arguments[1:] if name in _PREDICATES or name == "filter" else arguments[1:-1]
        for test in tests:
            _wants(self.type_of(test, inner), frozenset({BOOL}), f"the test of .{name}()")
        if name in _PREDICATES:
            return _of(BOOL)
        if name == "map":
            return CelType(frozenset({LIST}), items=self.type_of(arguments[-1], inner))
        return CelType(frozenset({LIST}), items=variable)
