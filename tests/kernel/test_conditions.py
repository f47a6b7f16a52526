"""The static check of a rule's CEL condition (`conditions.py`): what can never be true or false,
or calls what CEL does not have, is refused with its reason; what only the arguments decide is
accepted. Its operator and function tables are checked against the pinned CEL library itself."""

from __future__ import annotations

import datetime
import itertools

import cel
import pytest

from apps.kernel import conditions
from apps.kernel.conditions import (
    BOOL,
    BYTES,
    DOUBLE,
    DURATION,
    INT,
    LIST,
    MAP,
    NULL,
    OPTIONAL,
    STRING,
    TIMESTAMP,
    TYPE,
    UINT,
    ConditionRefused,
    condition_problem,
    condition_type,
)

REFUSED = [
    ("frobnicate(arguments)", "calls frobnicate(), which CEL conditions do not have; they have size, contains"),
    ("arguments.s.lowerAscii() == 'a'", "calls lowerAscii(), which CEL conditions do not have"),
    ("math.greatest(1, 2) == 2", "calls math.greatest(), which CEL conditions do not have"),
    ("arguments.MaxResults + 1", "gives an int, never true or false: a condition is a test"),
    ("'yes'", "gives a string, never true or false"),
    ("[arguments.a]", "gives a list, never true or false"),
    ("arguments", "gives a map, never true or false"),
    ("arguments.a * 2.0", "gives a double, never true or false"),
    ("arguments.a ? 1 : 2", "gives an int, never true or false"),
    ("arguments.a == 1 && 5", "uses an int as an operand of &&, which must be true or false"),
    ("!size(arguments)", "uses an int as the operand of !, which must be true or false"),
    ("arguments.list.all(x, x + 1)", "uses an int as the test of .all(), which must be true or false"),
    ("'a' - 1 == 0", "applies - to a string and an int, which CEL does not define"),
    ("arguments.a + 1.5 > 'x'", "applies > to a double and a string, which CEL does not define"),
    ("arguments.tag in 'abc'", "uses a string as the right side of in, which must be a list or a map"),
    ("principal.scopes.startsWith('a')", "uses a list as the receiver of .startsWith(), which must be a string"),
    ("principal.role == 'admin'", "reads .role of principal, which has only key, scopes, subject, team, tenant"),
    ("has(principal.role)", "reads .role of principal"),
    ("request.size > 1", "reads request; only arguments and principal are known"),
    ("startsWith(arguments.path, '/etc')", "calls startsWith() as a function; it is a method: x.startsWith(…)"),
    ("arguments.n.int() > 1", "calls int() as a method; it is a function: int(x)"),
    ("arguments.path.startsWith('/a', '/b')", "gives startsWith() 2 argument(s); it takes 1"),
    ("google.Thing{a: 1} == arguments.a", "builds a message"),
    ("size(true) > 0", "uses true or false as the receiver of .size()"),
]


@pytest.mark.parametrize(("source", "words"), REFUSED, ids=[source for source, _ in REFUSED])
def test_what_is_certainly_wrong_is_refused_with_its_reason(source: str, words: str) -> None:
    cel.compile(source)  # the library alone takes every one of them
    problem = condition_problem(source)
    assert problem is not None and problem.startswith(words), problem


ACCEPTED = [
    "arguments.a == 1",
    "arguments.flag",  # only the call says whether it is a bool: accepted (policy.py: else it cannot be evaluated)
    "!arguments.flag || arguments.force",
    "arguments.list[0]",
    "has(arguments.a) && arguments.a > 1 && arguments.a <= 2.5",
    "arguments.items.all(item, item.startsWith('s3://'))",
    "arguments.items.exists_one(i, i == 'x') || arguments.items.map(i, i * 2).size() > 0",
    "arguments.items.filter(i, i > 1).size() == 0 && [1, 2].map(x, x > 1, x * 2) == [4]",
    "principal.scopes.exists(scope, scope.startsWith('tools:'))",
    "'tools:write' in principal.scopes && principal.team == '' && size(principal.key) > 3",
    "arguments.path.matches('^/home/') && !arguments.path.contains('..') && arguments.path.endsWith('.txt')",
    "type(arguments.n) == int ? arguments.n < 10 : arguments.n.size() < 10",
    "int(arguments.n) % 2 == 0 || uint(arguments.n) > 3u || double(arguments.n) / 2.0 > 1.5",
    "timestamp(arguments.at).getHours() < 12 && duration(arguments.wait) < duration('1h')",
    "timestamp(arguments.at) - timestamp('2020-01-01T00:00:00Z') > duration('24h')",
    "string(arguments.n) + 'x' == '1x' && bytes(arguments.s) == b'ab' && dyn(arguments.a) == 1",
    "arguments['odd key'] == 1 && {'a': 1}.a == 1 && .arguments.a == 1",
    "optional.of(arguments.a).hasValue() && optional.none().orValue(1) == 1",
    "0x1F == 31 && 1e3 > 0.5 && .5 < 1.0 && r'\\d' != \"\"\"x\"\"\" && null == arguments.gone",
    "// a comment\narguments.a == 1",
    "-arguments.delta < 0 && arguments.a != -1",
]


@pytest.mark.parametrize("source", ACCEPTED)
def test_what_the_arguments_decide_is_accepted(source: str) -> None:
    cel.compile(source)
    assert condition_type(source) is not None  # understood, not let through unparsed
    assert condition_problem(source) is None


def test_what_the_parser_does_not_understand_is_left_to_the_library() -> None:
    # A gap in this parser must not refuse a condition the library takes: `1.` is no CEL number,
    # and a character no CEL has cannot be read.
    assert condition_type("arguments.a == 1 ` 2") is None
    assert condition_problem("arguments.a == 1 ` 2") is None
    deep = "!" * 1990 + "true"  # nested past Python's stack, within the 2000 characters a condition may have
    cel.compile(deep)
    assert condition_problem(deep) is None


# --- the tables are the library's ---------------------------------------------------------------
SAMPLES = {
    BOOL: "true", INT: "2", UINT: "2u", DOUBLE: "1.5", STRING: "'12'", BYTES: "b'a'", NULL: "null", LIST: "[1]",
    MAP: "{'a': 1}", TYPE: "int", TIMESTAMP: "timestamp('2020-01-01T00:00:00Z')", DURATION: "duration('90s')",
    OPTIONAL: "optional.of(1)",
}


def _kind(value: object) -> set[str]:
    """The kinds a value the library gives back may be of (a uint and a type's name come back as
    an int and a string)."""
    if isinstance(value, bool):
        return {BOOL}
    if isinstance(value, int):
        return {INT, UINT}
    if isinstance(value, str):
        return {STRING, TYPE}
    found = {float: DOUBLE, bytes: BYTES, type(None): NULL, list: LIST, dict: MAP, datetime.datetime: TIMESTAMP,
             datetime.timedelta: DURATION, cel.OptionalValue: OPTIONAL}
    return {next(kind for python, kind in found.items() if isinstance(value, python))}


def _agrees(source: str, *, exactly: bool) -> None:
    """What the check infers holds for the library: what it refuses, the library cannot evaluate;
    what the library evaluates, the check takes, of the kind it inferred. `exactly`: and what the
    library cannot evaluate, the check refuses (for operators, whose only errors are of types)."""
    try:
        value = cel.evaluate(source, {})
    except Exception:  # noqa: BLE001 - any refusal of the library
        library = None
    else:
        library = _kind(value)
    try:
        inferred = condition_type(source)
    except ConditionRefused:
        assert library is None, f"{source}: refused, but the library gives {value!r}"
        return
    assert inferred is not None, source
    if library is not None:
        assert library & inferred.kinds, f"{source}: inferred {sorted(inferred.kinds)}, the library gives {value!r}"
    elif exactly:
        pytest.fail(f"{source}: taken, but the library cannot evaluate it")


@pytest.mark.parametrize("operator", ["+", "-", "*", "/", "%", "<", "<=", ">", ">=", "in", "==", "!="])
def test_the_operators_are_the_librarys(operator: str) -> None:
    for (_, left), (_, right) in itertools.product(SAMPLES.items(), repeat=2):
        _agrees(f"({left}) {operator} ({right})", exactly=True)


def test_the_unary_operators_are_the_librarys() -> None:
    for sample in SAMPLES.values():
        _agrees(f"-({sample})", exactly=True)
        _agrees(f"!({sample})", exactly=True)


def test_the_functions_are_the_librarys() -> None:
    for name, function in conditions.FUNCTIONS.items():
        for receiver, argument in itertools.product([*SAMPLES.values(), None], SAMPLES.values()):
            arguments = ", ".join([argument] * len(function.params))
            if function.method and receiver is not None:
                _agrees(f"({receiver}).{name}({arguments})", exactly=False)
            elif not function.method and receiver is None:
                _agrees(f"{name}({arguments})", exactly=False)


def test_every_function_of_the_table_exists_in_the_library() -> None:
    # A library upgrade that drops one fails here rather than deny calls.
    at, wait = SAMPLES[TIMESTAMP], SAMPLES[DURATION]
    working = {
        "size": "'ab'.size() + size([1])", "contains": "'ab'.contains('a')", "startsWith": "'ab'.startsWith('a')",
        "endsWith": "'ab'.endsWith('b')", "matches": "'ab'.matches('^a')", "int": "int('1')", "uint": "uint(1)",
        "double": "double(1)", "string": "string(1)", "bytes": "bytes('a')", "dyn": "dyn(1)", "type": "type(1)",
        "timestamp": "timestamp('2020-01-01T00:00:00Z')", "duration": "duration('1s')",
        **{name: f"{at}.{name}()" for name in conditions._TIME_PARTS},
        **{name: f"{wait}.{name}()" for name in conditions._CLOCK_PARTS},
        "optional.of": "optional.of(1)", "optional.ofNonZeroValue": "optional.ofNonZeroValue(1)",
        "optional.none": "optional.none()", "hasValue": "optional.of(1).hasValue()", "value": "optional.of(1).value()",
        "orValue": "optional.none().orValue(1)", "or": "optional.none().or(optional.of(1))",
    }
    assert set(working) == set(conditions.FUNCTIONS)
    for source in working.values():
        cel.evaluate(source, {})
        _agrees(source, exactly=True)


def test_the_macros_are_the_librarys() -> None:
    for source in ("[1].all(x, x > 0)", "[1].exists(x, x > 0)", "[1].exists_one(x, x > 0)", "[1].map(x, x + 1)",
                   "[1].map(x, x > 0, x + 1)", "[1].filter(x, x > 0)", "has({'a': 1}.a)", "{'a': 1}.all(k, k == 'a')"):
        _agrees(source, exactly=True)
